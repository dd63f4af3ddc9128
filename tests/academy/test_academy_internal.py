"""The Internal brain: frozen graphs and ONNX files built here by name, as each contract describes them.

Each graph is a tiny hand-written function of its inputs, so the test can predict the action exactly
and thereby check what was fed: batch size (vector and scalar placeholders), states (float or
discrete int32), camera pixels in 0..1, epsilon fixed to 0, and the recurrent memory round trip.
The ONNX files check what modern Unity does with a ``<Behavior>.onnx``: outputs copied into the
actions unchanged, the stochastic output unless deterministic inference is asked for, masks all
ones, memory sized by the file's ``memory_size``.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from academy import load_scene
from academy.academy import Academy
from academy.brain import BrainConfig
from academy.scene import BrainSpec, Camera
from trainers.tf_utils import tf

REPO = __file__.rsplit("/tests/", 1)[0]


def freeze(build, path) -> str:
    graph = tf.Graph()
    with graph.as_default():
        build()
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return str(path)


def continuous_graph(scope: str = "", scalar_batch: bool = False):
    def build():
        with tf.name_scope(scope or None):
            state = tf.placeholder(tf.float32, [None, 8], name="state")
            batch = tf.placeholder(tf.int32, [] if scalar_batch else None, name="batch_size")
            epsilon = tf.placeholder(tf.float32, [None, 2], name="epsilon")
            n = tf.cast(tf.reshape(batch, [-1])[0], tf.float32)
            tf.identity(state[:, :2] + epsilon + 100.0 * n, name="action")
    return build


BALL = BrainSpec(name="Ball", n_agents=3, state_size=8, action_size=2)


@pytest.mark.parametrize("scalar_batch", [False, True])
def test_continuous_graph_gets_states_batch_size_and_zero_epsilon(tmp_path, scalar_batch):
    from academy.internal import InternalBrain

    brain = InternalBrain(freeze(continuous_graph(scalar_batch=scalar_batch), tmp_path / "g.bytes"), BALL)
    states = np.arange(24, dtype=float).reshape(3, 8)
    actions, memory = brain.decide(states, [], np.zeros((3, 0)))
    np.testing.assert_allclose(actions, states[:, :2] + 300.0)
    assert memory.shape == (3, 0)


def test_scope_gets_a_slash_and_placeholders_are_sampled_in_range(tmp_path):
    from academy.internal import InternalBrain

    path = freeze(continuous_graph(scope="Ball3DBrain"), tmp_path / "g.bytes")
    brain = InternalBrain(path, BALL, scope="Ball3DBrain", placeholders={"epsilon": (1.0, 2.0)})
    actions, _ = brain.decide(np.zeros((3, 8)), [], np.zeros((3, 0)))
    noise = actions - 300.0
    assert np.all((1.0 <= noise) & (noise <= 2.0)) and np.all(noise == noise[0, 0]), "one draw for all agents"


def test_missing_node_names_the_node_and_the_scope(tmp_path):
    from academy.internal import InternalBrain

    path = freeze(continuous_graph(scope="Ball3DBrain"), tmp_path / "g.bytes")
    with pytest.raises(ValueError, match=r"node Other/action could not be found.*graphScope 'Other/'"):
        InternalBrain(path, BALL, scope="Other")


def test_a_file_that_is_not_a_graph_is_a_clear_error(tmp_path):
    from academy.internal import InternalBrain

    bad = tmp_path / "bad.bytes"
    bad.write_bytes(b"\xff\xfe not a protobuf")
    with pytest.raises(ValueError, match="is not a frozen TensorFlow GraphDef"):
        InternalBrain(str(bad), BALL)


def test_discrete_recurrent_graph_round_trips_memory(tmp_path):
    from academy.internal import InternalBrain

    def build():
        state = tf.placeholder(tf.int32, [None, 1], name="state")
        tf.placeholder(tf.int32, None, name="batch_size")
        memory_in = tf.placeholder(tf.float32, [None, 4], name="recurrent_in")
        length = tf.placeholder(tf.int32, [], name="sequence_length")
        tf.identity(memory_in + tf.cast(length, tf.float32), name="recurrent_out")
        tf.identity(tf.cast(tf.math.floormod(state, 2), tf.int64), name="action")

    spec = BrainSpec(name="B", n_agents=2, state_size=20, action_size=2, state_space="discrete",
                     action_space="discrete", memory_size=4)
    brain = InternalBrain(freeze(build, tmp_path / "g.bytes"), spec)
    assert brain.recurrent
    actions, memory = brain.decide(np.array([[3.0], [10.0]]), [], np.zeros((2, 4)))
    assert actions.tolist() == [[1.0], [0.0]]
    _, memory = brain.decide(np.array([[3.0], [10.0]]), [], memory)
    assert memory.tolist() == [[2.0] * 4] * 2


def test_camera_pixels_are_fed_in_zero_one(tmp_path):
    from academy.internal import InternalBrain

    def build():
        image = tf.placeholder(tf.float32, [None, 4, 4, 1], name="observation_0")
        tf.identity(tf.reduce_mean(image, axis=[1, 2]), name="action")

    spec = BrainSpec(name="Eye", n_agents=2, state_size=0, action_size=1, cameras=(Camera(4, 4, True),))
    brain = InternalBrain(freeze(build, tmp_path / "g.bytes"), spec)
    frames = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    frames[1] = (255, 0, 0)
    actions, _ = brain.decide(np.zeros((2, 0)), [frames], np.zeros((2, 0)))
    np.testing.assert_allclose(actions, [[0.0], [1.0 / 3.0]], rtol=1e-6)


def pd_policy_graph():
    """3DBall's PD heuristic, linearised and written as a graph over the 8 state floats."""
    state = tf.placeholder(tf.float32, [None, 8], name="state")
    tf.placeholder(tf.int32, None, name="batch_size")
    gain = 57.2958 / (5.0 / 7.0 * 9.81)
    quat_to_deg = 2 * 57.2958
    target_z = gain * (1.2 * state[:, 2] + 1.8 * state[:, 5]) - quat_to_deg * state[:, 0]
    target_x = -gain * (1.2 * state[:, 4] + 1.8 * state[:, 7]) - quat_to_deg * state[:, 1]
    tf.identity(tf.clip_by_value(tf.stack([target_z, target_x], axis=1) / 2.0, -1.0, 1.0), name="action")


