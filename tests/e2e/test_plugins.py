"""Trainer plugins: discovery through entry points, the on/off-policy bases, and the example package.

The example package (``examples/trainer-plugin``) is made discoverable the way ``pip install``
would: a ``*.dist-info`` directory with an ``entry_points.txt`` on ``sys.path`` (real
``importlib.metadata`` discovery, nothing mocked), next to the package's own directory.
"""
import os
import re
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from runner.settings.trainer_config import TrainerConfigError, load_trainer_config
from tests.conftest import load_config, run_academy
from tests.fake_env import FakeEnv, Loop
from trainers.buffer import ReplayBuffer
from trainers.export.frozen_graph import contract_inputs, export_graph, load_graph_def
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from trainers.trainer.on_policy import OnPolicyTrainer
from trainers.trainer.registry import ENTRY_POINT_GROUP, load_registry
from trainers.trainer.rl_trainer import linear_schedule
from unityagents.brain import BrainParameters

ROOT = __file__.rsplit("/tests/", 1)[0]
EXAMPLE = os.path.join(ROOT, "examples", "trainer-plugin")
PACKAGE = os.path.join(EXAMPLE, "unityagents_trainer_plugin")
PLUGIN_ENTRY_POINTS = {
    "a2c": "unityagents_trainer_plugin.a2c:A2CTrainer",
    "dqn": "unityagents_trainer_plugin.dqn:DQNTrainer",
}


