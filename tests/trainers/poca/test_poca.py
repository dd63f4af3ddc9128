"""MA-POCA (``trainers/poca``): group-trajectory returns, the attention critic, the trainer on group data,
its refusal of a brain without groups, its export, the Release 22 mapping, and learning PushCollab."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from runner.settings import run_config
from tests.conftest import shipped_config_pair
from tests.fake_env import learn_from_step
from tests.onnx_contract import assert_contract
from trainers.export.onnx_model import export_onnx
from trainers.poca.groups import (
    FinishedTrajectory,
    MemberStep,
    critic_rows,
    finish,
    finish_all,
    pad_rows,
    team_reward,
)
from trainers.poca.models import POCACritic, layer_norm
from trainers.poca.trainer import POCATrainer
from trainers.ppo.trainer import PPOTrainer
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters

ROOT = __file__.rsplit("/tests/", 1)[0]
STATE = 4


def member(reward=0.0, group_reward=0.0, state=0.0):
    return MemberStep({"actions": 0}, np.full(STATE, state, np.float32), np.array([1.0, 0.0, 0.0], np.float32),
                      reward, group_reward)


def zero_critic(inputs):
    n = len(inputs["own_state"])
    return np.zeros(n), np.zeros(n)


# ------------------------------------------------------------------ group trajectories
def test_a_member_that_left_early_is_credited_with_the_groups_later_reward():
    # Three members; "c" falls in the hazard after step 0; the group scores +1 at step 2.
    steps = [{"a": member(), "b": member(), "c": member()},
             {"a": member(), "b": member()},
             {"a": member(group_reward=1.0), "b": member(group_reward=1.0)}]
    gamma = 0.9
    rows = finish(steps, value_next=0.0, gamma=gamma, lambd=1.0, critic=zero_critic)
    first = {r["critic_own_state"].tobytes() + bytes([k]): r for k, r in enumerate(rows)}
    assert len(first) == 7  # one row per member-step: 3 + 2 + 2
    c_row = rows[2]  # step 0, member c (rows follow steps, then members in insertion order)
    assert c_row["discounted_returns"] == pytest.approx(gamma ** 2 * 1.0)
    assert c_row["discounted_returns"] == rows[0]["discounted_returns"]  # the same team return as its mates
    assert c_row["advantages"] == pytest.approx(gamma ** 2)  # baseline 0 here
    assert len(c_row["critic_mate_states"]) == 2 and len(rows[3]["critic_mate_states"]) == 1


def test_critic_rows_give_each_member_its_mates_in_step_order_padded_to_the_largest_step():
    def acting(state, action):
        return MemberStep({"actions": action}, np.full(STATE, state, np.float32),
                          np.eye(3, dtype=np.float32)[action], 0.0, 0.0)

    steps = [{"a": acting(1.0, 0), "b": acting(2.0, 1), "c": acting(3.0, 2)},
             {"b": acting(4.0, 2), "a": acting(5.0, 1)}]
    index, inputs = critic_rows(steps)
    assert index == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "a")]
    assert inputs["own_state"][:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert inputs["mate_states"][:, :, 0].tolist() == [[2.0, 3.0], [1.0, 3.0], [1.0, 2.0], [5.0, 0.0], [4.0, 0.0]]
    assert inputs["mate_present"].tolist() == [[1, 1], [1, 1], [1, 1], [1, 0], [1, 0]]
    assert inputs["mate_actions"].argmax(axis=2)[:, 0].tolist() == [1, 0, 0, 1, 2]
    assert not inputs["mate_actions"][3:, 1].any() and inputs["mate_states"].dtype == np.float32
    rows = finish(steps, value_next=0.0, gamma=0.9, lambd=0.95, critic=zero_critic)
    arrays = pad_rows(rows, ["actions", "advantages"])
    for key in ("mate_states", "mate_actions", "mate_present"):
        np.testing.assert_array_equal(arrays[f"critic_{key}"], inputs[key])
    assert [r["critic_mate_states"].shape for r in rows] == [(2, STATE)] * 3 + [(1, STATE)] * 2


def test_trajectories_valued_together_get_the_rows_each_gets_alone():
    """``finish_all`` pads the trajectories to the widest one's mates and calls the critic once; every row
    is what ``finish`` gives its trajectory alone (the critic here reads every input, padding included)."""
    def acting(state, action, reward=0.0):
        return MemberStep({"actions": action}, np.full(STATE, state, np.float32),
                          np.eye(3, dtype=np.float32)[action], reward, 0.0)

    calls = []

    def critic(inputs):
        calls.append(len(inputs["own_state"]))
        present = inputs["mate_present"]
        mates = (inputs["mate_states"].sum(axis=2) * np.arange(1, present.shape[1] + 1)).sum(axis=1)
        acted = (inputs["mate_actions"].argmax(axis=2) * present).sum(axis=1)
        padding = (inputs["mate_states"].sum(axis=2) * (1 - present)).sum(axis=1)  # must stay 0
        return inputs["own_state"].sum(axis=1) + 0.1 * mates + padding, 0.5 * inputs["own_state"][:, 0] + acted

    trios = [{"a": acting(1.0, 0), "b": acting(2.0, 1), "c": acting(3.0, 2, reward=1.0)},
             {"a": acting(4.0, 2), "c": acting(5.0, 1)}]
    pairs = [{"x": acting(6.0, 1), "y": acting(7.0, 0)}, {"x": acting(8.0, 2), "y": acting(9.0, 2, reward=-1.0)}]
    single = [{"s": acting(0.5, 1)}]
    trajectories = [FinishedTrajectory(pairs, [team_reward(s) for s in pairs], 0.0), FinishedTrajectory([], [], 0.0),
                    FinishedTrajectory(trios, [team_reward(s) for s in trios], 1.5),
                    FinishedTrajectory(single, [team_reward(s) for s in single], -0.5)]
    together = finish_all(trajectories, gamma=0.9, lambd=0.95, critic=critic)
    assert calls == [2 + 2 + 3 + 2 + 1]
    alone = [finish(t.steps, t.value_next, 0.9, 0.95, critic) for t in trajectories]
    assert [len(rows) for rows in together] == [len(rows) for rows in alone] == [4, 0, 5, 1]
    for got_rows, want_rows in zip(together, alone):
        for got, want in zip(got_rows, want_rows):
            assert got.keys() == want.keys()
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert together[0][0]["critic_mate_states"].shape == (1, STATE)  # unpadded: its own mates only


def test_team_reward_adds_every_members_reward_to_the_group_reward_once():
    step = {"a": member(reward=0.5, group_reward=-0.1), "b": member(reward=0.25, group_reward=-0.1)}
    assert team_reward(step) == pytest.approx(0.75 - 0.1)


def test_a_cut_trajectory_bootstraps_from_the_value_after_it():
    steps = [{"a": member(), "b": member()}]
    rows = finish(steps, value_next=2.0, gamma=0.5, lambd=0.95, critic=zero_critic)
    assert [r["discounted_returns"] for r in rows] == [pytest.approx(1.0)] * 2


# ------------------------------------------------------------------ the attention critic
@pytest.fixture(scope="module")
def critic_graph():
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
        c = POCACritic(STATE, 3, 16, 1)
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
        for var in c.variables:  # far from the small initial gains, so that every input matters
            var.load(np.random.default_rng(1).normal(0, 0.5, var.shape.as_list()).astype(np.float32), sess)
    graph.finalize()
    return sess, c


@pytest.fixture(scope="module")
def critic(critic_graph):
    sess, c = critic_graph

    def run(own, mates, actions, present):
        return sess.run([c.value, c.baseline], {c.own_state: own, c.mate_states: mates, c.mate_actions: actions,
                                                c.mate_present: present})
    return run


def numpy_critic(w, own, mates, actions, present, max_members):
    """The critic of ``trainers/poca/models.py``'s docstring, written out in numpy: ``w`` by variable name."""
    def dense(x, name, activation=None):
        y = x @ w[f"{name}/kernel"] + w[f"{name}/bias"]
        return activation(y) if activation else y

    def norm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w[f"{name}/gain"] + w[f"{name}/bias"]

    def relu(x):
        return np.maximum(x, 0.0)

    def pool(entities, mask):
        x = norm(entities, "attention/input_norm")
        n, e, h = x.shape
        q, k, v = (dense(x, f"attention/{p}").reshape(n, e, 4, h // 4) for p in ("query", "key", "value"))
        logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(h // 4) + (1 - mask)[:, None, None, :] * -1e6
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(n, e, h)
        out = norm(dense(attended, "attention/output") + entities, "attention/output_norm")
        return (out * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)

    def head(entities, mask):
        hidden = dense(pool(entities, mask), "body/dense_0", np.tanh)
        members = mask.sum(1, keepdims=True)
        count = 2 * members / np.maximum(max_members, members) - 1
        return dense(np.concatenate([hidden, count], 1), "value_head")[:, 0]

    me = dense(own, "obs_encoder", relu)[:, None]
    mask = np.concatenate([np.ones((len(own), 1)), present], 1)
    seen = dense(mates, "obs_encoder", relu)
    acting = dense(np.concatenate([mates, actions], -1), "obs_action_encoder", relu)
    return head(np.concatenate([me, seen], 1), mask), head(np.concatenate([me, acting], 1), mask)


def test_the_critic_computes_what_its_docstring_says(critic_graph):
    """V and the baselines against numpy, in a batch of groups of one to three with random weights: the
    member's own entity is shared by both passes, its mates seen by observation for V and with their
    actions for the baseline."""
    sess, c = critic_graph
    rng = np.random.default_rng(2)
    own = rng.normal(size=(6, STATE)).astype(np.float32)
    mates = rng.normal(size=(6, 2, STATE)).astype(np.float32)
    actions = np.eye(3, dtype=np.float32)[rng.integers(0, 3, (6, 2))]
    present = np.array([[1, 1], [1, 0], [0, 0], [1, 1], [0, 0], [1, 0]], np.float32)
    value, baseline = sess.run([c.value, c.baseline], {c.own_state: own, c.mate_states: mates,
                                                       c.mate_actions: actions, c.mate_present: present})
    weights = {v.name[len("poca_critic/"):-len(":0")]: x for v, x in zip(c.variables, sess.run(c.variables))}
    want_value, want_baseline = numpy_critic(weights, own, mates, actions, present, sess.run(c.max_members))
    np.testing.assert_allclose(value, want_value, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(baseline, want_baseline, rtol=1e-4, atol=1e-4)
    alone = present.sum(1) == 0  # a member without mates: both passes see it alone
    assert np.abs(value - baseline)[~alone].min() > 1e-3 and np.array_equal(value[alone], baseline[alone])


def test_the_layer_norm_and_its_gradients_are_the_formulas():
    """Each row of the last axis, by its own mean and biased variance, then the gain and bias: values
    and the gradients by the input, the gain and the bias agree with the textbook formula's to float32
    rounding, on rows of very different scales and a batch of none."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, None, 8])
        fused = layer_norm(x, "norm")
        with tf.variable_scope("norm", reuse=True):
            gain, bias = tf.get_variable("gain"), tf.get_variable("bias")
        mean, variance = tf.nn.moments(x, axes=[-1], keep_dims=True)
        formula = (x - mean) / tf.sqrt(variance + 1e-5) * gain + bias
        weights = tf.constant(np.random.default_rng(0).normal(size=8), tf.float32)
        grads = [tf.gradients(tf.reduce_sum(tf.sin(y) * weights), [x, gain, bias]) for y in (fused, formula)]
        sess = tf.Session(graph=graph)
        sess.run([gain.assign(np.linspace(0.5, 2.0, 8)), bias.assign(np.linspace(-1.0, 1.0, 8))])
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(3, 2, 8)) * np.array([1e-2, 1.0, 30.0])[:, None, None] + rng.normal(size=(3, 2, 1)) * 5
    got, want = sess.run([[fused] + grads[0], [formula] + grads[1]], {x: rows.astype(np.float32)})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-4)
    z = (got[0] - np.linspace(-1.0, 1.0, 8)) / np.linspace(0.5, 2.0, 8)
    np.testing.assert_allclose(z.mean(-1), 0.0, atol=1e-4)  # each row, not each column
    spread = rows.var(-1)
    np.testing.assert_allclose(z.var(-1), spread / (spread + 1e-5), rtol=1e-3)  # epsilon 1e-5 in the root
    assert sess.run(fused, {x: np.zeros((0, 2, 8), np.float32)}).shape == (0, 2, 8)


def test_absent_members_do_not_change_the_value_and_present_ones_do(critic):
    rng = np.random.default_rng(0)
    own = rng.normal(size=(1, STATE)).astype(np.float32)
    mate = rng.normal(size=(1, 1, STATE)).astype(np.float32)
    action = np.array([[[0.0, 1.0, 0.0]]], np.float32)
    one = critic(own, mate, action, np.ones((1, 1), np.float32))
    # The same group padded to three mate slots, the padding filled with garbage and masked out.
    garbage = rng.normal(size=(1, 2, STATE)).astype(np.float32) * 100
    padded = critic(own, np.concatenate([mate, garbage], 1), np.concatenate([action, np.ones((1, 2, 3))], 1),
                    np.array([[1.0, 0.0, 0.0]], np.float32))
    np.testing.assert_allclose(padded, one, rtol=1e-5, atol=1e-6)
    # The same slots present: a different group, a different value.
    present = critic(own, np.concatenate([mate, garbage], 1), np.concatenate([action, np.ones((1, 2, 3))], 1),
                     np.ones((1, 3), np.float32))
    assert abs(present[0][0] - one[0][0]) > 1e-3
    alone = critic(own, np.zeros((1, 1, STATE), np.float32), np.zeros((1, 1, 3), np.float32), np.zeros((1, 1)))
    assert abs(alone[0][0] - one[0][0]) > 1e-3


def test_mates_are_a_set_and_only_the_baseline_sees_their_actions(critic):
    rng = np.random.default_rng(1)
    own = rng.normal(size=(1, STATE)).astype(np.float32)
    mates = rng.normal(size=(1, 2, STATE)).astype(np.float32)
    actions = np.array([[[1, 0, 0], [0, 0, 1]]], np.float32)
    present = np.ones((1, 2), np.float32)
    v, b = critic(own, mates, actions, present)
    v_swapped, b_swapped = critic(own, mates[:, ::-1], actions[:, ::-1], present)
    np.testing.assert_allclose([v_swapped, b_swapped], [v, b], rtol=1e-5, atol=1e-6)
    v_acted, b_acted = critic(own, mates, actions[:, :, ::-1], present)
    np.testing.assert_allclose(v_acted, v, rtol=1e-6)
    assert abs(b_acted[0] - b[0]) > 1e-3


# ------------------------------------------------------------------ the trainer
TEAM_SPACES = {"stateSize": STATE, "actionSize": 3, "memorySize": 0, "cameraResolutions": [],
               "actionDescriptions": ["", "", ""], "actionSpaceType": 0, "stateSpaceType": 1}
BRAIN = BrainParameters("Team", TEAM_SPACES)


def make_trainer(**overrides):
    params = {"graph_scope": "", "summary_path": "", "batch_size": 8, "buffer_size": 12, "time_horizon": 50,
              "hidden_units": 16, "max_steps": 1000, "num_epoch": 2, **overrides}
    sess = tf.Session(graph=tf.Graph())
    trainer = POCATrainer(sess, {"Team": BRAIN}, "Team", params, training=True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    return trainer


def info(agents, groups, rewards=None, group_rewards=None, done=None, seed=0):
    n = len(agents)
    states = np.random.default_rng(seed).normal(size=(n, STATE)).astype(np.float32)
    return {"Team": BrainInfo([], states, None, rewards or [0.0] * n, list(agents), done or [False] * n,
                              group_id=list(groups), group_rewards=group_rewards or [0.0] * n)}


@pytest.fixture(scope="module")
def trainer():
    """One trainer for the tests below (building a graph is their main cost); each leaves it empty."""
    return make_trainer()


def test_the_trainer_keeps_a_leavers_steps_until_the_group_ends_and_then_learns(trainer):
    # Group 7: agents 1, 2, 3. Agent 3 is done after the first step; 1 and 2 score +1 two steps later.
    script = [
        info([1, 2, 3], [7, 7, 7], seed=0),
        info([1, 2, 3], [7, 7, 7], done=[False, False, True], seed=1),
        info([1, 2], [7, 7], seed=2),
        info([1, 2], [7, 7], group_rewards=[1.0, 1.0], done=[True, True], seed=3),
    ]
    for before, after in zip(script, script[1:]):
        _, _, _, outputs = trainer.take_action(before)
        learn_from_step(trainer, before, after, outputs)
        assert not trainer.rows or after is script[-1]  # nothing moves before the group's episode ends
    assert len(trainer.rows) == 3 + 2 + 2
    leaver = trainer.rows[2]
    gamma = trainer.settings.gamma
    # lambda-returns with V from the critic: the +1 reaches the leaver's step, discounted twice.
    assert leaver["discounted_returns"] == trainer.rows[0]["discounted_returns"]
    assert leaver["discounted_returns"] > 0.5 * gamma ** 2
    trainer.rows = trainer.rows * 2  # enough for one update of buffer_size 12
    assert trainer.is_ready_update()
    trainer.update_model()
    assert not trainer.rows and trainer.stats["policy_loss"]


def test_the_update_and_the_critics_values_run_their_branches_side_by_side(monkeypatch):
    """The critic's two passes and the policy's networks are independent branches of large products:
    the minibatch step and the critic's values are compiled for the session's inter-op pool
    (``compiled_call(..., inline=False)``), while PPO's own step keeps running in the calling thread."""
    import trainers.poca.trainer as poca_module
    import trainers.ppo.optimizer as optimizer_module

    compiled = []

    def recording(real):
        def call(sess, fetches, feeds=(), inline=True):
            compiled.append((tuple(f.name for f in fetches), inline))
            return real(sess, fetches, feeds, inline)
        return call

    for module in (poca_module, optimizer_module):
        monkeypatch.setattr(module, "compiled_call", recording(module.compiled_call))
    trainer = make_trainer()
    script = [info([1, 2], [7, 7], seed=0), info([1, 2], [7, 7], group_rewards=[1.0, 1.0], done=[True, True], seed=1)]
    for _ in range(6):
        _, _, _, outputs = trainer.take_action(script[0])
        learn_from_step(trainer, script[0], script[1], outputs)
    assert trainer.is_ready_update()
    trainer.update_model()
    critic = trainer.critic
    flags = {fetches: inline for fetches, inline in compiled}
    assert flags[(critic.value.name, critic.baseline.name)] is False
    update_op = trainer.update_op().name
    assert [inline for fetches, inline in compiled if update_op in fetches] == [False]
    assert PPOTrainer.update_inline is True


def test_a_long_group_trajectory_is_cut_at_time_horizon_and_bootstrapped():
    trainer = make_trainer(time_horizon=2, buffer_size=100)
    script = [info([1, 2], [3, 3], seed=k) for k in range(4)]
    for before, after in zip(script, script[1:]):
        _, _, _, outputs = trainer.take_action(before)
        learn_from_step(trainer, before, after, outputs)
    assert len(trainer.rows) == 4 and len(trainer.groups[3]) == 1  # two steps moved, the third kept
    assert trainer.groups[3].members == {1, 2} and not trainer.groups[3].over()
    # No reward at all: the returns are the critic's bootstrap, discounted, not zero.
    assert all(r["discounted_returns"] != 0.0 for r in trainer.rows)


def play_game(trainer, agents, group, seed):
    """One game of two steps for ``agents`` of ``group``, ended by a group reward."""
    n = len(agents)
    script = [info(agents, [group] * n, seed=seed), info(agents, [group] * n, seed=seed + 1),
              info(agents, [group] * n, group_rewards=[1.0] * n, done=[True] * n, seed=seed + 2)]
    for before, after in zip(script, script[1:]):
        _, _, _, outputs = trainer.take_action(before)
        learn_from_step(trainer, before, after, outputs)


def test_finished_games_are_valued_together_once_enough_wait_or_the_rows_are_read(monkeypatch):
    from trainers.poca import trainer as poca_trainer

    trainer = make_trainer(buffer_size=100)
    sizes = []
    critic = trainer._critic
    monkeypatch.setattr(trainer, "_critic", lambda inputs: sizes.append(len(inputs["own_state"])) or critic(inputs))
    for k in range(3):  # three games of two members, two steps: 4 member-steps each
        play_game(trainer, [10 * k + 1, 10 * k + 2], k + 1, seed=10 * k)
    assert sizes == [] and trainer.update_buffer_steps() == 12  # waiting, yet counted towards the buffer
    assert len(trainer.rows) == 12 and sizes == [12]  # read: valued in one call
    monkeypatch.setattr(poca_trainer, "EVALUATE_ROWS", 8)
    for k in range(3, 5):
        play_game(trainer, [10 * k + 1, 10 * k + 2], k + 1, seed=10 * k)
    assert sizes == [12, 8]  # the second game brought 8 member-steps waiting: valued without a read
    stats = trainer._signal_stats["Policy/Extrinsic Value Estimate"]
    assert len(stats) == 5 and stats[-1] == pytest.approx(np.mean([r["critic_value"] for r in trainer.rows[-4:]]))


def test_games_waiting_when_a_larger_group_appears_are_valued_under_the_count_they_finished_under():
    """The critic normalises the members' count by the largest group seen, a variable that grows: the
    games that wait are valued before it grows, as if they had been valued when they finished."""
    first, second = make_trainer(buffer_size=100), make_trainer(buffer_size=100)
    weights = first.sess.run(first.critic.variables)
    with second.sess.graph.as_default():
        for variable, value in zip(second.critic.variables, weights):
            variable.load(value, second.sess)
    play_game(first, [1, 2], 1, seed=0)
    valued_then = [r["critic_value"] for r in first.rows]  # read: valued now, with at most two members seen
    play_game(second, [1, 2], 1, seed=0)
    play_game(second, [3, 4, 5], 2, seed=5)  # three members: the count's scale grows
    assert second.sess.run(second.critic.max_members) == 3.0
    assert [r["critic_value"] for r in second.rows[:4]] == valued_then
    index, inputs = critic_rows([{a: MemberStep({}, r["critic_own_state"], np.zeros(3, np.float32), 0.0, 0.0)
                                  for a, r in zip("ab", pair)} for pair in (first.rows[:2], first.rows[2:4])])
    assert not np.allclose(second._critic(inputs)[0], valued_then)  # valued later, they would differ


CONTINUOUS_TEAM = BrainParameters("Team", {"stateSize": STATE, "actionSize": 2, "memorySize": 0,
                                          "cameraResolutions": [], "actionDescriptions": ["", ""],
                                          "actionSpaceType": 1, "stateSpaceType": 1})


def test_a_resumed_trainer_takes_the_update_the_uninterrupted_run_takes(tmp_path):
    """Saved after two updates with half a buffer of member-steps collected (and the noise generator
    part-way), a trainer restored in a fresh graph collects the same steps and takes the same update."""
    def make():
        sess = tf.Session(graph=tf.Graph())
        made = POCATrainer(sess, {"Team": CONTINUOUS_TEAM}, "Team", {
            "graph_scope": "", "summary_path": "", "batch_size": 6, "buffer_size": 12, "time_horizon": 50,
            "hidden_units": 16, "max_steps": 1000, "num_epoch": 2}, training=True, seed=4)
        with sess.graph.as_default():
            sess.run(tf.global_variables_initializer())
            made.saver = tf.train.Saver()
        sess.graph.finalize()
        return made

    def episode(trainer, first_seed):  # two members, three steps, a group reward at the end
        script = [info([1, 2], [5, 5], seed=first_seed + k) for k in range(3)]
        script.append(info([1, 2], [5, 5], group_rewards=[1.0, 1.0], done=[True, True], seed=first_seed + 3))
        for before, after in zip(script, script[1:]):
            _, _, _, outputs = trainer.take_action(before)
            learn_from_step(trainer, before, after, outputs)
            if trainer.is_ready_update():
                trainer.update_model()
                return [trainer.stats[key][-1] for key in ("policy_loss", "value_loss")]
        return None

    first = make()
    assert [episode(first, 10 * k) is not None for k in range(5)] == [False, True, False, True, False]
    assert first.rows  # half a buffer waits for the next update
    with first.sess.graph.as_default():
        prefix = first.saver.save(first.sess, str(tmp_path / "model.cptk"))
    state = json.loads(json.dumps(first.get_state()))
    resumed = make()
    with resumed.sess.graph.as_default():
        resumed.saver.restore(resumed.sess, prefix)
    resumed.set_state(state)
    expected = episode(first, 50)
    assert expected is not None and episode(resumed, 50) == expected


def test_a_threaded_self_play_seat_hands_the_learners_update_to_the_background_thread():
    from trainers.ghost.team_trainer import build_team_trainers
    from trainers.settings.self_play import validate_self_play

    names = ["Team?team=0", "Team?team=1"]
    self_play = validate_self_play({"save_steps": 1000, "team_change": 5000, "swap_steps": 1000}, lambda k: k)
    params = {"graph_scope": "Team", "summary_path": None, "batch_size": 8, "buffer_size": 12, "time_horizon": 50,
              "hidden_units": 16, "max_steps": 1000, "num_epoch": 2, "threaded": True, "self_play": self_play}
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        brains = {n: BrainParameters(n, TEAM_SPACES) for n in names}
        seats = build_team_trainers(sess, brains, names, params, POCATrainer, True, seed=0)
        sess.run(tf.global_variables_initializer())
    seat = seats[names[0]]
    learner = seat.group.learner
    script = [info([1, 2], [7, 7], seed=0), info([1, 2], [7, 7], group_rewards=[1.0, 1.0], done=[True, True])]
    for _ in range(3):  # three games of one step: 6 member-steps, 12 with the copies below
        _, _, _, outputs = learner.take_action(script[0])
        learn_from_step(learner, script[0], script[1], outputs)
    learner.rows = learner.rows * 2
    assert seat.is_ready_update() and seat.settings.threaded  # what the controller reads to update beside acting
    weights = sess.run(learner.critic.variables)
    work = seat.prepare_update()
    assert callable(work) and not learner.rows  # the batch is taken now; the next rows collect meanwhile
    assert all(np.array_equal(a, b) for a, b in zip(weights, sess.run(learner.critic.variables)))
    work()
    assert learner.stats["policy_loss"]
    assert not all(np.array_equal(a, b) for a, b in zip(weights, sess.run(learner.critic.variables)))


def test_a_steps_experience_never_waits_for_the_next_send():
    """Finished games wait in the trainer for the critic, so the collector's steps bound nothing."""
    trainer = make_trainer(normalize=False)
    assert not trainer.acts_apart_from_experience and not trainer.experience_can_wait(0, 1, False)


def test_a_scene_without_groups_is_refused_naming_the_brain(trainer):
    before, after = info([1, 2], [0, 0]), info([1, 2], [0, 0], seed=1)
    _, _, _, outputs = trainer.take_action(before)
    with pytest.raises(UnityTrainerException, match=r"Brain 'Team'.*trainer: poca.*group id 0.*trainer: ppo"):
        learn_from_step(trainer, before, after, outputs)


def test_the_exported_policy_is_an_ordinary_policy_that_passes_the_unity_contract(trainer, tmp_path):
    (path,) = export_onnx(trainer.sess, [trainer], str(tmp_path))
    model = assert_contract(path, BRAIN)
    names = {i.name for i in model.graph.input}
    assert not any(name.startswith("critic") for name in names)  # the critic stays behind


def test_a_release_22_poca_block_maps_onto_the_registered_trainer():
    raw = {"behaviors": {"Team": {"trainer_type": "poca", "hyperparameters": {"batch_size": 64, "buffer_size": 640},
                                  "network_settings": {"hidden_units": 32}}}}
    config = run_config.resolve("run.yaml", raw, tuple(load_registry().names()))
    settings = config.behaviors["Team"].brain
    block = settings.parameters
    assert block["trainer"] == "poca" and block["batch_size"] == 64 and block["hidden_units"] == 32
    assert settings.trainer_class is POCATrainer


# ------------------------------------------------------------------ learning
@pytest.mark.slow
def test_poca_learns_pushcollab_over_grpc():
    """From about -0.8 (random play) to pushing blocks together in a short run (0.79 at 3.6e4 steps, seed 0)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import poca_vs_ppo

    result = poca_vs_ppo.run("poca", seed=0, max_steps=3.6e4, timeout=600)
    assert result["episodes"] >= 100, result["output"]
    assert result["last100"] >= 0.3, (result["last100"], result["group_rewards"][::50])


def test_the_two_shipped_pushcollab_configs_train_alike():
    a, b = shipped_config_pair("config/poca/PushCollab.yaml", "config/poca/PushCollab_release22.yaml",
                               "PushBlockCollab?team=0")
    assert a == b
