"""``deterministic`` (Release 22's ``network_settings.deterministic`` / ``--deterministic``): the
actions a trainer sends are the policy's mean (continuous) or most probable action per branch
(discrete), while training too, for PPO, MA-POCA's policy (PPO's), SAC and a self-play opponent."""
from __future__ import annotations

import numpy as np
import pytest

from tests.fake_env import learn_from_step
from trainers.ppo.trainer import PPO_HYPERPARAMETERS, PPOTrainer
from trainers.sac import SACTrainer
from trainers.settings.self_play import validate_self_play
from trainers.tf_utils import tf
from trainers.trainer.brain_info import BrainInfo
from unityagents.brain import BrainParameters

CONTINUOUS = {"stateSize": 4, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
              "continuousActionContract": "unit"}
DISCRETE = {"stateSize": 4, "actionSize": 3, "actionSpaceType": 0, "stateSpaceType": 1}
BRANCHED = {"stateSize": 4, "actionSize": 2, "actionSpaceType": 0, "stateSpaceType": 1,
            "actionBranches": [3, 2], "actionMasks": True}
HYBRID = {"stateSize": 4, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1,
          "continuousActionContract": "unit", "actionBranches": [3, 2]}
SPECS = {"continuous": CONTINUOUS, "discrete": DISCRETE, "branched": BRANCHED, "hybrid": HYBRID}


def build(trainer_class, spec, **overrides):
    brain = BrainParameters("Brain", spec)
    defaults = ({k: p.default for k, p in PPO_HYPERPARAMETERS.items()} if trainer_class is PPOTrainer else {})
    params = {**defaults, "graph_scope": "", "summary_path": None, "hidden_units": 16, "batch_size": 16,
              "buffer_size": 200, "max_steps": 1000, **overrides}
    sess = tf.Session(graph=tf.Graph())
    trainer = trainer_class(sess, {"Brain": brain}, "Brain", params, training=True, seed=3)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
        rng = np.random.default_rng(0)
        for var in tf.trainable_variables():  # far from the near-zero initial weights: clear preferences
            var.load(rng.normal(scale=0.7, size=var.shape.as_list()), sess)
    sess.graph.finalize()
    return trainer


def info_of(n, seed=0, masks=None):
    states = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)
    return BrainInfo([], states, None, [0.0] * n, list(range(n)), [False] * n, action_masks=masks)


