"""The scale of continuous actions: what each protocol's environment receives from a trainer.

Over the modern protocol Unity copies the ONNX export's ``continuous_actions`` into its agents, and
that output is ``clamp(a, -3, 3) / 3`` of the Gaussian sample ``a`` (ML-Agents' rule); so during
training over gRPC the environment must receive those same numbers, while the trainer's buffer
keeps the unclipped sample for its log-probabilities. API-2 environments get the sample as it is
(2018 agent scripts clamp it themselves). A gymnasium or PettingZoo user who calls
``UnityEnvironment.step`` sends their own actions, which arrive unchanged.

The numbers 3 and 1/3 are written out here (ML-Agents' contract), not taken from the exporter.
The wire test records, on the Unity side, the ``continuous_actions`` of every message the
academy received, and compares them with what the trainer sampled and with what the ONNX export
computes from the same observations.
"""
import copy
import os

import numpy as np
import onnxruntime
import pytest

from tests.conftest import free_port
from tests.recording_build import received_actions, recording_build
from tests.step_view import InfoView
from tests.trainers.export.test_onnx_export import randomise
from trainers.export.onnx_model import export_onnx
from trainers.ghost.trainer import GhostTrainer
from trainers.imitation.trainer import ImitationTrainer
from trainers.ppo.trainer import PPO_HYPERPARAMETERS, PPOTrainer
from trainers.tf_utils import tf
from trainers.trainer.brain_info import BrainInfo
from unityagents import UnityEnvironment
from unityagents.brain import BrainParameters

UNITY_CLIP = 3.0  # ML-Agents: continuous_actions = clamp(a, -3, 3) / 3 for a Gaussian policy


def unity_scale(a):
    return np.clip(a, -UNITY_CLIP, UNITY_CLIP) / UNITY_CLIP


def brain(name, contract, state_size=8, action_type=1):
    params = {"stateSize": state_size, "actionSize": 2, "actionSpaceType": action_type, "stateSpaceType": 1,
              "cameraResolutions": [], "actionDescriptions": ["", ""]}
    if contract == "unit":
        params["continuousActionContract"] = "unit"
    return BrainParameters(name, params)


def info_of(n, state_size=8, seed=0):
    states = np.random.default_rng(seed).normal(size=(n, state_size)).astype(np.float32)
    return BrainInfo([], states, agents=list(range(n)), reward=[0.0] * n, local_done=[False] * n,
                     action=np.zeros((n, 2), np.float32))


def ppo_params(scope="", **overrides):
    params = {k: p.default for k, p in PPO_HYPERPARAMETERS.items()}
    params.update(trainer="ppo", graph_scope=scope, summary_path=None, hidden_units=16, **overrides)
    return params


def load(sess, name, value):
    var = next(v for v in sess.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES) if v.op.name == name)
    var.load(np.asarray(value, var.dtype.as_numpy_dtype), sess)