def write_dist_info(site, name, entry_points, group=ENTRY_POINT_GROUP):
    """What ``pip install`` leaves in site-packages for a package's entry points (in ``group``)."""
    dist = site / f"{name}-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """The example plugin, installed into a temporary site directory on ``sys.path``."""
    site = tmp_path / "site"
    write_dist_info(site, "unityagents_trainer_plugin", PLUGIN_ENTRY_POINTS)
    monkeypatch.syspath_prepend(EXAMPLE)
    monkeypatch.syspath_prepend(str(site))
    return site


# ---------------------------------------------------------------- discovery
def test_plugin_is_discovered_through_its_entry_points(plugin_site):
    registry = load_registry()
    from unityagents_trainer_plugin.a2c import A2CTrainer
    from unityagents_trainer_plugin.dqn import DQNTrainer

    assert registry.get("a2c") is A2CTrainer and registry.get("dqn") is DQNTrainer
    assert {"ppo", "ghost", "imitation"} <= set(registry.names())
    assert not registry.broken


def test_broken_plugin_is_reported_by_name_and_the_others_load(tmp_path, monkeypatch, caplog):
    site = tmp_path / "site"
    site.mkdir()
    (site / "good_plugin_for_test.py").write_text(textwrap.dedent("""
        from trainers.trainer.on_policy import OnPolicyTrainer

        class GoodTrainer(OnPolicyTrainer):
            trainer_type = "good"
    """))
    write_dist_info(site, "test_plugins", {"good": "good_plugin_for_test:GoodTrainer",
                                           "broken": "no_such_module_for_test:Trainer"})
    monkeypatch.syspath_prepend(str(site))
    registry = load_registry()
    assert registry.get("good").trainer_type == "good"
    assert "ppo" in registry.names()
    assert "No module named 'no_such_module_for_test'" in registry.broken["broken"]
    assert "trainer plugin 'broken'" in caplog.text
    with pytest.raises(UnityTrainerException, match="'broken' is installed but failed to load: ModuleNotFoundError"):
        registry.get("broken")


def test_unknown_trainer_name_lists_the_known_ones(tmp_path):
    # The group holds no entry point, as in an environment where the plugin is not installed:
    # only the built-ins are known.
    registry = load_registry(group=f"{ENTRY_POINT_GROUP}.none-installed")
    with pytest.raises(TrainerConfigError) as error:
        load_config(tmp_path, """
            Ball3DBrain:
                trainer: a2c
        """, registry)
    message = str(error.value)
    assert "brain 'Ball3DBrain', key 'trainer': Unknown trainer type 'a2c'" in message
    assert "Known trainer types: ghost, imitation, poca, ppo, sac." in message
    assert f"entry-point group '{ENTRY_POINT_GROUP}'" in message


def test_shipped_plugin_yaml_files_validate(plugin_site):
    registry = load_registry()
    a2c = load_trainer_config(os.path.join(PACKAGE, "a2c", "learn_3DBall.yaml"), registry)
    dqn = load_trainer_config(os.path.join(PACKAGE, "dqn", "learn_Basic.yaml"), registry)
    assert a2c.settings_for("Ball3DBrain").trainer_type == "a2c"
    assert dqn.settings_for("BasicBrain").parameters["learning_starts"] == 500


@pytest.mark.parametrize("trainer, key, value, expected", [
    ("dqn", "learning_rat", 0.1, r"key 'learning_rat': unknown hyperparameter for the dqn trainer\. "
                                 r"Did you mean 'learning_rate'\? Its keys are: .*tau"),
    ("ppo", "learning_rat", 0.1, r"key 'learning_rat': unknown hyperparameter for the ppo trainer\. "
                                 r"Did you mean 'learning_rate'\? Its keys are: "),
    ("dqn", "tau", "fast", r"key 'tau': expected a number, got 'fast' \(str\)"),
    ("a2c", "optimizer", "sgd", r"key 'optimizer': must be 'rmsprop' or 'adam', got 'sgd'"),
    ("dqn", "learning_starts", 2.0e5, r"key 'learning_starts': 200000 is larger than buffer_size 50000"),
])
def test_plugin_hyperparameters_are_validated_like_builtins(plugin_site, tmp_path, trainer, key, value, expected):
    with pytest.raises(TrainerConfigError, match=rf"config\.yaml: brain '?SomeBrain'?, {expected}"):
        load_config(tmp_path, f"""
            SomeBrain:
                trainer: {trainer}
                {key}: {value!r}
        """)


# ---------------------------------------------------------------- the replay buffer
def test_replay_buffer_capacity_and_wrap_around():
    replay = ReplayBuffer(5)
    replay.add({"x": np.arange(3), "y": np.arange(3)[:, None] * [1.0, -1.0]})
    assert len(replay) == 3 and replay.next_index == 3
    replay.add({"x": np.arange(3, 7), "y": np.arange(3, 7)[:, None] * [1.0, -1.0]})
    assert len(replay) == 5 and replay.next_index == 2  # 5 and 6 overwrote 0 and 1
    np.testing.assert_array_equal(replay.fields["x"], [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(replay.fields["y"][:, 1], -replay.fields["x"])  # fields stay aligned
    replay.add({"x": np.arange(100, 112), "y": np.zeros((12, 2))})  # more than the capacity at once
    assert len(replay) == 5 and sorted(replay.fields["x"]) == [107, 108, 109, 110, 111]
    assert replay.fields["x"][(replay.next_index - 1) % 5] == 111  # the newest is just before next_index


def test_replay_buffer_sampling_shapes_and_distribution():
    rng = np.random.default_rng(0)
    replay = ReplayBuffer(10)
    replay.add({"states": rng.normal(size=(4, 3)).astype(np.float32), "actions": np.arange(1, 5)})
    batch = replay.sample(20000, rng)
    assert batch["states"].shape == (20000, 3) and batch["states"].dtype == np.float32
    assert batch["actions"].shape == (20000,)
    counts = np.bincount(batch["actions"], minlength=5)
    assert counts[0] == 0  # never one of the 6 rows that hold nothing yet (their action is 0)
    np.testing.assert_allclose(counts[1:] / 20000, 0.25, atol=0.015)  # uniform over the 4 held
    for row, action in zip(batch["states"][:50], batch["actions"][:50]):  # fields of one transition stay together
        np.testing.assert_array_equal(row, replay.fields["states"][action - 1])


def test_replay_buffer_refuses_inconsistent_fields():
    replay = ReplayBuffer(4)
    with pytest.raises(UnityTrainerException, match="same number of transitions"):
        replay.add({"x": np.zeros(2), "y": np.zeros(3)})
    replay.add({"x": np.zeros(2)})
    with pytest.raises(UnityTrainerException, match=r"holds the fields \['x'\] but was given \['z'\]"):
        replay.add({"z": np.zeros(2)})
    with pytest.raises(UnityTrainerException, match="empty replay buffer"):
        ReplayBuffer(3).sample(1, np.random.default_rng())


def test_linear_schedule():
    assert linear_schedule(1.0, 0.1, 0, 100) == 1.0
    assert linear_schedule(1.0, 0.1, 50, 100) == pytest.approx(0.55)
    assert linear_schedule(1.0, 0.1, 500, 100) == pytest.approx(0.1)


# ---------------------------------------------------------------- brains and trainers
BASIC_LIKE = BrainParameters("FakeBrain", {"stateSize": 6, "actionSize": 3, "actionSpaceType": 0, "stateSpaceType": 0})
BALL_LIKE = BrainParameters("FakeBrain", {"stateSize": 4, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1})


def make_trainer(cls, brain, **params):
    sess = tf.Session(graph=tf.Graph())
    trainer = cls(sess, {brain.brain_name: brain}, brain.brain_name,
                  {"graph_scope": "", "summary_path": "", "max_steps": 1000, **params}, training=True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()  # as the controller does: an op created from now on fails
    return trainer


# ---------------------------------------------------------------- DQN
@pytest.fixture
def dqn_module(plugin_site):
    from unityagents_trainer_plugin import dqn

    return dqn


def variables(trainer, which):
    return trainer.sess.run(getattr(trainer.model, f"{which}_variables"))


def test_dqn_target_update_hard(dqn_module):
    trainer = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, tau=1.0, learning_starts=0, batch_size=4,
                           train_every=1, target_update_interval=3, hidden_units=8)
    online, target = variables(trainer, "online"), variables(trainer, "target")
    assert any(not np.allclose(o, t) for o, t in zip(online, target))  # independent initialisations
    loop = Loop(FakeEnv(BASIC_LIKE, n_agents=1, episode_length=3))
    loop.run(trainer, 4)  # warm at the 4th transition: copy, then gradient step 1
    assert trainer.gradient_step == 1
    online, target = variables(trainer, "online"), variables(trainer, "target")
    assert any(not np.allclose(o, t) for o, t in zip(online, target))  # online moved, target is the old copy
    loop.run(trainer, 2)  # gradient steps 2 and 3: copy at 3
    assert trainer.gradient_step == 3
    for o, t in zip(variables(trainer, "online"), variables(trainer, "target")):
        np.testing.assert_array_equal(o, t)


def test_dqn_target_update_soft(dqn_module):
    trainer = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, tau=0.25, hidden_units=8)
    online, target = variables(trainer, "online"), variables(trainer, "target")
    trainer.update_targets()
    for o, t, new in zip(online, target, variables(trainer, "target")):
        np.testing.assert_allclose(new, 0.25 * o + 0.75 * t, rtol=1e-6, atol=1e-7)
    for o, new in zip(online, variables(trainer, "online")):
        np.testing.assert_array_equal(o, new)  # the online network is never touched
    trainer.update_targets(hard=True)
    for o, t in zip(variables(trainer, "online"), variables(trainer, "target")):
        np.testing.assert_array_equal(o, t)


def test_dqn_blends_the_target_after_every_gradient_step_by_default(dqn_module):
    """The seed's optimizer: a copy before the first step, then tau * online + (1 - tau) * target after each."""
    trainer = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, batch_size=4, hidden_units=8)
    assert (trainer.settings.tau, trainer.settings.target_update_interval) == (0.005, 1)
    loop = Loop(FakeEnv(BASIC_LIKE, n_agents=1, episode_length=3))
    loop.run(trainer, 4, update=False)  # the 4th transition fills a minibatch: one gradient step is due
    assert trainer.is_ready_update()
    initial = variables(trainer, "online")
    trainer.update_model()
    assert trainer.gradient_step == 1
    for before, after, target in zip(initial, variables(trainer, "online"), variables(trainer, "target")):
        np.testing.assert_allclose(target, 0.005 * after + 0.995 * before, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("warm_up", [{"learning_starts": 10}, {"buffer_init_steps": 10}])
def test_dqn_learns_after_its_warm_up_under_either_name(dqn_module, warm_up):
    trainer = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, batch_size=4, hidden_units=8, **warm_up)
    loop = Loop(FakeEnv(BASIC_LIKE, n_agents=1, episode_length=3))
    loop.run(trainer, 9, update=False)
    assert len(trainer.replay) == 9 and not trainer.is_ready_update()
    loop.run(trainer, 1, update=False)
    assert trainer.is_ready_update()


