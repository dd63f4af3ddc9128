"""``learn.py --num-envs N`` end to end: real scene processes, real sockets, real crashes."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import (
    LEARN,
    assert_export_is_the_latest_checkpoint,
    copy_run,
    find_academy_process,
    free_port,
    learn,
    learn_in_process,
    mean_rewards,
    run_academy,
    write,
)
from tests.e2e.test_learn import BASIC_SHORT, steps
from tests.e2e.test_multibrain import TENNIS_SHORT, checkpoint_state

#: 3DBallIL's student: 2400 agent steps, 100 environment steps of 24 students.
IMITATION_SHORT = """
Student:
    trainer: imitation
    brain_to_imitate: Teacher
    max_steps: 2400
    summary_freq: 1200
    batch_size: 64
"""

BALL_SHORT = """
Ball3DBrain:
    normalize: true
    buffer_size: 1536
    batch_size: 256
    num_epoch: 10
    time_horizon: 128
    clip_value: false
    max_steps: {max_steps}
    summary_freq: 4800
"""


def start(cwd, *args, port):
    return subprocess.Popen([sys.executable, LEARN, *args, "--base-port", str(port)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(predicate, seconds=120):
    deadline = time.time() + seconds
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.2)


def test_bad_num_envs_and_restart_limits_are_errors_before_launch(tmp_path):
    for args, message in [(["--num-envs", "0"], "--num-envs: must be >= 1, got '0'"),
                          (["--num-envs", "two"], "--num-envs: expected an integer, got 'two'"),
                          (["--max-lifetime-restarts", "x"], "--max-lifetime-restarts: expected an integer"),
                          (["--restarts-rate-limit-n", "-5"], "--restarts-rate-limit-n: must be >= -1"),
                          (["--restarts-rate-limit-period-s", "inf"],
                           "--restarts-rate-limit-period-s: expected a finite number"),
                          (["--num-envs", "3", "--worker-id", "65534"], "past 65535")]:
        code, out = learn_in_process(tmp_path, "Basic", "--train", *args, port=1)
        assert code == 1 and message in out, out
        assert "Launching" not in out  # nothing was started


def test_a_busy_port_of_one_environment_names_it_and_leaves_nothing_running(tmp_path):
    import socket

    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port + 1))
        busy.listen(1)
        code, out = learn_in_process(tmp_path, "Basic", "--train", "--num-envs", "2", port=port)
    assert code == 1, out
    assert f"127.0.0.1:{port + 1}" in out and "--base-port" in out and "Environment 1 of 2" in out
    with pytest.raises(AssertionError):
        find_academy_process(f"--port {port} ")


@pytest.mark.slow
def test_a_killed_environment_restarts_and_past_the_limit_the_run_saves_and_exits_1(tmp_path):
    config = write(tmp_path / "basic.yaml", BASIC_SHORT.replace("max_steps: 3000", "max_steps: 1.0e6"))
    port = free_port()
    proc = start(tmp_path, "Basic", "--train", "--trainer-config", config, "--num-envs", "2",
                 "--max-lifetime-restarts", "1", "--restarts-rate-limit-n", "-1", "--save-freq", "300", port=port)
    try:
        wait_for(lambda: list((tmp_path / "models" / "ppo").glob("model-*.cptk.index")))
        first = find_academy_process(f"--port {port + 1} ")
        os.kill(first, signal.SIGKILL)
        # The restarted environment 1 is a new process on the same port; environment 0 is untouched.
        wait_for(lambda: _pid_or_none(f"--port {port + 1} ") not in (None, first))
        survivor = find_academy_process(f"--port {port} ")
        saved = _checkpoints(tmp_path)
        wait_for(lambda: len(_checkpoints(tmp_path) - saved) >= 2)  # it trains on with both: two more saves
        os.kill(find_academy_process(f"--port {port + 1} "), signal.SIGKILL)  # the second crash is past the limit
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "Environment 1 failed and will be restarted: UnityCommunicationException" in out, out
    assert "Restarting environment 1 (restart 1" in out, out
    assert "Environment 1 failed and cannot be restarted" in out and "--max-lifetime-restarts 1" in out, out
    assert "exited with code -9" in out and "Basic-worker1.log" in out, out
    assert proc.returncode == 1, out
    assert _pid_or_none(f"--port {port} ") is None and survivor  # nothing is left running
    model = tmp_path / "models" / "ppo"
    # A loadable checkpoint and a valid export are left.
    # The export holds the weights of the checkpoint saved last (policy and value: 8 tensors), and plays.
    assert assert_export_is_the_latest_checkpoint(model, "Basic.bytes") == 8
    run_academy("Basic", "--brain", f"BasicBrain=internal:{model / 'Basic.bytes'}", "--episodes", "2")
    saved = checkpoint_state(model)["trainers"]["BasicBrain"]["step"]
    config = write(tmp_path / "more.yaml", BASIC_SHORT.replace("max_steps: 3000", f"max_steps: {saved + 500}"))
    code, out = learn(tmp_path, "Basic", "--train", "--load", "--trainer-config", config)
    assert code == 0, out


def _checkpoints(tmp_path):
    return {p.name for p in (tmp_path / "models" / "ppo").glob("model-*.cptk.index")}


def _pid_or_none(needle):
    try:
        return find_academy_process(needle)
    except AssertionError:
        return None


@pytest.mark.slow
def test_3dball_learns_with_two_environments(tmp_path):
    """52.8k steps: with two environments seed 0's summaries (every 2400 steps, as the shipped
    block's) read 3.3, 3.9, 7.4, 17.3 and 35.7 at 2.4k, 9.6k, 16.8k, 21.6k and 26.4k, then 100 (every
    ball balanced) from 36k on; summaries in which no episode ended print no mean."""
    ball = BALL_SHORT.format(max_steps=52800).replace("summary_freq: 4800", "summary_freq: 2400")
    config = write(tmp_path / "ball.yaml", ball)
    code, out = learn(tmp_path, "3DBall", "--train", "--trainer-config", config, "--num-envs", "2", timeout=600)
    assert code == 0, out
    means = mean_rewards(out, "Ball3DBrain")
    assert means and means[-1] >= 90, out
    # 24 agents per environment step: 52.8k agent steps are 2200 environment steps.
    assert "Training finished after 2200 environment steps" in out, out
    bytes_path = tmp_path / "models" / "ppo" / "3DBall.bytes"
    assert run_academy("3DBall", "--brain", f"Ball3DBrain=internal:{bytes_path}", "--episodes", "12") >= 80


@pytest.mark.slow
def test_tennis_with_its_ghost_runs_with_two_environments(tmp_path):
    config = write(tmp_path / "tennis.yaml", TENNIS_SHORT)
    code, out = learn(tmp_path, "Tennis", "--train", "--trainer-config", config, "--run-path", "t",
                      "--num-envs", "2", timeout=180)
    assert code == 0, out
    # 2 x 8 learner agents per environment step: 4000 agent steps are 250 environment steps.
    assert "Training finished after 250 environment steps" in out, out
    state = checkpoint_state(tmp_path / "models" / "t")
    # Overlapped stepping counts each environment's 8 learners as its answer arrives; when both answer
    # in one collect past 3992, the last step passes max_steps by one environment's learners.
    assert 4000 <= state["trainers"]["TennisBrain"]["step"] <= 4008
    assert state["trainers"]["ghost-TennisBrain"]["n_snapshots"] >= 2


@pytest.mark.slow
def test_3dball_imitation_runs_with_two_environments(tmp_path):
    config = write(tmp_path / "il.yaml", IMITATION_SHORT)
    code, out = learn(tmp_path, "3DBallIL", "--train", "--trainer-config", config, "--run-path", "il",
                      "--num-envs", "2", timeout=180)
    assert code == 0, out
    assert "Training finished after 100 environment steps" in out, out  # 24 students per step
    assert "Imitating Teacher" in out, out


@pytest.mark.slow
def test_a_one_environment_run_loads_into_two(tmp_path, basic_short_run):
    copy_run(basic_short_run[0], tmp_path)  # one environment, 3000 steps
    config = write(tmp_path / "more.yaml", BASIC_SHORT.replace("max_steps: 3000", "max_steps: 5000"))
    code, out = learn(tmp_path, "Basic", "--train", "--trainer-config", config, "--load", "--num-envs", "2")
    assert code == 0, out
    # One summary per 1000 steps, at the first count past each boundary: the two environments add one or
    # two agent-steps at a time, as their replies interleave, so it may sit one step beyond it.
    printed = steps(out, "BasicBrain")
    assert len(printed) == 2 and 4000 <= printed[0] <= 4001 and 5000 <= printed[1] <= 5001, out
    state = json.loads(max((tmp_path / "models" / "ppo").glob("*.state.json"),
                           key=lambda p: p.stat().st_mtime).read_text())
    assert state["trainers"]["BasicBrain"]["step"] == printed[1]
    # 3000 one-agent steps, then 1000 steps of two agents (the environment step count resumes too).
    assert "Training finished after 4000 environment steps" in out, out


@pytest.mark.slow
def test_timers_and_onnx_files_account_for_the_run(tmp_path):
    config = write(tmp_path / "basic.yaml", BASIC_SHORT)
    started = time.time()
    # Stepped together, each of the 1500 steps is one inference and one env_step (the overlapped
    # schedule has as many rounds as the environments' interleaving gives).
    code, out = learn(tmp_path, "Basic", "--train", "--trainer-config", config, "--num-envs", "2",
                      "--save-freq", "500", "--keep-checkpoints", "2", "--schedule", "sync")
    assert code == 0, out
    model = tmp_path / "models" / "ppo"
    timers = json.loads((model / "timers.json").read_text())
    parts = timers["children"]
    assert {"build", "env_reset", "inference", "env_step", "buffer", "update", "summaries", "checkpoint",
            "export"} <= set(parts), sorted(parts)
    assert "env_wait" in parts["env_step"]["children"]
    assert parts["env_step"]["count"] == 1500 and parts["inference"]["count"] == 1500
    assert sum(p["total"] for p in parts.values()) >= 0.9 * timers["total"]
    assert timers["total"] <= time.time() - started
    # One ONNX file per exporting brain at the end, one per kept checkpoint, deleted with it.
    assert (model / "BasicBrain.onnx").is_file()
    assert sorted(p.name for p in model.glob("BasicBrain-*.onnx")) == ["BasicBrain-1000.onnx", "BasicBrain-1500.onnx"]


@pytest.mark.slow
def test_two_modern_protocol_environments_and_their_stats_reach_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write(tmp_path / "basic.yaml", BASIC_SHORT.replace("BasicBrain:", '"Basic?team=0":'))
    code, out = learn(tmp_path, "Basic", "--train", "--trainer-config", config, "--num-envs", "2",
                      "--protocol", "grpc", "--time-scale", "10")
    assert code == 0, out
    assert "Training finished after 1500 environment steps" in out, out
    model = tmp_path / "models" / "ppo"
    assert (model / "Basic.onnx").is_file() and (model / "Basic.bytes").is_file()  # the behaviour, Unity-named
    events = EventAccumulator(str(next((tmp_path / "summaries" / "ppo").glob("events*"))))
    events.Reload()
    stat = events.Scalars("Academy/BasicBrain Episode Reward")  # the scene's stat, averaged per summary
    rewards = events.Scalars("Environment/Cumulative Reward")
    assert len(stat) == len(rewards) == 3
    # The same episodes averaged by two writers: equal up to float32 summation order, not to a rounding edge.
    np.testing.assert_allclose([s.value for s in stat], [r.value for r in rewards], rtol=1e-5, atol=1e-6)


def test_engine_options_need_the_modern_protocol(tmp_path):
    for args, message in [(["--width", "84"], "--width set the engine of a modern build and need --protocol grpc"),
                          (["--protocol", "http"], "--protocol: expected one of api2, grpc, got 'http'"),
                          (["--protocol", "grpc", "--time-scale", "nan"], "--time-scale: expected a finite number"),
                          (["--protocol", "grpc", "--width", "84"], "needs width and height together")]:
        code, out = learn_in_process(tmp_path, "Basic", "--train", *args, port=1)
        assert code == 1 and message in out, out


@pytest.mark.slow
def test_curriculum_lessons_advance_over_the_modern_protocol_which_has_no_global_done(tmp_path):
    from tests.e2e.test_multibrain import PUSH_CURRICULUM, PUSH_SHORT

    config = write(tmp_path / "push.yaml", PUSH_SHORT.format(max_steps=32000))
    code, out = learn(tmp_path, "Push", "--train", "--trainer-config", config, "--curriculum", PUSH_CURRICULUM,
                      "--protocol", "grpc", "--num-envs", "2", timeout=300)
    assert code == 0, out
    # Checked at each 8000-step summary: progress 0.25 -> lesson 1, 0.5 -> 2, 0.75 -> 3, 1.0 -> 4.
    state = checkpoint_state(tmp_path / "models" / "ppo")
    assert state["curriculum"]["lesson_number"] == 4, out[-3000:]
    assert "Restarting" not in out


@pytest.mark.slow
def test_learn_py_trains_the_modern_tennis_teams_by_self_play_from_one_flat_block(tmp_path):
    """Over gRPC Tennis is one behaviour in two teams; learn.py's block for the base name serves both."""
    config = write(tmp_path / "tennis.yaml", """
        Tennis:
            normalize: true
            batch_size: 256
            buffer_size: 1024
            hidden_units: 32
            max_steps: 4000
            summary_freq: 1000
            self_play: {save_steps: 800, team_change: 2000, swap_steps: 400, window: 3}
        """)
    code, out = learn(tmp_path, "Tennis", "--train", "--trainer-config", config, "--run-path", "t",
                      "--protocol", "grpc", timeout=300)
    assert code == 0, out
    state = checkpoint_state(tmp_path / "models" / "t")["trainers"]
    assert state["Tennis?team=0"]["learner"]["step"] >= 4000
    assert state["Tennis?team=1"]["self_play"]["team_changes"] == [2008]
    assert state["Tennis?team=1"]["self_play"]["snapshots_taken"] >= 4
