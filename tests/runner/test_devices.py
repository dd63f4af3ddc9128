"""``--torch-device`` / ``torch_settings.device`` as TensorFlow placement (``runner.devices``).

Nothing here needs a GPU: the CPU placement runs for real, a GPU that is not there is refused
(asked for one past the last GPU TensorFlow sees, so the refusal holds on a machine with GPUs too),
and the refusal's wording is checked against given device lists.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import learn_r22
import runner.run
from runner.controller import TrainerController
from runner.devices import SPLIT_WORK, DeviceError, Placement, intra_op_threads, minibatch_work, placement
from runner.settings.trainer_config import load_trainer_config
from tests.conftest import write
from tests.unityagents.vector.test_environment_set import ScriptedWorker
from trainers.tf_utils import tf
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters
from unityagents.vector.environment_set import EnvironmentSet


@pytest.mark.parametrize("name, device", [
    (None, None), ("", None), ("cpu", "/CPU:0"), ("CPU", "/CPU:0"), ("cuda", "/GPU:0"), ("cuda:0", "/GPU:0"),
    ("cuda:3", "/GPU:3"), ("gpu", "/GPU:0"), ("gpu:1", "/GPU:1"),
])
def test_release_22_device_names_map_to_tensorflow_devices(name, device):
    assert Placement.of(name).device == device


@pytest.mark.parametrize("name", ["tpu", "cuda:x", "cuda:-1", "mps", "cpu:1"])
def test_a_name_that_is_no_device_is_refused_naming_it_and_the_accepted_ones(name):
    with pytest.raises(DeviceError) as e:
        Placement.of(name)
    assert repr(name) in str(e.value) and "cpu" in str(e.value)


def visible_gpus():
    return [d.name for d in tf.config.list_physical_devices("GPU")]


def test_a_gpu_that_tensorflow_does_not_see_is_refused_on_this_machine():
    index = len(visible_gpus())  # one past the last GPU TensorFlow sees (0 on a machine without one)
    with pytest.raises(DeviceError) as e:
        placement(f"cuda:{index}")
    message = str(e.value)
    assert f"'cuda:{index}'" in message and f"/GPU:{index}" in message
    assert "--torch-device cpu" in message


def test_the_refusal_says_what_was_asked_what_tensorflow_sees_and_what_to_do():
    with pytest.raises(DeviceError) as e:
        Placement.of("cuda").check(visible_gpus=[], built_with_cuda=False)
    assert "'cuda'" in str(e.value) and "no GPU" in str(e.value)
    assert "CPU-only build" in str(e.value) and "pip install 'unity-tf-trainer[gpu]'" in str(e.value)
    with pytest.raises(DeviceError) as e:
        Placement.of("cuda:1").check(visible_gpus=["/physical_device:GPU:0"], built_with_cuda=True)
    assert "1 GPU(s) (/physical_device:GPU:0)" in str(e.value) and "nvidia-smi" in str(e.value)
    assert "CUDA_VISIBLE_DEVICES" in str(e.value)
    seen = Placement.of("cuda:0")
    assert seen.check(visible_gpus=["/physical_device:GPU:0"], built_with_cuda=True) is seen
    cpu = Placement.of("cpu")
    assert cpu.check(visible_gpus=[], built_with_cuda=False) is cpu


def test_the_cpu_placement_puts_the_ops_on_the_cpu_and_hides_every_gpu_from_the_session():
    p = placement("cpu")
    graph = tf.Graph()
    with graph.as_default(), p.scope(graph):
        x = tf.constant(np.arange(4, dtype=np.float32))
        y = tf.reduce_sum(x * x)
    assert y.device.upper().endswith("CPU:0")
    with tf.Session(graph=graph, config=p.session_config()) as sess:
        assert float(sess.run(y)) == 14.0
        assert not [d for d in sess.list_devices() if d.device_type == "GPU"]
    assert Placement().session_config() is None  # TensorFlow's own choice: its defaults


@pytest.mark.parametrize("name", [None, "cpu", "cuda:0"])
def test_the_session_config_carries_the_intra_op_pool_asked_for(name):
    config = Placement.of(name).session_config(intra_op_threads=1)
    assert config.intra_op_parallelism_threads == 1
    default = Placement.of(name).session_config()
    assert default is None if name is None else default.intra_op_parallelism_threads == 0  # 0: TensorFlow's choice
    if name == "cpu":
        assert config.device_count["GPU"] == 0
    if name == "cuda:0":
        assert config.allow_soft_placement and config.gpu_options.allow_growth


def test_minibatch_work_is_the_larger_of_the_hidden_layer_and_the_camera_encoder():
    assert minibatch_work({"batch_size": 128, "hidden_units": 512}) == 128 * 512 * 512
    camera = BrainParameters("G", {"cameraResolutions": [{"height": 84, "width": 84, "blackAndWhite": False}],
                                   "stateSize": 0, "actionSize": 4, "actionSpaceType": 0})
    assert minibatch_work({"batch_size": 32, "hidden_units": 16}, camera) == 32 * 3 * 84 * 84 * 64
    assert minibatch_work({"trainer": "plugin"}) == 0  # a trainer without these settings


def test_one_intra_op_thread_unless_a_minibatch_step_is_large_enough_to_split(monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    hallway = minibatch_work({"batch_size": 128, "hidden_units": 128})
    soccer = minibatch_work({"batch_size": 2048, "hidden_units": 512})  # POCA's SoccerTwos: splitting pays
    assert hallway < SPLIT_WORK <= soccer
    assert intra_op_threads([hallway]) == 1
    assert intra_op_threads([]) == 1
    assert intra_op_threads([hallway, soccer]) is None
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")  # the user's own choice, which TensorFlow reads itself
    assert intra_op_threads([hallway]) is None


@pytest.mark.parametrize("cores, threads", [(2, 1), (3, 1), (16, 8)])
def test_a_large_step_that_runs_its_branches_side_by_side_leaves_half_the_cores_to_them(monkeypatch, cores, threads):
    """MA-POCA's step runs its branches on the inter-op pool: where it is the only large one, the
    intra-op pool gets half the cores; a large step run one op after another still gets every core."""
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    hallway = minibatch_work({"batch_size": 128, "hidden_units": 128})
    soccer = minibatch_work({"batch_size": 2048, "hidden_units": 512})
    assert intra_op_threads([hallway], [soccer]) == threads
    assert intra_op_threads([hallway], [hallway]) == 1
    assert intra_op_threads([soccer], [soccer]) is None
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")
    assert intra_op_threads([], [soccer]) is None


@pytest.mark.parametrize("block, threads", [
    ("B:\n    normalize: true\n", 1),
    ("B:\n    batch_size: 4096\n    buffer_size: 40960\n    hidden_units: 256\n", 0),
    ("B:\n    trainer: poca\n    batch_size: 4096\n    buffer_size: 40960\n    hidden_units: 256\n", 2),
])
def test_the_controllers_session_has_one_intra_op_thread_for_small_minibatch_steps(tmp_path, monkeypatch, block,
                                                                                      threads):
    """One thread for small steps; every core (0: TensorFlow's choice) for a large PPO step; half of the
    four cores for a large MA-POCA step, which runs its branches side by side."""
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    config = load_trainer_config(write(tmp_path / "c.yaml", block), load_registry())
    c = TrainerController(EnvironmentSet.of(ScriptedWorker(0)), config, env_name="Scripted",
                          model_dir=str(tmp_path / "models"), summary_dir=str(tmp_path / "summaries"))
    try:
        with c.graph.as_default():
            c._build()
        session_config = c.sess._config  # what the session was created with (None: TensorFlow's defaults)
        assert (session_config.intra_op_parallelism_threads if session_config is not None else 0) == threads
    finally:
        c.sess.close()
        c.env.close()


def test_the_controller_builds_its_trainers_on_the_placement_and_keeps_one_graph_and_session(tmp_path):
    config = load_trainer_config(write(tmp_path / "c.yaml", "B:\n    normalize: true\n"), load_registry())
    c = TrainerController(EnvironmentSet.of(ScriptedWorker(0)), config, env_name="Scripted", device="cpu",
                          model_dir=str(tmp_path / "models"), summary_dir=str(tmp_path / "summaries"))
    try:
        with c.graph.as_default():
            c._build()
        variables = c.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
        assert variables and all(v.op.device.upper().endswith("CPU:0") for v in variables)
        assert c.sess.graph is c.graph
        assert not [d for d in c.sess.list_devices() if d.device_type == "GPU"]
    finally:
        c.sess.close()
        c.env.close()


def test_unityagents_learn_refuses_a_missing_gpu_before_any_environment_starts(tmp_path, monkeypatch, caplog):
    launched = []
    monkeypatch.setattr(runner.run, "EnvironmentSet", lambda *a, **k: launched.append(a) or pytest.fail("launched"))
    config = write(tmp_path / "3DBall.yaml", "behaviors:\n  Ball3DBrain:\n    max_steps: 100\n")
    monkeypatch.chdir(tmp_path)
    index = len(visible_gpus())
    code = learn_r22.main([config, "--env=3DBall", "--run-id=gpu", f"--torch-device=cuda:{index}"])
    assert code == 1 and not launched
    assert f"asks for GPU {index}" in caplog.text and "DeviceError" in caplog.text


def test_a_device_name_that_is_no_device_fails_the_dry_run(tmp_path, monkeypatch, capsys):
    config = write(tmp_path / "3DBall.yaml", "behaviors:\n  Ball3DBrain:\n    max_steps: 100\n"
                   "torch_settings:\n  device: tpu\n")
    monkeypatch.chdir(tmp_path)
    assert learn_r22.main([config, "--env=3DBall", "--dry-run"]) == 2
    assert "'tpu' is not a device" in capsys.readouterr().err