def test_dqn_epsilon_decays_over_the_seeds_20000_steps_unless_a_fraction_is_given(dqn_module):
    trainer = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, hidden_units=8)
    assert trainer.exploration_epsilon() == pytest.approx(0.1)
    trainer.step = 10000
    assert trainer.exploration_epsilon() == pytest.approx(0.075)  # halfway from 0.1 to 0.05
    trainer.step = 30000
    assert trainer.exploration_epsilon() == pytest.approx(0.05)
    fraction = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, hidden_units=8, exploration_fraction=0.5)
    fraction.step = 250  # a quarter of max_steps 1000: halfway through the decay
    assert fraction.exploration_epsilon() == pytest.approx(0.075)


def test_dqn_normalizes_continuous_states_with_one_set_of_statistics(dqn_module):
    brain = BrainParameters("FakeBrain", {"stateSize": 4, "actionSize": 3, "actionSpaceType": 0,
                                          "stateSpaceType": 1})
    trainer = make_trainer(dqn_module.DQNTrainer, brain, normalize=True, hidden_units=8)
    model = trainer.model
    Loop(FakeEnv(brain, n_agents=2, episode_length=3)).run(trainer, 3, update=False)
    count = [v for v in trainer.sess.graph.get_collection("variables") if "normalization_steps" in v.name]
    assert trainer.sess.run(count[0]) == pytest.approx(6, abs=1e-3)  # 2 agents x 3 steps acted on
    states = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    trainer.update_targets(hard=True)  # the target network reads s' normalised by the statistics of s
    online = trainer.sess.run(model.q_values, {model.state: states})
    np.testing.assert_allclose(trainer.sess.run(model.next_q_target, {model.next_state: states}), online,
                               rtol=1e-5, atol=1e-6)


