"""ONNX export (``trainers/export/onnx_model.py``): same numbers as the frozen ``.bytes``, the modern Unity
contract (``tests/onnx_contract.py``), continuous actions at ML-Agents' scale (``clamp(a, -3, 3) / 3``,
the number written out here, not taken from the exporter), and the academy's ONNX Internal brain
running the file as Unity does: outputs copied into the agents without rescaling."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

from academy import load_scene
from academy.__main__ import _brain_configs
from academy.academy import Academy
from academy.internal import InternalBrain, OnnxInternalBrain, load_internal_brain
from academy.scene import BrainSpec, Camera
from tests.e2e.test_learn import run_academy
from tests.onnx_contract import UNITY_CONTINUOUS_CLIP, assert_contract, check_contract
from tests.trainers.ppo.test_ppo import make_trainer
from trainers.export.frozen_graph import contract_inputs, export_graph, load_graph_def
from trainers.export.onnx_model import export_onnx, unroll_single_step
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters

RGB = {"width": 24, "height": 20, "blackAndWhite": False}
BW = {"width": 20, "height": 22, "blackAndWhite": True}
VARIANTS = {
    # name: (stateSize, stateSpaceType, cameras, use_recurrent, actionSpaceType, trainer overrides)
    "vector-continuous-normalized": (8, 1, [], False, 1, {"normalize": True}),
    "discrete-state-discrete": (20, 0, [], False, 0, {}),
    "camera-discrete": (0, 1, [RGB], False, 0, {}),
    "recurrent-vector-continuous": (5, 1, [], True, 1, {}),
    "recurrent-two-cameras-vector-discrete": (3, 1, [RGB, BW], True, 0, {}),
}
N = 4


def brain_of(name: str) -> BrainParameters:
    state_size, state_type, cameras, recurrent, action_type, _ = VARIANTS[name]
    return BrainParameters("Brain", {
        "stateSize": state_size, "actionSize": 3, "memorySize": 8 if recurrent else 0, "cameraResolutions": cameras,
        "actionDescriptions": [""] * 3, "actionSpaceType": action_type, "stateSpaceType": state_type})


def randomise(trainer, rng, log_sigma=None, logit_scale=1.0) -> None:
    """Weights far from the near-zero initial policy, so that a wrong wiring changes the numbers.
    Runs only existing ops (``Variable.load``), as the controller's graph is finalised."""
    graph = trainer.sess.graph
    for var in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES):
        name = var.op.name
        shape = var.shape.as_list()
        if "Adam" in name or "beta" in name.split("/")[-1] or "normalization_steps" in name:
            continue
        if name.endswith("running_variance"):
            value = rng.uniform(0.5, 2.0, shape)
        elif name.endswith("log_sigma"):
            value = np.full(shape, np.log(0.2) if log_sigma is None else log_sigma)
        else:
            value = rng.normal(0.0, 0.4, shape) * (logit_scale if "policy_head" in name else 1.0)
        with graph.as_default():
            var.load(value.astype(var.dtype.as_numpy_dtype), trainer.sess)


def export_both(trainer, tmp_path):
    """The ``.bytes`` (as the controller writes it) and the ``<Brain>.onnx`` of one trainer."""
    graph = trainer.sess.graph
    bytes_path = str(tmp_path / "env.bytes")
    export_graph(trainer.sess, trainer.export_nodes(), bytes_path, keep_nodes=contract_inputs(graph, ""))
    paths = export_onnx(trainer.sess, [trainer], str(tmp_path))
    assert paths == [str(tmp_path / "Brain.onnx")]
    return bytes_path, paths[0]


class Frozen:
    """Runs the frozen ``.bytes`` in a fresh TensorFlow graph, as the Internal brain loads it."""

    def __init__(self, path):
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.import_graph_def(load_graph_def(path), name="")
        self.sess = tf.Session(graph=self.graph)
        self.names = {op.name for op in self.graph.get_operations()}

    def run(self, names, feed):
        fetches = [f"{n}:0" for n in names if n in self.names]
        return dict(zip([f[:-2] for f in fetches], self.sess.run(fetches, {f"{k}:0": v for k, v in feed.items()})))