def branch_masks(n):
    return np.tile(np.float32([[1, 0, 1, 1, 1], [0, 1, 1, 0, 1], [1, 1, 1, 1, 1]]), (n // 3 + 1, 1))[:n]


def expected_ppo(trainer, info):
    """The policy's mean and per-branch argmax, computed from the graph's own tensors."""
    m = trainer.model
    feed = {m.state_in: info.states, m.batch_size: len(info.agents), m.sequence_length: 1}
    if getattr(m, "action_masks", None) is not None and info.action_masks is not None:
        feed[m.action_masks] = info.action_masks
    parts = []
    if m.is_continuous or m.is_hybrid:
        parts.append(trainer.sess.run(m.mu, feed))
    if not m.is_continuous or m.is_hybrid:
        probs = trainer.sess.run(m.probs, feed)
        branches = list(trainer.brain.action_branches or [trainer.brain.action_space_size])
        offsets = np.cumsum([0] + branches)
        parts.append(np.stack([np.argmax(probs[:, a:b], axis=1) for a, b in zip(offsets, offsets[1:])], 1))
        return np.concatenate(parts, axis=1).astype(np.float32), probs, offsets
    return parts[0], None, None


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_ppo_acts_with_the_mean_and_the_argmax_while_training(kind):
    trainer = build(PPOTrainer, SPECS[kind], deterministic=True)
    info = info_of(30, masks=branch_masks(30) if kind == "branched" else None)
    expected, probs, offsets = expected_ppo(trainer, info)  # before acting folds the states into the normaliser
    out = trainer.act(info)
    np.testing.assert_allclose(out.actions.astype(np.float32), expected, rtol=1e-5, atol=1e-6)
    if probs is not None:  # the stored log-probability is that of the chosen actions
        chosen = out.actions[:, -len(offsets) + 1:].astype(int)
        log_p = sum(np.log(probs[np.arange(30), offsets[k] + chosen[:, k]]) for k in range(len(offsets) - 1))
        if kind == "hybrid":
            log_sigma = trainer.sess.run(trainer.model.log_sigma)
            log_p = log_p + float(np.sum(-log_sigma - 0.5 * np.log(2 * np.pi)))
        np.testing.assert_allclose(out.fields["log_probs"], log_p, rtol=1e-4, atol=1e-4)
    if kind == "branched":
        assert (np.take_along_axis(info.action_masks, out.actions[:, :1], 1) == 1).all()  # never a masked one
    sampling = build(PPOTrainer, SPECS[kind])  # the same weights without the setting: samples differ
    assert not np.array_equal(sampling.act(info).actions, out.actions)


@pytest.mark.parametrize("kind", ["continuous", "branched"])
def test_sac_acts_with_tanh_of_the_mean_and_the_argmax_while_training(kind):
    trainer = build(SACTrainer, SPECS[kind], deterministic=True)
    m = trainer.model
    info = info_of(30, masks=branch_masks(30) if kind == "branched" else None)
    out = trainer.act(info)
    if kind == "continuous":
        expected = trainer.sess.run(m.deterministic_output, {m.state: info.states, m.batch_size: 30})
        np.testing.assert_allclose(out.actions, expected, rtol=1e-5, atol=1e-6)
    else:
        probs = trainer.sess.run(m.probs, {m.state: info.states, m.action_masks: info.action_masks})
        np.testing.assert_array_equal(out.actions, np.stack([probs[:, :3].argmax(1), probs[:, 3:].argmax(1)], 1))
    sampling = build(SACTrainer, SPECS[kind])
    assert not np.array_equal(sampling.act(info).actions, out.actions)


@pytest.mark.parametrize("learner", [PPOTrainer, SACTrainer])
def test_a_deterministic_self_play_opponent_acts_with_the_learners_mean(learner):
    """The opponent plays snapshot 0 (the learner's weights at the start): for the same states it
    sends exactly what the deterministic learner sends."""
    from trainers.ghost.team_trainer import build_team_trainers

    names = ["Tennis?team=0", "Tennis?team=1"]
    brains = {n: BrainParameters(n, CONTINUOUS) for n in names}
    sp = validate_self_play({"save_steps": 1000, "team_change": 5000, "swap_steps": 1000}, lambda k: k)
    defaults = {k: p.default for k, p in PPO_HYPERPARAMETERS.items()} if learner is PPOTrainer else {}
    params = {**defaults, "graph_scope": "Tennis", "summary_path": None, "hidden_units": 16, "batch_size": 16,
              "buffer_size": 200, "max_steps": 1000, "self_play": sp, "deterministic": True}
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        seats = build_team_trainers(sess, brains, names, params, learner, True, seed=0)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    info = info_of(6)
    sent = {n: seats[n].take_action({n: info})[0] for n in names}
    np.testing.assert_allclose(sent["Tennis?team=1"], sent["Tennis?team=0"], rtol=1e-5, atol=1e-6)
    learn_from_step(seats["Tennis?team=0"], {"Tennis?team=0": info}, {"Tennis?team=0": info},
                    seats["Tennis?team=0"].take_action({"Tennis?team=0": info})[3])


@pytest.mark.parametrize("action_type", [0, 1])
def test_the_api2_ghost_of_a_deterministic_learner_plays_its_snapshots_mean_and_argmax(action_type):
    from tests.trainers.ghost.test_ghost import GHOST, LEARNER, ghost_parameters, learner_parameters, make_brain
    from trainers.ghost.trainer import GhostTrainer

    brains = {name: make_brain(name, action_type=action_type) for name in (LEARNER, GHOST)}
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        original = learner_parameters(deterministic=True, normalize=False)
        learner = PPOTrainer(sess, brains, LEARNER, original, True)
        ghost = GhostTrainer(sess, brains, GHOST, ghost_parameters(original), True)
        sess.run(tf.global_variables_initializer())
        rng = np.random.default_rng(0)
        for var in tf.trainable_variables(LEARNER):
            var.load(rng.normal(scale=0.7, size=var.shape.as_list()), sess)
    graph.finalize()
    states = rng.normal(size=(20, 8)).astype(np.float32)
    info = BrainInfo([], states, np.zeros((20, 0), np.float32), [0.0] * 20, list(range(20)), [False] * 20,
                     np.zeros((20, 2)))
    sent = ghost.take_action({GHOST: info})[0]  # the first action snapshots the learner
    np.testing.assert_allclose(sent, learner.take_action({LEARNER: info})[0], rtol=1e-5, atol=1e-6)
    m = learner.model
    feed = {m.state_in: states, m.batch_size: 20, m.sequence_length: 1}
    expected = sess.run(m.mu, feed) if action_type == 1 else sess.run(m.probs, feed).argmax(1)[:, None]
    np.testing.assert_allclose(sent, expected, rtol=1e-5, atol=1e-6)