def test_dqn_replay_ratio_does_not_depend_on_the_number_of_agents(dqn_module):
    trainer = make_trainer(dqn_module.DQNTrainer, BASIC_LIKE, learning_starts=8, batch_size=8, train_every=4,
                           gradient_steps=2, hidden_units=8)
    loop = Loop(FakeEnv(BASIC_LIKE, n_agents=4, episode_length=3))
    loop.run(trainer, 2)  # warm at step 2; only its 4 transitions count: one round of 2
    assert len(trainer.replay) == 8 and trainer.gradient_step == 2
    loop.run(trainer, 3)  # 12 more transitions: 3 rounds of 2
    assert len(trainer.replay) == 20 and trainer.gradient_step == 8
    assert trainer.stats["q_loss"] and trainer.stats["epsilon"]
    lengths = np.array(trainer.stats["episode_length"])
    np.testing.assert_allclose(trainer.stats["cumulative_reward"], 0.1 * (lengths - 1) + 1.0)


def test_dqn_refuses_continuous_actions(dqn_module):
    brains = {"FakeBrain": BALL_LIKE}
    with pytest.raises(TrainerConfigError, match="the dqn trainer needs discrete actions, but the brain's action "
                                                 "space is continuous .*\\(trainer: ppo or trainer: a2c\\)"):
        dqn_module.DQNTrainer.check_environment("FakeBrain", {}, brains, ["FakeBrain"])
    with pytest.raises(UnityTrainerException, match="DQNTrainer needs a brain with discrete actions"):
        make_trainer(dqn_module.DQNTrainer, BALL_LIKE)