def random_inputs(brain: BrainParameters, rng, n=N):
    """(frozen feed, onnx feed) of the same observations: NHWC vs NCHW, int index vs float."""
    tf_feed, onnx_feed = {"batch_size": n, "sequence_length": 1}, {}
    for k, camera in enumerate(brain.camera_resolutions):
        channels = 1 if camera["blackAndWhite"] else 3
        image = rng.uniform(size=(n, camera["height"], camera["width"], channels)).astype(np.float32)
        tf_feed[f"observation_{k}"] = image
        onnx_feed[f"obs_{k}"] = image.transpose(0, 3, 1, 2)
    if brain.state_space_size:
        if brain.state_space_type == "discrete":
            index = rng.integers(0, brain.state_space_size, (n, 1))
            tf_feed["state"] = index.astype(np.int32)
            onnx_feed[f"obs_{brain.number_observations}"] = index.astype(np.float32)
        else:
            state = rng.normal(size=(n, brain.state_space_size)).astype(np.float32)
            tf_feed["state"] = state
            onnx_feed[f"obs_{brain.number_observations}"] = state
    if brain.action_space_type == "discrete":
        onnx_feed["action_masks"] = np.ones((n, brain.action_space_size), np.float32)
    return tf_feed, onnx_feed


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def exported(request, tmp_path_factory):
    name = request.param
    brain = brain_of(name)
    trainer = make_trainer(brain, use_recurrent=VARIANTS[name][3], **VARIANTS[name][5])
    randomise(trainer, np.random.default_rng(0))
    tmp_path = tmp_path_factory.mktemp(name)
    bytes_path, onnx_path = export_both(trainer, tmp_path)
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    return name, brain, trainer, Frozen(bytes_path), session, bytes_path, onnx_path


def test_onnx_passes_onnx_checker_and_the_unity_contract(exported):
    name, brain, _, _, _, _, path = exported
    model = assert_contract(path, brain)
    outputs = {o.name for o in model.graph.output}
    kind = "continuous" if brain.action_space_type == "continuous" else "discrete"
    assert {f"{kind}_actions", f"deterministic_{kind}_actions", "value_estimate"} <= outputs
    assert ("recurrent_out" in outputs) == VARIANTS[name][3]
    assert not {n.op_type for n in model.graph.node} & {"Loop", "Scan", "If"}


def test_onnx_computes_what_the_frozen_graph_computes(exported):
    """Same inputs, same numbers: the value, the mean action (times the contract's 1/3 and clip), the
    argmax of the action probabilities, and the memory carried over three decisions."""
    _, brain, _, frozen, session, _, _ = exported
    rng = np.random.default_rng(1)
    memory_size = brain.memory_space_size if "recurrent_in" in {i.name for i in session.get_inputs()} else 0
    memory = rng.normal(size=(N, memory_size)).astype(np.float32)
    outputs = [o.name for o in session.get_outputs()]
    for _ in range(3):
        tf_feed, onnx_feed = random_inputs(brain, rng)
        if memory_size:
            tf_feed["recurrent_in"] = memory
            onnx_feed["recurrent_in"] = memory.reshape(N, 1, memory_size)
        expected = frozen.run(["action", "value_estimate", "action_probs", "recurrent_out"], tf_feed)
        got = dict(zip(outputs, session.run(outputs, onnx_feed)))
        np.testing.assert_allclose(got["value_estimate"], expected["value_estimate"], rtol=1e-5, atol=1e-5)
        if brain.action_space_type == "continuous":
            mean = np.clip(expected["action"], -3.0, 3.0) / 3.0
            assert np.abs(mean).max() > 0.1, "the test policy should act, not sit at zero"
            np.testing.assert_allclose(got["deterministic_continuous_actions"], mean, atol=1e-5)
            assert got["continuous_actions"].shape == (N, brain.action_space_size)
            assert np.abs(got["continuous_actions"]).max() <= 1.0
            assert not np.allclose(got["continuous_actions"], got["deterministic_continuous_actions"])
        else:
            greedy = np.argmax(expected["action_probs"], axis=1)[:, None]
            assert got["deterministic_discrete_actions"].dtype == np.int64
            np.testing.assert_array_equal(got["deterministic_discrete_actions"], greedy)
            assert got["discrete_actions"].dtype == np.int64 and got["discrete_actions"].shape == (N, 1)
        if memory_size:
            assert got["recurrent_out"].shape == (N, 1, memory_size)
            np.testing.assert_allclose(got["recurrent_out"][:, 0], expected["recurrent_out"], atol=1e-5)
            memory = expected["recurrent_out"]


