"""Hybrid actions: continuous actions and discrete branches in one behaviour, one policy, one ONNX.

A hybrid brain's action row is its continuous values, then one index per branch. Over gRPC each
row goes out as one ``AgentActionProto`` with both ``continuous_actions`` (``clamp(a, -3, 3) / 3``
of the Gaussian sample, the numbers the ONNX export's ``continuous_actions`` holds) and
``discrete_actions`` (ML-Agents' ``ActionTuple``). The numbers 3 and 1/3 are written out here.
"""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from academy import load_scene
from academy.academy import Academy
from academy.envs import interact
from runner.settings.trainer_config import load_trainer_config
from tests.conftest import free_port, learn_over_grpc, run_academy, write
from tests.onnx_contract import assert_contract
from tests.recording_build import received_actions, recording_build
from tests.step_view import InfoView
from tests.trainers.export.test_onnx_export import randomise
from trainers.export.onnx_model import export_onnx
from trainers.ppo.trainer import PPO_HYPERPARAMETERS, PPOTrainer
from trainers.tf_utils import tf
from trainers.trainer.base import TrainerConfigError
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.registry import load_registry
from unityagents import UnityEnvironment
from unityagents.base_env import ActionTuple
from unityagents.brain import BrainParameters
from unityagents.exception import UnityActionException

NAME = "InteractBrain?team=0"
UNITY_CLIP = 3.0


def hybrid_brain(branches=(2, 3), name="Hybrid") -> BrainParameters:
    return BrainParameters(name, {"stateSize": 3, "actionSize": 2, "memorySize": 0, "cameraResolutions": [],
                                  "actionDescriptions": [], "actionSpaceType": 1, "stateSpaceType": 1,
                                  "actionBranches": list(branches), "actionMasks": True,
                                  "continuousActionContract": "unit"})


def ppo_trainer(brain, seed=0):
    params = {k: p.default for k, p in PPO_HYPERPARAMETERS.items()}
    params.update(trainer="ppo", graph_scope="", summary_path=None, hidden_units=16)
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        trainer = PPOTrainer(sess, {brain.brain_name: brain}, brain.brain_name, params, True, seed=seed)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    return trainer


def info_of(n, masks=None, seed=0) -> BrainInfo:
    states = np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32)
    return BrainInfo([], states, agents=list(range(n)), reward=[0.0] * n, local_done=[False] * n,
                     action=np.zeros((n, 4), np.float32), action_masks=masks)


