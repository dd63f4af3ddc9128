"""Helpers shared by many test files, and the test session's one Ray cluster.

Test files import the helpers as ``from conftest import ...`` (``tests/`` has no ``__init__.py``,
so pytest puts it on ``sys.path``): free ports, running ``learn.py`` and ``python -m academy``,
finding an academy process, writing a configuration file.

Ray is told to stay on loopback before anything imports it: with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` its processes bind 127.0.0.1 on Linux.
"""
import errno
import ipaddress
import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARN = os.path.join(ROOT, "learn.py")


def free_port() -> int:
    """A port nothing listens on right now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_process(main, cwd, argv, timeout=600):
    """Run a command line's ``main(argv)`` in this process with ``cwd`` as working directory;
    return (exit code, output).

    Training runs, exports played by the Internal brain and option checks all run here rather than
    in a new interpreter, which would spend ~5 CPU-seconds importing TensorFlow that the test worker
    has already imported; scenes still run in their own processes, over their sockets. The output is
    what the command would print (its log records, stdout and stderr, docopt's usage); the signal
    handlers, log levels, loggers' handlers and working directory are put back. A run that hangs
    past ``timeout`` seconds ends the worker with every thread's traceback (pytest-xdist reports
    the test as crashed and goes on with a new worker).
    """
    import contextlib
    import faulthandler
    import io
    import logging
    import signal
    import traceback

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root, academy_log = logging.getLogger(), logging.getLogger("academy")
    levels = {log: (log.level, list(log.handlers)) for log in (root, academy_log)}
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    here = os.getcwd()
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                code = main([*map(str, argv)])
            except SystemExit as e:  # docopt's and argparse's usage errors, --help
                if e.code is not None and not isinstance(e.code, int):
                    print(e.code)
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # as the interpreter would end: the traceback, exit status 1
                traceback.print_exc()
                code = 1
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.chdir(here)
        for log, (level, handlers) in levels.items():
            for extra in [h for h in log.handlers if h not in handlers]:
                log.removeHandler(extra)
            log.setLevel(level)
        for signum, previous in signals.items():
            signal.signal(signum, previous)
    return code, out.getvalue()


def learn(cwd, *args, timeout=600, port=None):
    """Run learn.py (``learn.main``, in this process: ``in_process``) in ``cwd`` on ``port`` (or a
    free one); return (exit code, console output)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import learn as module

    assert os.path.abspath(module.__file__) == LEARN, f"imported {module.__file__}, expected {LEARN}"
    return in_process(module.main, cwd, [*args, "--base-port", port or free_port()], timeout=timeout)


#: The name option and configuration checks use: the same run, in this process.
learn_in_process = learn