def test_internal_brain_drives_a_scene_in_process(tmp_path):
    from academy.internal import InternalBrain

    scene = load_scene("3DBall")(0)
    policy = InternalBrain(freeze(pd_policy_graph, tmp_path / "pd.bytes"), scene.brains[0])
    academy = Academy(scene, {"Ball3DBrain": BrainConfig("internal", policy)})
    assert academy.run_episodes(12)["Ball3DBrain"] >= 90


@pytest.mark.slow
def test_cli_runs_an_exported_graph_standalone(tmp_path):
    path = freeze(pd_policy_graph, tmp_path / "3DBall.bytes")
    result = subprocess.run([sys.executable, "-m", "academy", "3DBall", "--brain",
                             f"Ball3DBrain=internal:{path}", "--episodes", "12"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    name, brain, value = result.stdout.split()
    assert (name, brain) == ("mean_reward", "Ball3DBrain") and float(value) >= 90


# ---------------------------------------------------------------- ONNX files, as modern Unity runs them
def onnx_file(path, inputs, nodes, outputs, constants) -> str:
    """A hand-written ONNX model (opset 9): ``inputs``/``outputs`` are (name, elem type, shape)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes, "policy", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def continuous_onnx(path, recurrent=False) -> str:
    """continuous_actions = obs_0, deterministic_continuous_actions = -obs_0; recurrent_out = recurrent_in + 1."""
    from onnx import TensorProto as T
    from onnx import helper

    inputs = [("obs_0", T.FLOAT, ["b", 2])]
    nodes = [helper.make_node("Identity", ["obs_0"], ["continuous_actions"]),
             helper.make_node("Neg", ["obs_0"], ["deterministic_continuous_actions"])]
    outputs = [("continuous_actions", T.FLOAT, ["b", 2]), ("deterministic_continuous_actions", T.FLOAT, ["b", 2]),
               ("version_number", T.FLOAT, [1]), ("memory_size", T.FLOAT, [1]),
               ("continuous_action_output_shape", T.FLOAT, [1])]
    constants = {"version_number": [3.0], "memory_size": [4.0 if recurrent else 0.0],
                 "continuous_action_output_shape": [2.0]}
    if recurrent:
        inputs.append(("recurrent_in", T.FLOAT, ["b", 1, 4]))
        nodes.append(helper.make_node("Add", ["recurrent_in", "one"], ["recurrent_out"]))
        outputs.append(("recurrent_out", T.FLOAT, ["b", 1, 4]))
        constants["one"] = [1.0]
    return onnx_file(path, inputs, nodes, outputs, constants)


def test_onnx_outputs_reach_the_agents_unscaled_and_deterministic_only_when_asked(tmp_path):
    from academy.internal import load_internal_brain

    path = continuous_onnx(tmp_path / "Ball.onnx")
    spec = BrainSpec(name="Ball", n_agents=3, state_size=2, action_size=2)
    states = np.array([[0.5, -0.25], [1.5, 2.0], [-3.0, 0.75]])
    actions, memory = load_internal_brain(path, spec).decide(states, [], np.zeros((3, 0)))
    np.testing.assert_allclose(actions, states, rtol=1e-7)
    assert memory.shape == (3, 0)
    deterministic, _ = load_internal_brain(path, spec, deterministic=True).decide(states, [], np.zeros((3, 0)))
    np.testing.assert_allclose(deterministic, -states, rtol=1e-7)


def test_onnx_memory_is_sized_by_the_file_and_carried(tmp_path):
    from academy.internal import OnnxInternalBrain

    path = continuous_onnx(tmp_path / "Hard.onnx", recurrent=True)
    spec = BrainSpec(name="Hard", n_agents=2, state_size=2, action_size=2, memory_size=4)
    brain = OnnxInternalBrain(path, spec)
    assert (brain.memory_size, brain.recurrent) == (4, True)
    _, memory = brain.decide(np.zeros((2, 2)), [], np.zeros((2, 4)))  # a new agent's memory is zeros
    _, memory = brain.decide(np.zeros((2, 2)), [], memory)
    assert memory.tolist() == [[2.0] * 4] * 2
    # The academy keeps the file's 4 floats per agent whatever the brain's memorySize (a gRPC-trained
    # model's memory_size need not match it), as Unity's ModelRunner sizes memories from the model.
    from academy.brain import BrainConfig, BrainRuntime

    for declared in (0, 8):
        other = BrainSpec(name="Hard", n_agents=2, state_size=2, action_size=2, memory_size=declared)
        runtime = BrainRuntime(other, 0, BrainConfig("internal", OnnxInternalBrain(path, other)))
        assert runtime.memory.shape == (2, 4)


def test_onnx_discrete_masks_are_all_ones(tmp_path):
    """discrete_actions = argmax(obs_0 * action_masks): a mask of zeros anywhere would change the pick."""
    from onnx import TensorProto as T
    from onnx import helper

    from academy.internal import OnnxInternalBrain

    path = onnx_file(tmp_path / "Pick.onnx", [("obs_0", T.FLOAT, ["b", 3]), ("action_masks", T.FLOAT, ["b", 3])],
                     [helper.make_node("Mul", ["obs_0", "action_masks"], ["masked"]),
                      helper.make_node("ArgMax", ["masked"], ["discrete_actions"], axis=1, keepdims=1)],
                     [("discrete_actions", T.INT64, ["b", 1]), ("version_number", T.FLOAT, [1]),
                      ("memory_size", T.FLOAT, [1]), ("discrete_action_output_shape", T.FLOAT, [1, 1])],
                     {"version_number": [3.0], "memory_size": [0.0], "discrete_action_output_shape": [[3.0]]})
    spec = BrainSpec(name="Pick", n_agents=3, state_size=3, action_size=3, action_space="discrete")
    states = np.array([[0.1, 0.9, 0.5], [0.8, 0.1, 0.2], [0.1, 0.2, 0.3]])
    actions, _ = OnnxInternalBrain(path, spec).decide(states, [], np.zeros((3, 0)))
    assert actions.tolist() == [[1.0], [0.0], [2.0]]