# ---------------------------------------------------------------- A2C
@pytest.fixture
def a2c_module(plugin_site):
    from unityagents_trainer_plugin import a2c
    from unityagents_trainer_plugin.a2c import a2c_model

    return a2c, a2c_model


def zeroed_model(a2c_model, brain, **overrides):
    """An A2C graph with every weight 0: mu = 0, sigma = 1, V = 0, uniform categorical."""
    kwargs = dict(h_size=4, num_layers=1, normalize=False, learning_rate=0.1, optimizer="adam", beta=0.01,
                  vf_coef=0.5, max_grad_norm=None)
    kwargs.update(overrides)
    model = a2c_model.A2CModel(brain, **kwargs)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run([tf.assign(v, tf.zeros_like(v)) for v in model.variables])
    return model, sess


def test_a2c_loss_by_hand_continuous(a2c_module):
    _, a2c_model = a2c_module
    with tf.Graph().as_default():
        model, sess = zeroed_model(a2c_model, BALL_LIKE)
        actions = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, -1.0]], np.float32)
        advantages = np.array([1.0, -2.0, 0.5], np.float32)
        returns = np.array([1.0, 2.0, -1.0], np.float32)
        feed = {model.inputs.state: np.ones((3, 4)), model.taken_actions: actions,
                model.advantages: advantages, model.returns: returns}
        policy_loss, value_loss, entropy, loss = sess.run(
            [model.policy_loss, model.value_loss, model.mean_entropy, model.loss], feed)
        assert sess.run(model.loss, {**feed, model.beta: 0.0}) == pytest.approx(policy_loss + 0.5 * value_loss,
                                                                                 rel=1e-5)
    # log N(a; 0, 1) summed over 2 dims: -0.5 * |a|^2 - log(2 pi)
    log_2pi = np.log(2 * np.pi)
    log_probs = np.array([-0.5 - log_2pi, -2.0 - log_2pi, -1.0 - log_2pi])
    assert policy_loss == pytest.approx(-np.mean(log_probs * advantages), rel=1e-5)
    assert value_loss == pytest.approx((1 + 4 + 1) / 3, rel=1e-5)  # V = 0
    assert entropy == pytest.approx(0.5 * (log_2pi + 1.0), rel=1e-5)  # the mean over the 2 dimensions
    assert loss == pytest.approx(policy_loss + 0.5 * value_loss - 0.01 * entropy, rel=1e-5)


def test_a2c_loss_by_hand_discrete(a2c_module):
    _, a2c_model = a2c_module
    with tf.Graph().as_default():
        model, sess = zeroed_model(a2c_model, BASIC_LIKE)
        advantages = np.array([1.0, 3.0], np.float32)
        feed = {model.inputs.state: [[0], [5]], model.taken_actions: [2, 0],
                model.advantages: advantages, model.returns: [0.5, -0.5]}
        policy_loss, value_loss, entropy = sess.run([model.policy_loss, model.value_loss, model.mean_entropy], feed)
        before = sess.run(model.variables)
        sess.run(model.update_batch, feed)  # one gradient step moves the weights
        assert any(not np.allclose(b, a) for b, a in zip(before, sess.run(model.variables)))
    # uniform over 3 actions: log p = -log 3 whatever the action, so -mean(-log 3 * [1, 3]) = 2 log 3
    assert policy_loss == pytest.approx(2 * np.log(3), rel=1e-5)
    assert value_loss == pytest.approx(0.25, rel=1e-5)
    assert entropy == pytest.approx(np.log(3), rel=1e-5)