def test_onnx_samples_like_the_policy(exported):
    """The stochastic outputs draw from the trained distribution: Gaussian noise of the graph's sigma
    (0.2 here) around the mean, and discrete indices at the policy's frequencies, never a masked one."""
    _, brain, _, frozen, session, _, _ = exported
    rng = np.random.default_rng(2)
    tf_feed, onnx_feed = random_inputs(brain, rng, n=1)
    many = 4000
    tf_feed["batch_size"] = many
    onnx_feed = {k: np.repeat(v, many, axis=0) for k, v in onnx_feed.items()}
    tf_feed = {k: (np.repeat(v, many, axis=0) if isinstance(v, np.ndarray) else v) for k, v in tf_feed.items()}
    if "recurrent_in" in {i.name for i in session.get_inputs()}:
        onnx_feed["recurrent_in"] = np.zeros((many, 1, brain.memory_space_size), np.float32)
        tf_feed["recurrent_in"] = np.zeros((many, brain.memory_space_size), np.float32)
    if brain.action_space_type == "continuous":
        sampled, mean = session.run(["continuous_actions", "deterministic_continuous_actions"], onnx_feed)
        inside = np.abs(mean[0]) < 0.5  # far from the clip at +-1
        noise = (sampled - mean)[:, inside] * UNITY_CONTINUOUS_CLIP
        np.testing.assert_allclose(noise.std(axis=0), 0.2, rtol=0.1)
        np.testing.assert_allclose(noise.mean(axis=0), 0.0, atol=0.03)
    else:
        probs = frozen.run(["action_probs"], tf_feed)["action_probs"][0]
        (sampled,) = session.run(["discrete_actions"], onnx_feed)
        frequencies = np.bincount(sampled[:, 0], minlength=brain.action_space_size) / many
        np.testing.assert_allclose(frequencies, probs, atol=0.04)
        onnx_feed["action_masks"][: many // 2] = [0, 1, 0]
        onnx_feed["action_masks"][many // 2:] = [1, 0, 1]
        (sampled,) = session.run(["discrete_actions"], onnx_feed)
        assert set(sampled[: many // 2, 0]) == {1}
        assert set(sampled[many // 2:, 0]) <= {0, 2}
        (greedy,) = session.run(["deterministic_discrete_actions"], onnx_feed)
        assert set(greedy[: many // 2, 0]) == {1}


def test_a_frozen_mean_comes_out_at_unity_scale(tmp_path):
    """Means of 1.5, 4 and -0.75 (policy weights 0, the head's bias set, sigma ~1e-13) come out of both
    continuous outputs as 0.5, 1.0 and -0.25; the ``.bytes`` keeps the API-2 contract: the raw mean."""
    brain = brain_of("vector-continuous-normalized")
    trainer = make_trainer(brain, normalize=True)
    randomise(trainer, np.random.default_rng(9), log_sigma=-30.0)
    graph = trainer.sess.graph
    with graph.as_default():
        for var in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES):
            if var.op.name == "policy_head/kernel":
                var.load(np.zeros(var.shape.as_list(), np.float32), trainer.sess)
            elif var.op.name == "policy_head/bias":
                var.load(np.float32([1.5, 4.0, -0.75]), trainer.sess)
    bytes_path, onnx_path = export_both(trainer, tmp_path)
    tf_feed, onnx_feed = random_inputs(brain, np.random.default_rng(10))
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    sampled, mean = session.run(["continuous_actions", "deterministic_continuous_actions"], onnx_feed)
    np.testing.assert_allclose(mean, np.tile([0.5, 1.0, -0.25], (N, 1)), atol=1e-6)
    np.testing.assert_allclose(sampled, np.tile([0.5, 1.0, -0.25], (N, 1)), atol=1e-6)
    np.testing.assert_allclose(Frozen(bytes_path).run(["action"], tf_feed)["action"],
                               np.tile([1.5, 4.0, -0.75], (N, 1)), atol=1e-6)


def frozen_feed(spec, states, images, memory):
    """What the ``.bytes`` Internal brain feeds for these uint8 frames and states (pixels in 0..1)."""
    n = len(states)
    feed = {"batch_size": n, "sequence_length": 1}
    for k, (camera, frames) in enumerate(zip(spec.cameras, images)):
        pixels = frames.astype(np.float32) / 255.0
        feed[f"observation_{k}"] = pixels.mean(axis=3, keepdims=True) if camera.black_and_white else pixels
    if spec.state_size:
        feed["state"] = (states.astype(np.int32).reshape(n, 1) if spec.state_space == "discrete"
                         else states.astype(np.float32))
    if spec.memory_size:
        feed["recurrent_in"] = memory.astype(np.float32)
    return feed


def test_academy_onnx_brain_decides_like_the_bytes_brain(exported):
    """The two Internal brains on the same uint8 frames and states, over three decisions: the same
    memories; continuous: the ONNX brain's deterministic actions are the ``.bytes`` mean clamped to
    +-3 and divided by 3, its default (sampled) ones lie in [-1, 1] around them; discrete: its
    greedy actions are the argmax of the frozen graph's probabilities, row for row."""
    name, brain, _, frozen, _, bytes_path, onnx_path = exported
    state_size, state_type, cameras, recurrent, action_type, _ = VARIANTS[name]
    spec = BrainSpec(name="Brain", n_agents=N, state_size=state_size, action_size=3,
                     state_space="continuous" if state_type else "discrete",
                     action_space="continuous" if action_type else "discrete",
                     memory_size=brain.memory_space_size,
                     cameras=tuple(Camera(c["width"], c["height"], c["blackAndWhite"]) for c in cameras))
    via_bytes = load_internal_brain(bytes_path, spec)
    via_onnx = load_internal_brain(onnx_path, spec)
    assert isinstance(via_bytes, InternalBrain) and isinstance(via_onnx, OnnxInternalBrain)
    greedy_onnx = OnnxInternalBrain(onnx_path, spec, deterministic=True)
    rng = np.random.default_rng(3)
    memory = np.zeros((N, brain.memory_space_size))
    for _ in range(3):
        states = (rng.normal(size=(N, state_size)) if state_type
                  else rng.integers(0, state_size, size=(N, 1)).astype(float))
        images = [rng.integers(0, 256, size=(N, c["height"], c["width"], 3), dtype=np.uint8) for c in cameras]
        actions_b, memory_b = via_bytes.decide(states, images, memory)
        actions_o, memory_o = via_onnx.decide(states, images, memory)
        greedy_o, _ = greedy_onnx.decide(states, images, memory)
        if action_type:
            assert np.abs(actions_b).max() > 1.0, "the mean must need the scaling"
            np.testing.assert_allclose(greedy_o, np.clip(actions_b, -3, 3) / 3, atol=1e-5)
            assert np.abs(actions_o).max() <= 1.0 and not np.allclose(actions_o, greedy_o)
        else:
            probs = frozen.run(["action_probs"], frozen_feed(spec, states, images, memory))["action_probs"]
            assert actions_o.shape == actions_b.shape == greedy_o.shape == (N, 1)
            np.testing.assert_array_equal(greedy_o[:, 0], np.argmax(probs, axis=1))
            assert set(actions_o[:, 0]) <= {0.0, 1.0, 2.0}
        np.testing.assert_allclose(memory_o, memory_b, atol=1e-5)
        memory = memory_b


def test_unroll_refuses_a_loop_it_cannot_rewrite():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        ta = tf.TensorArray(tf.float32, size=1)  # written inside but read without an unstack
        _, out = tf.while_loop(lambda i, a: i < 1, lambda i, a: (i + 1, a.write(i, x)), [0, ta])
        tf.identity(out.read(0), name="y")
    with pytest.raises(Exception, match="TensorArray"):
        unroll_single_step(graph.as_graph_def(), ["y"])


def _set_constant(model, name: str, value: np.ndarray) -> None:
    init = next(i for i in model.graph.initializer if i.name == name)
    init.CopyFrom(numpy_helper.from_array(value, name))


def test_contract_checker_catches_what_unity_rejects(tmp_path):
    """The checker is not a rubber stamp: each broken rule of a good (recurrent) file is reported."""
    brain = brain_of("recurrent-vector-continuous")
    trainer = make_trainer(brain, use_recurrent=True)
    (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    good = onnx.load(path)
    assert check_contract(good, brain) == []

    def broken(edit):
        model = onnx.ModelProto()
        model.CopyFrom(good)
        edit(model)
        return " | ".join(check_contract(model, brain))

    def find_input(m, name):
        return next(i for i in m.graph.input if i.name == name)

    assert "opset" in broken(lambda m: setattr(m.opset_import[0], "version", 17))
    assert "version_number must be [3.0]" in broken(lambda m: _set_constant(m, "version_number", np.float32([2.0])))
    assert "must be float32" in broken(lambda m: _set_constant(m, "memory_size", np.int32([8])))
    assert "unknown input" in broken(lambda m: setattr(find_input(m, "obs_0"), "name", "vector_observation"))
    assert "bare" in broken(lambda m: setattr(m.graph.output[0], "name", m.graph.output[0].name + ":0"))
    assert "legacy importer" in broken(lambda m: setattr(m, "producer_name", "tf2onnx"))
    assert "rank 3" in broken(lambda m: find_input(m, "recurrent_in").type.tensor_type.shape.dim.pop(1))
    assert "Loop" in broken(lambda m: m.graph.node.append(onnx.helper.make_node("Loop", ["a", "b"], ["c"])))
    assert "obs_0 is [?x6] but the state Sensor expects [?x5]" in broken(
        lambda m: setattr(find_input(m, "obs_0").type.tensor_type.shape.dim[1], "dim_value", 6))


# ---------------------------------------------------------------- scenes: the same score either way
def scene_export(tmp_path, scene: str, logit_scale: float = 1.0, log_sigma=None):
    """A randomised PPO policy for the External brain of ``scene``, exported both ways."""
    spec = next(s for s in load_scene(scene).brains if s.brain_type == "external")
    brain = BrainParameters(spec.name, spec.parameters_json())
    trainer = make_trainer(brain, hidden_units=16)
    randomise(trainer, np.random.default_rng(4), logit_scale=logit_scale, log_sigma=log_sigma)
    graph = trainer.sess.graph
    bytes_path = str(tmp_path / f"{scene}.bytes")
    export_graph(trainer.sess, trainer.export_nodes(), bytes_path, keep_nodes=contract_inputs(graph, ""))
    (onnx_path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    assert os.path.basename(onnx_path) == f"{spec.name}.onnx"
    return spec, trainer, bytes_path, onnx_path


def scene_reward(scene: str, brain: str, path: str, episodes: int, wrap=None) -> float:
    """Mean reward of ``episodes`` with ``brain`` run by the graph at ``path``, as ``python -m academy`` does it;
    ``wrap(actions)`` changes the actions on their way to the scene."""
    configs = _brain_configs(load_scene(scene), [f"{brain}=internal:{path}"], [], 0)
    if wrap is not None:
        policy = configs[brain].policy

        class Wrapped:
            def decide(self, states, observations, memories):
                actions, memories = policy.decide(states, observations, memories)
                return wrap(actions), memories

        configs[brain].policy = Wrapped()
    return Academy(load_scene(scene)(0), configs).run_episodes(episodes)[brain]


@pytest.mark.slow
def test_3dball_plays_the_onnx_as_the_trainer_acts_over_grpc(tmp_path):
    """Unity copies ``continuous_actions`` into the agent; over gRPC the trainer sends the policy's
    actions as clamp(a, -3, 3) / 3. With sigma ~1e-13 the two are the same numbers, so the ONNX brain
    must score exactly what the ``.bytes`` policy scores with its actions so scaled, and unlike it
    without (the scene clamps to [-1, 1]: a third of the scale is another policy)."""
    spec, _, bytes_path, onnx_path = scene_export(tmp_path, "3DBall", log_sigma=-30.0)
    over_grpc = scene_reward("3DBall", spec.name, bytes_path, 24, wrap=lambda a: np.clip(a, -3, 3) / 3)
    assert scene_reward("3DBall", spec.name, onnx_path, 24) == pytest.approx(over_grpc, abs=1e-6)
    assert scene_reward("3DBall", spec.name, bytes_path, 24) != pytest.approx(over_grpc, abs=1.0)
    # the command line picks the ONNX brain by the file's extension, without TensorFlow
    assert run_academy("3DBall", "--brain", f"{spec.name}=internal:{onnx_path}", "--episodes", "24") == \
        pytest.approx(over_grpc, abs=1e-4)


@pytest.mark.slow
def test_basic_scores_the_same_with_the_onnx_and_the_bytes(tmp_path):
    """Discrete actions are sampled by both files; logits scaled up make the policy all but greedy,
    so the two runs take the same actions and must score the same."""
    spec, trainer, bytes_path, onnx_path = scene_export(tmp_path, "Basic", logit_scale=1e4)
    probs = trainer.sess.run(trainer.model.probs, {trainer.model.state_in: np.arange(20)[:, None],
                                                   trainer.model.batch_size: 20})
    assert probs.min(axis=1).max() < 1e-9, "every state should have one all-but-certain action"
    with_bytes = scene_reward("Basic", spec.name, bytes_path, 20)
    assert scene_reward("Basic", spec.name, onnx_path, 20) == pytest.approx(with_bytes, abs=1e-9)


@pytest.mark.slow
def test_one_file_per_exporting_brain_of_a_multi_brain_graph(tmp_path):
    """Brains under their graph scopes in one graph (as the controller builds them), a ghost-like
    trainer without a scope skipped: each file holds one brain with bare names and its own numbers."""
    from trainers.export.onnx_model import spec_for
    from trainers.ppo.models import create_agent_model

    brains = {"A": BrainParameters("Striker", {"stateSize": 6, "actionSize": 2, "actionSpaceType": 1,
                                               "stateSpaceType": 1, "cameraResolutions": []}),
              "B": BrainParameters("Goalie", {"stateSize": 4, "actionSize": 3, "actionSpaceType": 0,
                                              "stateSpaceType": 1, "cameraResolutions": []})}
    graph = tf.Graph()
    with graph.as_default():
        models = {}
        for scope, brain in brains.items():
            with tf.variable_scope(scope):
                models[scope] = create_agent_model(brain, h_size=8)
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    specs = [spec_for(brains[s], s, ["action", "value_estimate", "action_probs"]) for s in brains]

    class Ghost:
        brain_name, graph_scope = "ghost-Striker", None

        def export_nodes(self):
            return []

    paths = export_onnx(sess, specs + [Ghost()], str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["Striker.onnx", "Goalie.onnx"]
    rng = np.random.default_rng(5)
    for (scope, brain), path in zip(brains.items(), paths):
        assert_contract(path, brain)
        state = rng.normal(size=(3, brain.state_space_size)).astype(np.float32)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        feed = {"obs_0": state}
        if brain.action_space_type == "discrete":
            feed["action_masks"] = np.ones((3, 3), np.float32)
        (value,) = session.run(["value_estimate"], feed)
        m = models[scope]
        expected = sess.run(m.value, {m.state_in: state, m.batch_size: 3})
        np.testing.assert_allclose(value, expected, atol=1e-5)


def test_modern_brain_with_branches_and_masks(tmp_path):
    """A modern-protocol brain (two branches, masks): the graph's own per-branch masking becomes the
    ONNX ``action_masks``; greedy and sampled indices are per branch and never masked."""
    brain = BrainParameters("Brain", {"stateSize": 6, "actionSize": 2, "actionSpaceType": 0, "stateSpaceType": 1,
                                      "cameraResolutions": [], "actionBranches": [3, 2], "actionMasks": True})
    trainer = make_trainer(brain)
    randomise(trainer, np.random.default_rng(6))
    bytes_path, onnx_path = export_both(trainer, tmp_path)
    model = assert_contract(onnx_path, brain)
    assert next(i for i in model.graph.initializer if i.name == "discrete_action_output_shape").dims == [1, 2]
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    frozen = Frozen(bytes_path)
    rng = np.random.default_rng(7)
    n = 2000
    state = np.repeat(rng.normal(size=(1, 6)).astype(np.float32), n, axis=0)
    for mask in ([1, 1, 1, 1, 1], [0, 1, 1, 1, 0], [1, 0, 0, 0, 1]):
        masks = np.tile(np.float32(mask), (n, 1))
        probs = frozen.run(["action_probs"], {"state": state, "action_masks": masks, "batch_size": n})["action_probs"]
        sampled, greedy = session.run(["discrete_actions", "deterministic_discrete_actions"],
                                      {"obs_0": state, "action_masks": masks})
        assert sampled.dtype == greedy.dtype == np.int64 and sampled.shape == greedy.shape == (n, 2)
        np.testing.assert_array_equal(greedy[0], [np.argmax(probs[0, :3]), np.argmax(probs[0, 3:])])
        allowed = [set(np.flatnonzero(mask[:3])), set(np.flatnonzero(mask[3:]))]
        assert set(sampled[:, 0]) <= allowed[0] and set(sampled[:, 1]) <= allowed[1]
        np.testing.assert_allclose(np.bincount(sampled[:, 0], minlength=3) / n, probs[0, :3], atol=0.05)