# ---------------------------------------------------------------- the policy and its ONNX file
def test_one_policy_samples_both_parts_honours_masks_and_exports_both_outputs(tmp_path):
    brain = hybrid_brain()
    trainer = ppo_trainer(brain)
    randomise(trainer, np.random.default_rng(3), log_sigma=np.log(2.0), logit_scale=3.0)
    only = np.array([[0, 1, 0, 0, 1]] * 64, np.float32)  # branch 0: index 1; branch 1: index 2
    sent, _, _, out = trainer.take_action({"Hybrid": info_of(64, only)})
    sample = out.fields["actions"]
    assert sample.shape == (64, 4) and np.abs(sample[:, :2]).max() > UNITY_CLIP
    assert sample[:, 2:].tolist() == [[1.0, 2.0]] * 64, "the masks decide the branches"
    np.testing.assert_allclose(sent[:, :2], np.clip(sample[:, :2], -3, 3) / 3, rtol=1e-6)
    np.testing.assert_array_equal(sent[:, 2:], sample[:, 2:])
    free = trainer.take_action({"Hybrid": info_of(256, np.ones((256, 5), np.float32), seed=1)})[3].fields["actions"]
    assert len({tuple(r) for r in free[:, 2:]}) > 2, "without masks the branches vary"

    (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    model = assert_contract(path, brain)
    outputs = {o.name for o in model.graph.output}
    assert {"continuous_actions", "deterministic_continuous_actions", "discrete_actions",
            "deterministic_discrete_actions"} <= outputs
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    states = info_of(64, seed=2).states
    names = ["continuous_actions", "deterministic_continuous_actions", "discrete_actions",
             "discrete_action_output_shape", "continuous_action_output_shape"]
    cont, mean, picks, shape, width = session.run(names, {"obs_0": states, "action_masks": only})
    assert shape.tolist() == [[2.0, 3.0]] and width.tolist() == [2.0]
    assert picks.dtype == np.int64 and picks.tolist() == [[1, 2]] * 64
    m = trainer.model
    mu = trainer.sess.run(m.mu, {m.state_in: states, m.batch_size: 64, m.sequence_length: 1})
    np.testing.assert_allclose(mean, np.clip(mu, -3, 3) / 3, rtol=1e-4, atol=1e-6)
    assert np.abs(cont).max() <= 1.0 and not np.allclose(cont, mean), "the stochastic output samples"


def test_non_ppo_trainers_learned_signals_and_the_api2_protocol_refuse_hybrid_actions(tmp_path):
    config = load_trainer_config(write(tmp_path / "sac.yaml", "Hybrid:\n  trainer: sac\n"), load_registry())
    with pytest.raises(TrainerConfigError) as error:
        config.settings_for_environment({"Hybrid": hybrid_brain()}, ["Hybrid"])
    message = str(error.value)
    assert "brain 'Hybrid', key 'trainer'" in message and "hybrid" in message and "trainer: ppo" in message, message
    curious = "Hybrid:\n  reward_signals: {extrinsic: {}, curiosity: {strength: 0.01}}\n"
    config = load_trainer_config(write(tmp_path / "curious.yaml", curious), load_registry())
    with pytest.raises(TrainerConfigError, match="brain 'Hybrid', key 'reward_signals'.*hybrid.*curiosity"):
        config.settings_for_environment({"Hybrid": hybrid_brain()}, ["Hybrid"])
    with pytest.raises(ValueError, match="InteractBrain.*hybrid actions.*--mlagents-port"):
        Academy(load_scene("Interact")(0)).academy_parameters()


def test_interact_needs_both_parts():
    """The heuristic walks and presses; a policy with only one of its parts cannot score."""
    def mean_reward(policy):
        scene = interact.Interact(0)
        scene.heuristic = lambda brain, full=scene.heuristic: policy(full(brain))
        return Academy(scene).run_episodes(200)["InteractBrain"]

    rng = np.random.default_rng(0)
    both = mean_reward(lambda a: a)
    walk_only = mean_reward(lambda a: np.column_stack([a[:, :2], np.zeros(len(a))]))
    press_only = mean_reward(lambda a: np.column_stack([np.zeros((len(a), 2)), np.ones(len(a))]))
    wait_only = mean_reward(lambda a: np.zeros_like(a))
    random_press = mean_reward(lambda a: np.column_stack([a[:, :2], rng.integers(0, 2, len(a))]))
    assert both >= 1.0 and max(walk_only, press_only, wait_only) <= 0.0, (both, walk_only, press_only, wait_only)
    assert random_press <= 0.5, random_press  # the press must be chosen, not only available


# ---------------------------------------------------------------- at the wire
def test_over_grpc_each_agent_gets_an_action_tuple_and_a_wrong_width_is_refused(tmp_path):
    build, record = recording_build(tmp_path, "Interact")
    env = InfoView(UnityEnvironment(build, base_port=free_port(), protocol="grpc", seed=0, log_dir=str(tmp_path)))
    samples = []
    try:
        brain = env.brains[NAME]
        assert brain.is_hybrid and (brain.action_space_size, brain.action_branches) == (2, [2])
        with tf.Graph().as_default() as graph:
            sess = tf.Session(graph=graph)
            params = {k: p.default for k, p in PPO_HYPERPARAMETERS.items()}
            params.update(trainer="ppo", graph_scope="", summary_path=None, hidden_units=16)
            trainer = PPOTrainer(sess, env.brains, NAME, params, True, seed=2)
            sess.run(tf.global_variables_initializer())
        graph.finalize()
        randomise(trainer, np.random.default_rng(8), log_sigma=np.log(2.0), logit_scale=3.0)
        info = env.reset()
        for _ in range(5):
            sent, _, _, out = trainer.take_action(info)
            samples.append(out.fields["actions"][: len(env._communicator._behaviors[NAME].decision_ids)])
            info = env.step(sent)
        n = len(env._communicator._behaviors[NAME].decision_ids)
        with pytest.raises(UnityActionException) as error:
            env.env.step_behaviors({NAME: ActionTuple(np.zeros((n, 2)))})  # continuous only: the branch is missing
        message = str(error.value)
        assert NAME in message and f"the discrete actions have shape ({n}, 0)" in message, message
        assert f"expects ({n}, 1)" in message and "discrete branches [2]" in message, message
    finally:
        env.close()
    received = received_actions(record, NAME)
    assert len(received) == 5
    for sample, (continuous, discrete) in zip(samples, received):
        assert continuous.shape == (len(sample), 2) and discrete.shape == (len(sample), 1)
        np.testing.assert_allclose(continuous, np.clip(sample[:, :2], -3, 3) / 3, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(discrete, sample[:, 2:])
    assert np.abs(np.concatenate(samples)[:, :2]).max() > UNITY_CLIP, "the test needs samples beyond the clip"


# ---------------------------------------------------------------- PPO trains the scene
INTERACT = {"InteractBrain": {"batch_size": 256, "buffer_size": 1024, "beta": 5.0e-3, "hidden_units": 64,
                              "learning_rate": 2.0e-3, "learning_rate_schedule": "constant", "normalize": False,
                              "num_epoch": 6, "max_steps": 1.8e4, "summary_freq": 3000, "time_horizon": 64}}


@pytest.mark.slow
def test_ppo_learns_to_walk_and_press_and_its_onnx_scores_the_same_in_the_academy(tmp_path):
    """Walking only or pressing only scores at most 0, walking while pressing at random about 0.3
    (``test_interact_needs_both_parts``); the trained policy passes 0.8 by 1.5e4 steps."""
    rewards, path = learn_over_grpc(tmp_path, "Interact", INTERACT, "hybrid", timeout=900)
    assert rewards and rewards[-1] >= 0.8, rewards
    assert_contract(path, BrainParameters(NAME, {**hybrid_brain((2,)).to_dict()}))
    scored = run_academy("Interact", "--brain", f"InteractBrain=internal:{path}", "--episodes", "200")
    assert scored >= rewards[-1] - 0.1, (scored, rewards)