def test_brain_contract_maps_actions_and_round_trips():
    a = np.array([[-4.5, -1.5], [0.75, 3.0], [6.0, 0.0]], np.float32)
    unit = brain("B", "unit")
    np.testing.assert_allclose(unit.environment_actions(a), [[-1.0, -0.5], [0.25, 1.0], [1.0, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(unit.environment_actions(a, bounded=True), [[-1.0, -1.0], [0.75, 1.0], [1.0, 0.0]])
    raw = brain("B", "raw")
    assert raw.environment_actions(a) is a
    discrete = brain("D", "unit", action_type=0)
    assert discrete.environment_actions(np.array([[1], [0]])).tolist() == [[1], [0]]
    again = BrainParameters("B", unit.to_dict())
    assert again.continuous_action_contract == "unit" and "continuousActionContract" not in raw.to_dict()
    with pytest.raises(ValueError, match="continuousActionContract 'half'.*'raw' for API-2"):
        BrainParameters("B", {**raw.to_dict(), "continuousActionContract": "half"})


@pytest.mark.parametrize("contract", ["unit", "raw"])
def test_ppo_sends_the_contract_and_keeps_the_sample(contract):
    """The buffer's ``actions`` are the unclipped sample; what ``take_action`` returns is what is sent."""
    b = brain("Ball", contract)
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        trainer = PPOTrainer(sess, {"Ball": b}, "Ball", ppo_params(), True, seed=1)
        sess.run(tf.global_variables_initializer())
        load(sess, "log_sigma", np.log([2.0, 2.0]))
    graph.finalize()
    sent, _, _, out = trainer.take_action({"Ball": info_of(64)})
    sample = out.fields["actions"]
    np.testing.assert_array_equal(sample, out.actions)
    assert np.abs(sample).max() > UNITY_CLIP, "the test needs samples beyond the clip"
    np.testing.assert_allclose(sent, unity_scale(sample) if contract == "unit" else sample, rtol=1e-6)
    assert out.sent is sent


def test_ghost_sends_the_contract():
    """The ghost acts with the learner's snapshot; its Gaussian samples go through the same contract."""
    learner, ghost = "TennisBrain", "ghost-TennisBrain"
    brains = {learner: brain(learner, "unit"), ghost: brain(ghost, "unit")}
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        original = ppo_params(learner)
        ppo = PPOTrainer(sess, brains, learner, original, True)
        trainer = GhostTrainer(sess, brains, ghost, dict(
            trainer="ghost", brain_to_copy=learner, new_model_freq=4, max_num_models=3, max_steps=1000,
            summary_freq=100, graph_scope=ghost, summary_path=None, original_brain_parameters=original), True)
        sess.run(tf.global_variables_initializer())
        load(sess, f"{learner}/log_sigma", np.log([2.5, 2.5]))
    graph.finalize()
    info = info_of(64)
    mean = sess.run(ppo.model.output, {ppo.model.state_in: info.states, ppo.model.batch_size: 64,
                                       ppo.model.sequence_length: 1})  # epsilon left at 0: the mean
    rng = copy.deepcopy(trainer.rng)
    sent, _, _, _ = trainer.take_action({ghost: info})
    sample = mean + 2.5 * rng.standard_normal((64, 2))
    assert np.abs(sample).max() > UNITY_CLIP
    np.testing.assert_allclose(sent, unity_scale(sample), rtol=1e-4, atol=1e-5)


def test_imitation_student_is_already_in_environment_units():
    """The student copies the teacher's executed actions: over gRPC they are clamped, not divided."""
    student, teacher = "Student", "Teacher"
    brains = {student: brain(student, "unit"), teacher: brain(teacher, "unit")}
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        params = dict(trainer="imitation", brain_to_imitate=teacher, graph_scope="", summary_path=None,
                      batch_size=8, buffer_size=64, hidden_units=8)
        trainer = ImitationTrainer(sess, brains, student, params, True)
        sess.run(tf.global_variables_initializer())
        load(sess, "policy_head/bias", [2.0, 0.5])
    graph.finalize()
    info = info_of(8)
    output = sess.run(trainer.model.output, trainer._input_feed(info))
    sent, _, _, _ = trainer.take_action({student: info})
    assert output[:, 0].min() > 1.0
    np.testing.assert_allclose(sent, np.clip(output, -1.0, 1.0), rtol=1e-6)


# ---------------------------------------------------------------- at the wire, against the academy
def test_over_grpc_the_scene_receives_what_the_onnx_export_outputs(tmp_path):
    build, record = recording_build(tmp_path, "3DBall")
    env = InfoView(UnityEnvironment(build, base_port=free_port(), protocol="grpc", seed=0, log_dir=str(tmp_path)))
    name = "3DBall?team=0"
    samples, sent_states, deterministic = [], [], []
    try:
        assert env.brains[name].continuous_action_contract == "unit"
        with tf.Graph().as_default() as graph:
            sess = tf.Session(graph=graph)
            trainer = PPOTrainer(sess, env.brains, name, ppo_params(normalize=True), True, seed=2)
            sess.run(tf.global_variables_initializer())
        graph.finalize()
        randomise(trainer, np.random.default_rng(8), log_sigma=np.log(2.0), logit_scale=3.0)
        info = env.reset()
        for step in range(30):
            trainer.is_training = step < 20  # then the mean, as an exported policy acts deterministically
            sent, _, _, out = trainer.take_action(info)  # what the controller sends
            assert len(info[name].agents) == 12 and all(info[name].decision_requested)
            (deterministic if step >= 20 else samples).append(out.fields["actions"])
            sent_states.append(np.asarray(info[name].states, np.float32))
            info = env.step(sent)
        env.step({name: np.full((12, 2), 2.5)})  # a gymnasium user's own actions
    finally:
        env.close()
    received = [continuous for continuous, _ in received_actions(record, name)]
    assert len(received) == 31 and all(r.shape == (12, 2) for r in received)

    sampled, got = np.concatenate(samples), np.concatenate(received[:20])
    assert np.abs(sampled).max() > UNITY_CLIP and (np.abs(sampled) > 1.0).mean() > 0.2, "the sample must spread"
    assert np.abs(np.concatenate(received[:30])).max() <= 1.0
    np.testing.assert_allclose(got, unity_scale(sampled), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(received[30], np.full((12, 2), 2.5))

    (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (onnx_mean,) = session.run(["deterministic_continuous_actions"], {"obs_0": np.concatenate(sent_states[20:])})
    scene_got = np.concatenate(received[20:30])
    assert np.abs(np.concatenate(deterministic)).max() > 1.0, "the mean itself must need the scaling"
    np.testing.assert_allclose(scene_got, onnx_mean, atol=1e-5)
    assert os.path.getsize(path) > 0


@pytest.mark.parametrize("scene", ["3DBall", "3DBallHard", "Tennis"])
def test_continuous_scenes_clamp_to_one_like_unitys_agents(scene):
    """Every continuous scene clamps an action to [-1, 1] and then scales it (a 5 acts as a 1, a 0.5
    acts as half of it), as Unity's example agents do with whatever float they receive."""
    from academy import load_scene
    from academy.academy import Academy

    def after(value):
        academy = Academy(load_scene(scene)(0), {})
        academy.reset()
        for _ in range(3):
            for b in academy.brains:
                b.action[:] = value
            academy.advance()
        return np.concatenate([academy.scene.states(b.name) for b in academy.brains])

    np.testing.assert_array_equal(after(5.0), after(1.0))
    np.testing.assert_array_equal(after(-5.0), after(-1.0))
    assert not np.allclose(after(0.5), after(1.0))