def test_a2c_trainer_takes_one_gradient_step_per_batch(a2c_module):
    a2c, _ = a2c_module
    trainer = make_trainer(a2c.A2CTrainer, BALL_LIKE, time_horizon=4, buffer_size=12, batch_size=12, hidden_units=8)
    loop = Loop(FakeEnv(BALL_LIKE, episode_length=3))
    loop.run(trainer, 3, update=False)
    assert trainer.update_buffer_steps() == 3  # agent 0 (episodes of 3 steps) finished one
    loop.run(trainer, 4, update=False)
    assert trainer.is_ready_update()
    batch = trainer.update_arrays()
    assert batch["states"].shape == (len(batch["actions"]), 4) and batch["actions"].shape[1] == 2
    trainer.update_model()
    assert trainer.update_buffer_steps() == 0 and len(trainer.stats["policy_loss"]) == 1
    lengths = np.array(trainer.stats["episode_length"])
    assert set(lengths) <= {3.0, 4.0, 5.0}  # no transition dropped at a done
    np.testing.assert_allclose(trainer.stats["cumulative_reward"], 0.1 * (lengths - 1) + 1.0)


def adam_steps(trainer):
    """The optimiser steps the A2C graph has taken (Adam's beta1_power is 0.9 ** (steps + 1))."""
    power, = [v for v in trainer.sess.graph.get_collection("variables") if v.name.endswith("beta1_power:0")]
    return round(np.log(trainer.sess.run(power)) / np.log(0.9)) - 1


def test_a2c_takes_one_step_per_whole_batch_and_drops_the_rest(a2c_module):
    a2c, _ = a2c_module
    trainer = make_trainer(a2c.A2CTrainer, BALL_LIKE, batch_size=10, hidden_units=8)
    rng = np.random.default_rng(0)
    batch = {"states": rng.normal(size=(25, 4)).astype(np.float32), "actions": rng.normal(size=(25, 2)),
             "value_estimates": np.zeros(25), "advantages": rng.normal(size=25) * 5 + 3,
             "discounted_returns": rng.normal(size=25)}
    trainer.step = 250  # a quarter of max_steps 1000: the linear schedule's learning rate is 3/4 of 3e-4
    trainer.update(batch)
    assert adam_steps(trainer) == 2  # 25 steps: two batches of 10, the last 5 dropped
    assert trainer.stats["learning_rate"] == [pytest.approx(2.25e-4)]


def test_a2c_standardises_the_advantages_over_the_update(a2c_module, monkeypatch):
    a2c, _ = a2c_module
    trainer = make_trainer(a2c.A2CTrainer, BALL_LIKE, batch_size=8, hidden_units=8)
    fed = []
    monkeypatch.setattr(trainer, "update_feed", lambda part: fed.append(part["advantages"]) or {})
    monkeypatch.setattr(trainer.sess, "run", lambda fetches, feed=None: [0.0, 0.0, 0.0, None])
    advantages = np.arange(16, dtype=np.float64) * 3 + 7
    trainer.update({"actions": np.zeros((16, 2)), "advantages": advantages, "discounted_returns": np.zeros(16)})
    seen = np.concatenate(fed)
    np.testing.assert_allclose(np.sort(seen), np.sort((advantages - advantages.mean()) / advantages.std()),
                               rtol=1e-6)


