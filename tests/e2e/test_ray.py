"""Environments as Ray actors on a 2-node loopback cluster (``learn.py --ray-address``)."""
import os
import re
import subprocess
import sys
import time

import pytest

from tests.conftest import (
    LEARN,
    assert_export_is_the_latest_checkpoint,
    descendants,
    free_port,
    learn_in_process,
    listening_sockets,
    mean_rewards,
    run_academy,
    write,
)
from tests.conftest import learn_subprocess as learn_here
from tests.e2e.test_learn import BASIC_SHORT
from tests.e2e.test_multibrain import TENNIS_SHORT, checkpoint_state, node_names
from tests.e2e.test_num_envs import BALL_SHORT, IMITATION_SHORT

NODE = re.compile(r"Environment (\d+) runs in a Ray actor on node (\w+)")


def learn(cwd, cluster, *args, timeout=600):
    """learn.py with its environments in Ray actors on ``cluster``, in its own interpreter (the Ray
    driver is that process, not the test worker)."""
    return learn_here(cwd, *args, "--ray-address", cluster.address, timeout=timeout)


def worker_node(cluster):
    return [n for n in cluster.list_all_nodes() if n is not cluster.head_node][0]


def test_without_ray_the_option_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is missing
    code, out = learn_in_process(tmp_path, "Basic", "--train", "--ray-address", "auto")
    assert code == 1, out
    assert "pip install 'unity-tf-trainer[ray]'" in out and "Traceback" not in out


@pytest.mark.slow
def test_3dball_trains_through_four_actors_spread_over_two_nodes(tmp_path, ray_cluster):
    # 72k steps, as test_num_envs's two local environments: one environment balances from 26k on.
    config = write(tmp_path / "ball.yaml", BALL_SHORT.format(max_steps=72000))
    code, out = learn(tmp_path, ray_cluster, "3DBall", "--train", "--trainer-config", config, "--num-envs", "4")
    assert code == 0, out
    nodes = dict(NODE.findall(out))
    assert sorted(nodes) == ["0", "1", "2", "3"], out
    assert len(set(nodes.values())) == 2, out  # both nodes got environments
    means = mean_rewards(out, "Ball3DBrain")
    assert means and means[-1] >= 90, out
    # The same outputs as a local run: summaries, checkpoint, export.
    assert list((tmp_path / "summaries" / "ppo").glob("events*"))
    # Each environment steps on its own clock: one loop turn may collect several of them, so the run
    # ends at max_steps or up to one step of the other three environments (12 agents each) past it.
    step = checkpoint_state(tmp_path / "models" / "ppo")["trainers"]["Ball3DBrain"]["step"]
    assert 72000 <= step < 72000 + 3 * 12 + 1 and step % 12 == 0
    bytes_path = tmp_path / "models" / "ppo" / "3DBall.bytes"
    assert "action" in node_names(str(bytes_path))
    assert run_academy("3DBall", "--brain", f"Ball3DBrain=internal:{bytes_path}", "--episodes", "12") >= 80


@pytest.mark.slow
def test_nothing_the_cluster_started_listens_beyond_loopback(ray_cluster):
    ours = descendants(os.getpid())
    listening = [(pid, where, loopback) for pid, where, loopback in listening_sockets() if pid in ours]
    # The scan sees the cluster first: its GCS port is listened on by a process this session started.
    gcs_port = int(ray_cluster.address.rsplit(":", 1)[1])
    assert any(where.endswith(f":{gcs_port}") for _, where, _ in listening), (gcs_port, listening)
    exposed = [(pid, where) for pid, where, loopback in listening if not loopback]
    assert not exposed, exposed


#: Agent steps of the node-loss runs: 1000 steps of the 4 environments. A checkpoint every 100 of
#: them (each save also exports): the node goes after the first, with 90 % of the run still to do.
NODE_LOSS_STEPS = 4000


def _run_and_remove_the_worker_node(tmp_path, cluster, *extra):
    config = write(tmp_path / "basic.yaml", BASIC_SHORT.replace("max_steps: 3000", f"max_steps: {NODE_LOSS_STEPS}"))
    proc = subprocess.Popen([sys.executable, LEARN, "Basic", "--train", "--trainer-config", config, "--num-envs", "4",
                             "--ray-address", cluster.address, "--base-port", str(free_port()), "--save-freq", "100",
                             *extra],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 180
        # The node goes once the run has trained and saved (a run that learned nothing has nothing to save).
        while not (tmp_path / "models" / "ppo" / "checkpoint").is_file():
            assert time.time() < deadline and proc.poll() is None, proc.communicate()[0]
            time.sleep(0.2)
        cluster.remove_node(worker_node(cluster))
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
        cluster.add_node(num_cpus=4)  # the next test gets two nodes again
        cluster.wait_for_nodes()
    return proc.returncode, out


@pytest.mark.slow
def test_a_lost_node_s_environments_restart_on_the_other_and_the_run_finishes(tmp_path, ray_cluster):
    code, out = _run_and_remove_the_worker_node(tmp_path, ray_cluster, "--restarts-rate-limit-n", "-1")
    assert code == 0, out
    assert re.search(r"Environment \d failed and will be restarted: UnityCommunicationException: .*died", out), out
    assert "Restarting environment" in out, out
    assert checkpoint_state(tmp_path / "models" / "ppo")["trainers"]["BasicBrain"]["step"] >= NODE_LOSS_STEPS


@pytest.mark.slow
def test_past_the_restart_limit_a_lost_node_ends_the_run_with_a_save(tmp_path, ray_cluster):
    code, out = _run_and_remove_the_worker_node(tmp_path, ray_cluster, "--max-lifetime-restarts", "0")
    assert code == 1, out
    assert "cannot be restarted" in out and "its node may have been lost" in out, out
    model = tmp_path / "models" / "ppo"
    assert (model / "Basic.bytes").is_file()
    # The export holds the weights of the checkpoint saved last (policy and value: 8 tensors), and plays.
    assert assert_export_is_the_latest_checkpoint(model, "Basic.bytes") == 8
    run_academy("Basic", "--brain", f"BasicBrain=internal:{model / 'Basic.bytes'}", "--episodes", "2")


@pytest.mark.slow
def test_ghost_self_play_runs_through_actors(tmp_path, ray_cluster):
    config = write(tmp_path / "tennis.yaml", TENNIS_SHORT)
    code, out = learn(tmp_path, ray_cluster, "Tennis", "--train", "--trainer-config", config, "--run-path", "t",
                      "--num-envs", "2", timeout=300)
    assert code == 0, out
    assert "Training finished after 250 environment steps" in out, out
    assert checkpoint_state(tmp_path / "models" / "t")["trainers"]["ghost-TennisBrain"]["n_snapshots"] >= 2


@pytest.mark.slow
def test_imitation_runs_through_actors(tmp_path, ray_cluster):
    config = write(tmp_path / "il.yaml", IMITATION_SHORT)
    code, out = learn(tmp_path, ray_cluster, "3DBallIL", "--train", "--trainer-config", config, "--run-path", "il",
                      "--num-envs", "2", timeout=300)
    assert code == 0, out
    assert "Training finished after 100 environment steps" in out and "Imitating Teacher" in out, out
