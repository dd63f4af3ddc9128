"""How a run stops: signals at every phase, poisoned models, checkpoint history across resumes, paths."""
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
    find_academy_process,
    free_port,
    learn,
    learn_in_process,
    run_academy,
    write,
)
from tests.e2e.test_learn import BASIC_SHORT
from tests.unityagents.vector.test_environment_set import ScriptedWorker

LONG = BASIC_SHORT.replace("max_steps: 3000", "max_steps: 1.0e6")


def start(cwd, *args, port=None):
    return subprocess.Popen([sys.executable, LEARN, *args, "--base-port", str(port or free_port())], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(predicate, seconds=120):
    deadline = time.time() + seconds
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def no_partial_files(model):
    leftovers = [p.name for p in model.rglob("*") if p.name.startswith(".") or p.name.endswith((".tmp", ".tempstate"))]
    assert not leftovers, leftovers


def stop_when(tmp_path, ready, *signals, pause=0.0, args=()):
    config = write(tmp_path / "basic.yaml", LONG)
    port = free_port()
    proc = start(tmp_path, "Basic", "--train", "--trainer-config", config, *args, port=port)
    try:
        wait_for(lambda: ready(tmp_path))
        for s in signals:
            proc.send_signal(s)
            time.sleep(pause)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    with pytest.raises(AssertionError):  # the scene was closed with the run
        find_academy_process(f"--port {port} ")
    return proc.returncode, out


def training(tmp_path):
    return list((tmp_path / "summaries").glob("ppo/events*"))


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 0)])
def test_a_signal_during_training_saves_and_exports_once(tmp_path, signum, code):
    rc, out = stop_when(tmp_path, training, signum)
    assert rc == code, out
    name = signal.Signals(signum).name
    assert out.count(f"Learning was interrupted ({name}). Please wait while the model is saved and exported") == 1, out
    assert "Stopped by " + name + " after saving" in out
    assert "Traceback" not in out
    model = tmp_path / "models" / "ppo"
    no_partial_files(model)
    # The export holds the weights of the checkpoint saved last (policy and value: 8 tensors), and plays.
    assert assert_export_is_the_latest_checkpoint(model, "Basic.bytes") == 8
    run_academy("Basic", "--brain", f"BasicBrain=internal:{model / 'Basic.bytes'}", "--episodes", "2")


@pytest.mark.slow
def test_a_second_signal_during_the_save_waits_for_it(tmp_path):
    rc, out = stop_when(tmp_path, training, signal.SIGTERM, signal.SIGTERM, signal.SIGINT, pause=0.02)
    assert rc == 143, out
    assert "Traceback" not in out
    model = tmp_path / "models" / "ppo"
    no_partial_files(model)
    assert (model / "Basic.bytes").is_file()
    from trainers.tf_utils import tf

    assert tf.train.latest_checkpoint(str(model)) is not None


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_at_start_up_says_nothing_was_saved(tmp_path, signum, code):
    # A "Unity build" that starts and never connects: the signal comes while the trainer waits for
    # it, before any trainer exists, whatever the machine's speed.
    build = tmp_path / "Slow.x86_64"
    build.write_text("#!/bin/sh\necho $$ > started.tmp && mv started.tmp started\nexec sleep 120\n")
    build.chmod(0o755)
    proc = start(tmp_path, "Slow", "--train")
    try:
        wait_for(lambda: (tmp_path / "started").exists())
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, out
    assert "nothing was learned, so nothing was saved" in out and "after saving" not in out, out
    assert "Traceback" not in out
    build_pid = int((tmp_path / "started").read_text())
    wait_for(lambda: not _alive(build_pid), seconds=30)  # the build was closed with the run
    saved = [p.name for p in tmp_path.rglob("*") if p.name.endswith((".bytes", ".index", ".onnx"))]
    assert not saved, saved


@pytest.mark.slow
def test_resumes_keep_the_checkpoint_history(tmp_path):
    """The first run saves 500, 1000 and 1500 (all kept); the resumed run saves 2000 and 2500. Kept
    are 1500, 2000 and 2500: the resumed run counts the first run's checkpoints in its history
    (without them it would keep five, or lose 1500) and deletes the oldest of them, files and all."""
    from trainers.tf_utils import tf

    model = tmp_path / "models" / "ppo"
    for i, max_steps in enumerate([1500, 2500]):
        config = write(tmp_path / "c.yaml", BASIC_SHORT.replace("max_steps: 3000", f"max_steps: {max_steps}"))
        args = ["--train", "--trainer-config", config, "--save-freq", "500", "--keep-checkpoints", "3"]
        code, out = learn(tmp_path, "Basic", *args, *(["--load"] if i else []), timeout=300)
        assert code == 0, out
    index = tf.train.get_checkpoint_state(str(model))
    kept = [os.path.basename(p) for p in index.all_model_checkpoint_paths]
    assert kept == ["model-1500.cptk", "model-2000.cptk", "model-2500.cptk"]
    on_disk = sorted(p.name[: -len(".index")] for p in model.glob("model-*.cptk.index"))
    assert on_disk == sorted(kept)  # older ones were deleted, TensorFlow files and state together
    assert sorted(p.name for p in model.glob("*.state.json")) == sorted(k + ".state.json" for k in kept)
    assert json.loads((model / "model-2500.cptk.state.json").read_text())["trainers"]["BasicBrain"]["step"] == 2500


@pytest.mark.parametrize("run_path", ["../outside", "/tmp/abs", "a/../../b", "~/x"])
def test_run_paths_outside_models_are_refused(tmp_path, run_path):
    code, out = learn_in_process(tmp_path, "Basic", "--train", "--run-path", run_path)
    assert code == 1 and "must be a relative path inside models/" in out, out
    assert not (tmp_path / "models").exists()


@pytest.mark.slow
def test_a_poisoned_model_is_never_saved_and_the_last_good_checkpoint_stays(tmp_path):
    from runner.controller import TrainerController
    from runner.saver import PoisonedModelError
    from runner.settings.trainer_config import load_trainer_config
    from trainers.tf_utils import tf
    from trainers.trainer.registry import load_registry
    from unityagents.vector.environment_set import EnvironmentSet

    config = load_trainer_config(write(tmp_path / "c.yaml", "B:\n    normalize: true\n"), load_registry())
    controller = TrainerController(EnvironmentSet.of(ScriptedWorker(0)), config, env_name="Scripted",
                                   model_dir=str(tmp_path / "models"), summary_dir=str(tmp_path / "summaries"))
    with controller.graph.as_default():
        controller._build()
        good = controller.save_model()
        controller.export()
        exported = (tmp_path / "models" / "ppo" / "Scripted.bytes").read_bytes()
        variable = [v for v in tf.global_variables() if "normalizer" in v.name or "running" in v.name][0]
        value = controller.sess.run(variable)
        variable.load(np.full_like(value, np.nan), controller.sess)  # no new op: the graph is final
        controller.global_step = 7
        with pytest.raises(PoisonedModelError) as e:
            controller.save_model()
        with pytest.raises(PoisonedModelError):
            controller.export()
    assert variable.name in str(e.value) and good in str(e.value) and "stays the latest" in str(e.value)
    assert tf.train.latest_checkpoint(str(tmp_path / "models" / "ppo")) == good
    assert not list((tmp_path / "models" / "ppo").glob("model-7*"))
    assert (tmp_path / "models" / "ppo" / "Scripted.bytes").read_bytes() == exported
    controller.sess.close()