def test_a2c_values_come_from_the_current_critic(a2c_module):
    from trainers.buffer import AgentBuffer

    a2c, _ = a2c_module
    trainer = make_trainer(a2c.A2CTrainer, BALL_LIKE, hidden_units=8, lambd=1.0, gamma=0.5)
    states = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    trajectory = AgentBuffer()
    trajectory["states"].extend(states)
    trajectory["rewards"].extend([1.0, 0.0, 2.0])
    trajectory["value_estimates"].extend([50.0, 50.0, 50.0])  # what act saw, before an update
    trainer.process_trajectory(trajectory, value_next=4.0)
    values = trainer.sess.run(trainer.model.value, {trainer.model.inputs.vector_in: states})[:, 0]
    np.testing.assert_allclose(np.asarray(trajectory["value_estimates"]), values, rtol=1e-6)
    returns = [1.0 + 0.5 * 0.0 + 0.25 * 2.0 + 0.125 * 4.0, 0.0 + 0.5 * 2.0 + 0.25 * 4.0, 2.0 + 0.5 * 4.0]
    np.testing.assert_allclose(np.asarray(trajectory["discounted_returns"]), returns, rtol=1e-5)


def test_a2c_shared_critic_reads_the_policy_layers(a2c_module):
    a2c, _ = a2c_module
    own = make_trainer(a2c.A2CTrainer, BALL_LIKE, hidden_units=8)
    shared = make_trainer(a2c.A2CTrainer, BALL_LIKE, hidden_units=8, shared_critic=True)
    assert any(v.name.startswith("value/") for v in own.model.variables)
    assert not any(v.name.startswith("value/") for v in shared.model.variables)
    assert len(shared.model.variables) == len(own.model.variables) - 4  # no second body of 2 layers


def test_plugin_exports_follow_the_contract(a2c_module, dqn_module, tmp_path):
    a2c, _ = a2c_module
    for cls, brain, dtype, width in ((a2c.A2CTrainer, BALL_LIKE, tf.float32, 2),
                                     (dqn_module.DQNTrainer, BASIC_LIKE, tf.int64, 1)):
        trainer = make_trainer(cls, brain, hidden_units=8)
        built = trainer.sess.graph
        assert built.get_tensor_by_name("action:0").shape.as_list() == [None, width]
        state_shape = [None, 4] if brain is BALL_LIKE else [None, 1]
        assert built.get_tensor_by_name("state:0").shape.as_list() == state_shape
        path = str(tmp_path / f"{cls.__name__}.bytes")
        export_graph(trainer.sess, trainer.export_nodes(), path, keep_nodes=contract_inputs(built, ""))
        with tf.Graph().as_default() as graph:
            tf.import_graph_def(load_graph_def(path), name="")
        assert graph.get_tensor_by_name("action:0").dtype == dtype
        assert graph.get_tensor_by_name("batch_size:0").dtype == tf.int32
        assert graph.get_tensor_by_name("state:0").dtype == (tf.float32 if brain is BALL_LIKE else tf.int32)
        assert not any(op.name.startswith(("target/", "dqn_loss/", "a2c_loss/")) for op in graph.get_operations())


def test_on_policy_base_names_missing_hooks():
    brain = BALL_LIKE
    trainer = make_trainer(OnPolicyTrainer, brain)
    with pytest.raises(UnityTrainerException, match="OnPolicyTrainer must implement act"):
        trainer.take_action(Loop(FakeEnv(brain)).info)


# ---------------------------------------------------------------- end to end, through entry points
@pytest.mark.slow
def test_dqn_plugin_learns_basic_through_learn_py(tmp_path):
    """learn.py in a subprocess discovers the plugin only through its entry points on PYTHONPATH."""
    site = tmp_path / "site"
    write_dist_info(site, "unityagents_trainer_plugin", PLUGIN_ENTRY_POINTS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), EXAMPLE, ROOT]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = os.path.join(PACKAGE, "dqn", "learn_Basic.yaml")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "learn.py"), "Basic", "--train", "--trainer-config",
                           config, "--run-path", "dqn", "--base-port", str(port)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    rewards = [float(m) for m in re.findall(r"BasicBrain: Step: \d+\. Mean Reward: (-?\d+\.\d+)", out)]
    assert rewards and rewards[-1] >= 0.9, rewards
    exported = tmp_path / "models" / "dqn" / "Basic.bytes"
    assert run_academy("Basic", "--brain", f"BasicBrain=internal:{exported}", "--episodes", "10") >= 0.9