def learn_subprocess(cwd, *args, timeout=600, port=None):
    """Run learn.py in a new interpreter in ``cwd`` (on ``port``, or a free one); return (exit code,
    console output). For runs whose process itself is under test (a Ray driver, a plugin's discovery)."""
    proc = subprocess.run([sys.executable, LEARN, *args, "--base-port", str(port or free_port())], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def academy_in_process(*args, timeout=300):
    """Run ``python -m academy`` (its ``main``, ``in_process``) stand-alone; return (exit code, output)."""
    from academy.__main__ import main

    return in_process(main, ROOT, args, timeout=timeout)


def run_academy(*args, timeout=300) -> float:
    """Run ``python -m academy`` stand-alone (it must exit 0); return its last ``mean_reward``."""
    code, out = academy_in_process(*args, timeout=timeout)
    assert code == 0, out
    line = [s for s in out.splitlines() if s.startswith("mean_reward")][-1]
    return float(line.split()[-1])


def mean_rewards(output: str, brain: str):
    """The mean rewards of the console's summary lines of ``brain``."""
    return [float(m) for m in re.findall(rf"{brain}: Step: \d+\. Mean Reward: (-?\d+\.\d+)", output)]


def learn_over_grpc(tmp_path, scene: str, settings: dict, run_path: str, timeout: int = 600):
    """``learn.py --protocol grpc --train`` of ``scene`` with ``settings`` (the trainer
    configuration of its one trained brain, by name), which must succeed: the mean rewards of that
    brain's team 0 in the summaries, and the path of its ONNX export."""
    import yaml

    (brain,) = settings
    config = write(tmp_path / f"{scene.lower()}.yaml", yaml.safe_dump(settings))
    code, out = learn(tmp_path, scene, "--protocol", "grpc", "--train", "--trainer-config", config,
                      "--run-path", run_path, timeout=timeout)
    assert code == 0, out[-3000:]
    from academy import UNITY_NAMES

    behavior = UNITY_NAMES.get(brain, brain)  # over gRPC a built-in brain carries its Unity example's name
    return mean_rewards(out, f"{behavior}\\?team=0"), os.path.join(tmp_path, "models", run_path, f"{behavior}.onnx")


def assert_export_is_the_latest_checkpoint(model_dir, export_name: str) -> int:
    """Assert that every weight frozen into ``model_dir/export_name`` equals the same variable of
    the latest checkpoint there; return how many were compared.

    A run that stops early has learned too little to score above a random policy on Basic (a
    random policy's mean is 0.17 and BASIC_SHORT's model after 3000 steps scores 0.19), so a reward
    threshold cannot tell its export from an untrained one; the saved weights can.
    """
    from tensorflow.python.framework import tensor_util

    from trainers.export.frozen_graph import load_graph_def
    from trainers.tf_utils import tf

    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest is not None, f"no checkpoint in {model_dir}"
    reader = tf.train.load_checkpoint(latest)
    frozen = {n.name: n for n in load_graph_def(str(model_dir / export_name)).node if n.op == "Const"}
    names = [v for v in reader.get_variable_to_shape_map() if v in frozen]
    assert names, f"no variable of {latest} is frozen into {export_name}"
    for name in names:
        value = tensor_util.MakeNdarray(frozen[name].attr["value"].tensor)
        assert (value == reader.get_tensor(name)).all(), f"{export_name}'s {name} is not {latest}'s"
    return len(names)


def find_academy_process(needle: str) -> int:
    """The pid of a running ``academy`` process whose command line contains ``needle``."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "academy" in cmdline and needle in cmdline:
            return int(pid)
    raise AssertionError(f"no academy process with {needle!r}")


def write(path, text: str) -> str:
    """Write ``text`` (dedented) to ``path``; return the path as a string."""
    path.write_text(textwrap.dedent(text))
    return str(path)


def load_config(tmp_path, text: str, registry=None):
    """``text`` (dedented) as a trainer configuration file ``tmp_path/config.yaml``, loaded and
    validated with ``registry`` (by default the installed trainers): the ``TrainerConfig``, or the
    ``TrainerConfigError`` it raises, whose message names that file."""
    from runner.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry

    return load_trainer_config(write(tmp_path / "config.yaml", text), registry or load_registry())


def config_error(tmp_path, text: str, registry=None) -> str:
    """The message of the ``TrainerConfigError`` that ``load_config`` of ``text`` must raise."""
    from runner.settings.trainer_config import TrainerConfigError

    with pytest.raises(TrainerConfigError) as error:
        load_config(tmp_path, text, registry)
    return str(error.value)


def shipped_config_pair(flat_file: str, r22_file: str, behavior: str, r22_behavior: str = ""):
    """The trainer parameters that a shipped ``learn.py`` file (``config/...``, its block of
    ``behaviour``, the API-2 brain name) and its Release 22 twin (its block of ``r22_behaviour``, the
    name over gRPC; ``behaviour`` when not given) give, each through its own front end."""
    import yaml

    from runner.settings import run_config
    from runner.settings.trainer_config import trainer_config_from_dict
    from trainers.trainer.registry import load_registry

    registry = load_registry()
    with open(os.path.join(ROOT, flat_file)) as f:
        flat = yaml.safe_load(f)[behavior]
    with open(os.path.join(ROOT, r22_file)) as f:
        resolved = run_config.resolve(r22_file, yaml.safe_load(f), tuple(registry.names()))
    return (dict(trainer_config_from_dict(flat_file, {"B": flat}, registry).settings_for("B").parameters),
            dict(resolved.behaviors[r22_behavior or behavior].brain.parameters))


def listening_sockets():
    """``(pid, address:port, loopback)`` of every TCP socket listening on this machine (/proc/net/tcp*)."""
    inodes = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A":  # LISTEN
                continue
            address, port = local.split(":")
            # The kernel prints each 32-bit word of the address in host (little-endian) order.
            raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, len(address), 8))
            ip = ipaddress.ip_address(raw)
            mapped = getattr(ip, "ipv4_mapped", None)
            loopback = ip.is_loopback or (mapped is not None and mapped.is_loopback)
            inodes[inode] = (f"{address}:{int(port, 16)}", loopback)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                found.append((int(pid), *inodes[target[8:-1]]))
    return found


def listening_beyond_loopback():
    """``(pid, address:port)`` of every TCP socket listening on a non-loopback address."""
    return [(pid, where) for pid, where, loopback in listening_sockets() if not loopback]


def descendants(root: int):
    """Every process below ``root`` (by parent pid), as a set of pids."""
    children = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    out, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


#: Basic in 3000 steps (a few seconds): too short to learn, long enough for checkpoints, summaries and exports.
BASIC_SHORT = """
BasicBrain:
    max_steps: 3000
    summary_freq: 1000
    batch_size: 32
    buffer_size: 256
    time_horizon: 3
    hidden_units: 16
    num_layers: 1
"""


@pytest.fixture(autouse=True)
def strict_exports(request, monkeypatch):
    """Every ONNX export a test makes in this process is checked as ``--strict-export`` checks it: a
    model that one of the Unity engines of ML-Agents' C# packages would refuse fails the test that
    wrote it, rather than warning in a log nobody reads. A test of the warnings themselves opts out
    with ``@pytest.mark.lenient_export``."""
    if request.node.get_closest_marker("lenient_export"):
        return
    import trainers.export.onnx_model as module

    check = module.check_export

    def strict_check(model, path, strict=False, *args, **kwargs):
        return check(model, path, True, *args, **kwargs)

    monkeypatch.setattr(module, "check_export", strict_check)


@pytest.fixture(scope="session")
def basic_short_run(tmp_path_factory):
    """``learn.py Basic --train`` with BASIC_SHORT and ``--save-freq 1000``, run once per session:
    ``(folder, console output)``. Tests copy its models/ and summaries/ (``copy_run``) before
    changing anything."""
    import pathlib

    folder = pathlib.Path(tmp_path_factory.mktemp("basic_short"))
    config = write(folder / "config.yaml", BASIC_SHORT)
    code, out = learn(folder, "Basic", "--train", "--trainer-config", config, "--save-freq", "1000")
    assert code == 0, out
    return folder, out


def copy_run(folder, tmp_path) -> None:
    """Copy the models/ and summaries/ of a finished run in ``folder`` into ``tmp_path``."""
    import shutil

    for part in ("models", "summaries"):
        shutil.copytree(os.path.join(folder, part), os.path.join(tmp_path, part))


@pytest.fixture(scope="session")
def ray_cluster():
    """A head and one more node (4 CPUs each), both real raylets on 127.0.0.1; one per test session."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "include_dashboard": False})
    cluster.add_node(num_cpus=4)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


#: Tests outside tests/e2e that take several CPU-seconds each (the largest graphs, trainers run twice
#: to compare a resume, an export of every built-in scene): marked ``slow`` here by id, so that
#: ``-m "not slow"`` stays a quick check of every package; CI runs them all.
SLOW_CASES = (
    "[recurrent-two-cameras-vector-discrete]",  # test_onnx_export's ``exported`` fixture
    "test_trainer_collects_processes_and_updates[recurrent-visual-discrete]",
    "test_trainer_collects_processes_and_updates[recurrent]",
    "test_update_gives_the_weights_of_a_plain_minibatch_loop[recurrent-visual-discrete]",
    "test_discriminator_rewards_the_recordings_steps_over_the_agents[True-True]",
    "test_exported_graph_runs_in_the_internal_brain_like_the_trained_graph[two-cameras-vector-recurrent-continuous]",
    "test_exported_graph_runs_in_the_internal_brain_like_the_trained_graph[camera-discrete-state-recurrent-discrete]",
    "test_visual_vector_combination_builds_runs_and_trains[True]",
    "test_a_disk_that_fills_during_a_save_leaves_the_previous_files_whole[export]",
    "test_a_disk_that_fills_during_a_save_leaves_the_previous_files_whole[tensorflow files]",
    "test_exports_keep_tanh_actions_unclipped_and_pass_the_onnx_contract",
    "test_a_frozen_mean_comes_out_at_unity_scale",
    "test_snapshot_and_load_copy_the_learner_into_the_acting_network[continuous]",
    "test_resnet_and_match3_policies_export_an_onnx_unity_loads",
    "test_sac_clones_discrete_actions_and_keeps_masked_ones_at_zero",
    # resumed against uninterrupted runs: a trainer built and run twice
    "test_a_resumed_recurrent_trainer_stores_the_blocks_and_takes_the_update_the_run_would_have",
    "test_recurrent_export_carries_the_memory_as_unitys_recurrent_in_and_out",
    "test_poca.py::test_a_resumed_trainer_takes_the_update_the_uninterrupted_run_takes",
    "test_the_seats_route_the_learning_team_to_one_learner_and_change_teams_through_a_reset",
    # test_sensors' ``exports`` fixture: one trainer and ONNX export per built-in scene
    "test_every_builtin_scene_exports_one_obs_k_per_wire_sensor_that_unity_accepts",
    "test_the_graph_concatenates_the_sensors_where_training_saw_them",
    "test_the_academy_onnx_brain_feeds_each_sensor_its_input",
)


#: The files whose tests take longest in all (half a minute or more of CPU), longest first.
#: ``pytest -n auto --dist loadfile`` hands whole files to the workers in collection order
#: (pytest.ini turns off xdist's own order, most tests first, which would leave these one-test
#: files for last), so they start first and the short files fill the gaps: the workers finish together.
LONG_FILES = (
    "test_num_envs.py", "test_gridworld_camera.py", "test_ray.py", "test_recurrent_sac.py",
    "test_multibrain_selfplay.py", "test_recurrent_visual.py", "test_multibrain.py", "test_side_channels.py",
    "test_learn.py", "test_stopping.py", "test_grpc_learn.py", "test_plugins.py", "test_poca_self_play.py",
    "test_sac.py", "test_poca.py", "test_pyramids.py", "test_memory_grpc.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(case in item.nodeid for case in SLOW_CASES):
            item.add_marker(pytest.mark.slow)
    first = {name: rank for rank, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: first.get(item.path.name, len(LONG_FILES)))  # stable: a file's order stays


class HalfWrittenFile:
    """A file on a disk that fills: a write puts half its bytes in, then fails with ENOSPC."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fill_the_disk(monkeypatch) -> None:
    """Every file the atomic writer (``frozen_graph.write_atomically``) opens from now on fills the disk.

    The failure is in the write itself, after the temporary file exists and before any rename, so it
    holds whoever runs the test (root included, whom permissions do not stop).
    """
    import trainers.export.frozen_graph as export

    real = export.os.fdopen
    monkeypatch.setattr(export.os, "fdopen", lambda fd, *a, **k: HalfWrittenFile(real(fd, *a, **k)))


_GRPC_IMPORT_SPY = """
import os, sys
seen = []

class Spy:  # records the variable grpc core reads when grpcio is imported
    def find_spec(self, name, path=None, target=None):
        if name == "grpc":
            seen.append(os.environ.get("GRPC_EXPERIMENTS"))

sys.meta_path.insert(0, Spy())
from {module} import import_grpc
import_grpc()
print(seen[0], os.environ.get("GRPC_EXPERIMENTS"))
"""


def grpc_experiments_at_import(module: str, user_setting: "str | None") -> str:
    """In a fresh interpreter whose ``GRPC_EXPERIMENTS`` is ``user_setting`` (unset if None), ``module``'s
    ``import_grpc()``: "<what grpc core saw when grpcio was imported> <the variable afterwards>"."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    if user_setting is not None:
        env["GRPC_EXPERIMENTS"] = user_setting
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", _GRPC_IMPORT_SPY.format(module=module)], env=env, cwd=root,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")[-2]
