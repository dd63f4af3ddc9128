"""Reward signals: RND and curiosity on tiny hand-built data, GAE per signal against hand-computed
values, the nested config block's errors, and PPO with signals (same update as before without
them, checkpointed, left out of the export)."""
import os

import numpy as np
import pytest

from runner.settings.trainer_config import TrainerConfigError, load_trainer_config
from tests.conftest import config_error, load_config
from tests.fake_env import learn_from_step
from trainers.buffer import AgentBuffer
from trainers.export.frozen_graph import contract_inputs, export_graph, load_graph_def
from trainers.ppo.trainer import PPOTrainer
from trainers.reward_signals import CuriositySignal, RNDSignal, signal_gae, validate_reward_signals
from trainers.tf_utils import tf
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.on_policy import OnPolicyTrainer
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters

REGISTRY = load_registry()


def make_brain(state_size=4, action_type=0, action_size=4):
    return BrainParameters("B", {
        "stateSize": state_size, "actionSize": action_size, "memorySize": 0, "cameraResolutions": [],
        "actionDescriptions": [""] * action_size, "actionSpaceType": action_type, "stateSpaceType": 1})


# ---------------------------------------------------------------- RND
def test_rnd_reward_falls_on_states_seen_often_and_stays_high_on_new_ones():
    rng = np.random.default_rng(0)
    familiar = {"signal_state": (np.array([1.0, -1.0, 0.5, 0.0]) + 0.05 * rng.normal(size=(64, 4))).astype(np.float32)}
    novel = {"signal_state": np.tile(np.array([[-2.0, 2.0, -1.5, 2.5]], np.float32), (8, 1))}
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(0)
        signal = RNDSignal(make_brain(), {"strength": 0.01, "gamma": 0.99, "encoding_size": 32, "learning_rate": 1e-3})
        sess.run(tf.global_variables_initializer())
        signal.evaluate(sess, familiar, training=True)   # the running statistics see the familiar states
        feed = signal.update_feed(familiar)
        error_before = sess.run(signal.raw_error, feed).mean()
        for _ in range(300):
            sess.run(signal.update_op, signal.update_feed(familiar))
        error_after = sess.run(signal.raw_error, feed).mean()
        familiar_reward = signal.evaluate(sess, familiar, training=False).mean()
        novel_reward = signal.evaluate(sess, novel, training=False).mean()
    assert error_after < 0.05 * error_before, (error_before, error_after)
    assert novel_reward > 20 * familiar_reward, (novel_reward, familiar_reward)


def _ancestors(op):
    """Every op ``op`` waits for, through its inputs and its control inputs."""
    seen, stack = set(), [op]
    while stack:
        o = stack.pop()
        if o not in seen:
            seen.add(o)
            stack.extend([i.op for i in o.inputs] + list(o.control_inputs))
    return seen


def test_rnd_rewards_a_batch_by_the_error_statistics_from_before_it_while_folding_it_in():
    """The reward and the statistics' update share one session.run: every op of the reward that
    reads the variance must run before the variance is assigned (unordered, the two raced, and
    which won changed from graph to graph), and the reward is the batch's errors over the old std."""
    states = {"signal_state": np.random.default_rng(2).normal(size=(12, 4)).astype(np.float32)}
    with tf.Graph().as_default() as graph, tf.Session() as sess:
        signal = RNDSignal(make_brain(), {"strength": 0.01, "gamma": 0.99, "encoding_size": 8, "learning_rate": 1e-3})
        sess.run(tf.global_variables_initializer())
        variance = next(v for v in tf.global_variables() if v.name.startswith("rnd/error_statistics/running_variance"))
        assign = next(op for op in graph.get_operations() if op.type.startswith("Assign")
                      and op.inputs[0].op is variance.op and op is not variance.initializer)
        read = {variance.op} | {op for op in graph.get_operations() if op.type == "Identity"
                                 and op.inputs and op.inputs[0].op is variance.op}
        readers = [op for op in _ancestors(signal.reward.op) - read if any(i.op in read for i in op.inputs)]
        assert readers and all(op in _ancestors(assign) for op in readers), [op.name for op in readers]
        feed = signal.update_feed(states)
        for _ in range(5):
            before, errors = sess.run([variance, signal.raw_error], feed)
            rewarded = signal.evaluate(sess, states, training=True)
            np.testing.assert_allclose(rewarded, errors / np.sqrt(before[0] + np.float32(1e-8)), rtol=1e-6)
            assert not np.array_equal(sess.run(variance), before)  # the batch was folded in


def test_rnd_target_is_fixed_and_only_the_predictor_trains():
    state = {"signal_state": np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)}
    with tf.Graph().as_default(), tf.Session() as sess:
        signal = RNDSignal(make_brain(), {"strength": 0.01, "gamma": 0.99, "encoding_size": 8, "learning_rate": 1e-2})
        sess.run(tf.global_variables_initializer())
        target = [v for v in tf.global_variables() if "/target/" in "/" + v.name]
        predictor = [v for v in tf.trainable_variables() if "predictor" in v.name]
        assert target and predictor
        before = sess.run(target + predictor)
        for _ in range(5):
            sess.run(signal.update_op, signal.update_feed(state))
        after = sess.run(target + predictor)
    for b, a in zip(before[:len(target)], after[:len(target)]):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(b, a) for b, a in zip(before[len(target):], after[len(target):]))


@pytest.mark.parametrize("cls, settings, scope", [
    (RNDSignal, {"strength": 0.01, "gamma": 0.99, "encoding_size": 8, "learning_rate": 1e-3}, "predictor"),
    (CuriositySignal, {"strength": 0.02, "gamma": 0.99, "encoding_size": 8, "learning_rate": 1e-3}, "encoder"),
])
def test_num_layers_sets_the_depth_of_a_signals_network(cls, settings, scope):
    """Release 22's ``reward_signals.<name>.network_settings.num_layers`` (PyramidsRND uses 3)."""
    def hidden_layers(num_layers):
        with tf.Graph().as_default():
            cls(make_brain(), {**settings, "num_layers": num_layers})
            return len({v.name.split("/dense_")[1].split("/")[0] for v in tf.trainable_variables()
                        if f"/{scope}/dense_" in v.name})
    assert (hidden_layers(2), hidden_layers(3)) == (2, 3)


# ---------------------------------------------------------------- curiosity
def test_curiosity_inverse_model_predicts_the_action_on_a_tiny_batch():
    """Four actions move a point by a different unit step; the inverse model must say which."""
    rng = np.random.default_rng(0)
    moves = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], np.float32)
    actions = np.tile(np.arange(4), 8)
    state = rng.uniform(-2, 2, size=(32, 2)).astype(np.float32)
    batch = {"signal_state": state, "signal_next_state": state + moves[actions], "actions": actions,
             "signal_done": np.zeros(32, np.float32)}
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(0)
        signal = CuriositySignal(make_brain(state_size=2), {"strength": 0.1, "gamma": 0.99, "encoding_size": 16,
                                                              "learning_rate": 3e-3})
        sess.run(tf.global_variables_initializer())
        feed = signal.update_feed(batch)
        forward_before = sess.run(signal.forward_loss, feed)
        for _ in range(300):
            sess.run(signal.update_op, feed)
        logits, forward_after = sess.run([signal.inverse_prediction, signal.forward_loss], feed)
        rewards = signal.evaluate(sess, dict(batch, signal_done=np.r_[np.zeros(31), 1.0]), training=True)
    np.testing.assert_array_equal(np.argmax(logits, axis=1), actions)
    assert forward_after < forward_before
    assert rewards.shape == (32,) and rewards[-1] == 0.0 and np.all(rewards[:-1] > 0)


def test_curiosity_inverse_model_predicts_each_branchs_action():
    """Two branches: the first (4 actions) moves a point in the plane, the second (2 actions) moves
    it up or down; the inverse model's logits, branch after branch, must say both."""
    rng = np.random.default_rng(1)
    moves = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], np.float32)
    actions = np.stack([np.tile(np.arange(4), 8), np.repeat([0, 1], 16)], axis=1)
    state = rng.uniform(-2, 2, size=(32, 3)).astype(np.float32)
    after = state + np.concatenate([moves[actions[:, 0]], np.where(actions[:, 1:] == 0, 1.0, -1.0)], axis=1)
    batch = {"signal_state": state, "signal_next_state": after.astype(np.float32), "actions": actions,
             "signal_done": np.zeros(32, np.float32)}
    brain = BrainParameters("B", {"stateSize": 3, "actionSize": 2, "actionSpaceType": 0, "stateSpaceType": 1,
                                  "actionBranches": [4, 2]})
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(0)
        signal = CuriositySignal(brain, {"strength": 0.1, "gamma": 0.99, "encoding_size": 16, "learning_rate": 3e-3})
        sess.run(tf.global_variables_initializer())
        feed = signal.update_feed(batch)
        for _ in range(300):
            sess.run(signal.update_op, feed)
        logits, loss = sess.run([signal.inverse_prediction, signal.inverse_loss], feed)
        rewards = signal.evaluate(sess, batch, training=True)
    assert logits.shape == (32, 6)
    np.testing.assert_array_equal(np.argmax(logits[:, :4], axis=1), actions[:, 0])
    np.testing.assert_array_equal(np.argmax(logits[:, 4:], axis=1), actions[:, 1])

    def cross_entropy(part, labels):
        shifted = part - part.max(axis=1, keepdims=True)
        return -(shifted[np.arange(len(labels)), labels] - np.log(np.exp(shifted).sum(axis=1)))

    expected = (cross_entropy(logits[:, :4], actions[:, 0]) + cross_entropy(logits[:, 4:], actions[:, 1])).mean()
    assert loss == pytest.approx(expected, rel=1e-4)
    assert rewards.shape == (32,) and np.all(rewards > 0)


@pytest.mark.parametrize("trainer_type", ["ppo", "sac"])
def test_a_trainer_with_curiosity_on_a_branched_brain_gives_it_every_branchs_action(trainer_type):
    """PPO's and SAC's updates train curiosity's inverse model on the action of every branch."""
    from tests.fake_env import FakeEnv, Loop
    from trainers.sac import SACTrainer

    brain = BrainParameters("B", {"stateSize": 4, "actionSize": 2, "actionSpaceType": 0, "stateSpaceType": 1,
                                  "actionBranches": [3, 2]})
    signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99},
               "curiosity": {"strength": 0.02, "gamma": 0.9, "encoding_size": 8}}
    params = {"graph_scope": "", "summary_path": "", "batch_size": 8, "buffer_size": 32, "time_horizon": 5,
              "hidden_units": 16, "max_steps": 1000, "reward_signals": signals}
    cls = PPOTrainer if trainer_type == "ppo" else SACTrainer
    sess = tf.Session(graph=tf.Graph())
    trainer = cls(sess, {"B": brain}, "B", params, training=True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    fed = []
    signal = trainer.reward_signals["curiosity"]
    feed = signal._feed
    signal._feed = lambda fields: fed.append(np.asarray(fields["actions"]).shape) or feed(fields)
    Loop(FakeEnv(brain)).run(trainer, 40)
    assert fed and all(shape[1:] == (2,) for shape in fed), fed
    stats = trainer._signal_stats if trainer_type == "ppo" else trainer.stats
    assert stats["Losses/Curiosity Inverse Loss"]


# ---------------------------------------------------------------- GAE per signal
def test_gae_per_signal_against_hand_computed_values():
    # Extrinsic: gamma 0.9; intrinsic: gamma 0.5; lambda 0.8 for both; three steps, bootstrap values.
    rewards = {"extrinsic": np.array([0.0, 0.0, 1.0]), "rnd": np.array([0.3, 0.2, 0.1])}
    values = {"extrinsic": np.array([0.5, 0.4, 0.3]), "rnd": np.array([0.2, 0.1, 0.0])}
    out = signal_gae(rewards, values, {"extrinsic": 0.2, "rnd": 1.0}, {"extrinsic": 0.9, "rnd": 0.5}, lambd=0.8)
    # delta_t = r_t + gamma V_{t+1} - V_t ; A_t = delta_t + gamma lambda A_{t+1}
    d_e = [0.0 + 0.9 * 0.4 - 0.5, 0.0 + 0.9 * 0.3 - 0.4, 1.0 + 0.9 * 0.2 - 0.3]   # -0.14, -0.13, 0.88
    a_e2 = d_e[2]
    a_e1 = d_e[1] + 0.72 * a_e2
    a_e0 = d_e[0] + 0.72 * a_e1
    d_i = [0.3 + 0.5 * 0.1 - 0.2, 0.2 + 0.5 * 0.0 - 0.1, 0.1 + 0.5 * 1.0 - 0.0]    # 0.15, 0.1, 0.6
    a_i2 = d_i[2]
    a_i1 = d_i[1] + 0.4 * a_i2
    a_i0 = d_i[0] + 0.4 * a_i1
    np.testing.assert_allclose(out["extrinsic"]["advantages"], [a_e0, a_e1, a_e2])
    np.testing.assert_allclose(out["rnd"]["advantages"], [a_i0, a_i1, a_i2])
    np.testing.assert_allclose(out["extrinsic"]["returns"], np.array([a_e0, a_e1, a_e2]) + values["extrinsic"])
    np.testing.assert_allclose(out["rnd"]["returns"], np.array([a_i0, a_i1, a_i2]) + values["rnd"])


class _ConstantSignal:
    """A stand-in intrinsic signal: a fixed reward per step, no networks."""

    name, title, needs_next_inputs, update_op, metrics = "rnd", "Rnd", False, None, {}

    def __init__(self, rewards, strength, gamma):
        self.rewards, self.strength, self.gamma = np.asarray(rewards), strength, gamma

    def evaluate(self, sess, fields, training):
        return self.rewards


class _Extrinsic(_ConstantSignal):
    name, title = "extrinsic", "Extrinsic"

    def evaluate(self, sess, fields, training):
        return np.asarray(fields["rewards"], dtype=np.float64)


def test_the_base_sums_the_signals_advantages_after_strength():
    trainer = OnPolicyTrainer.__new__(OnPolicyTrainer)
    trainer.sess, trainer.is_training, trainer._signal_stats = None, True, {}
    trainer.reward_signals = {"extrinsic": _Extrinsic([], 1.0, 0.9), "rnd": _ConstantSignal([1.0, 1.0], 0.5, 0.5)}
    trajectory = AgentBuffer()
    trajectory["rewards"].extend([0.0, 1.0])
    trajectory["value_estimates"].extend([0.1, 0.2])
    trajectory["value_estimates_rnd"].extend([0.3, 0.4])
    trainer.add_reward_signal_fields(trajectory, {"extrinsic": 0.0, "rnd": 0.0}, lambd=1.0)
    # lambda 1, done at the end: A = discounted return - V. Extrinsic: [0.9, 1.0]; rnd (x0.5): [0.75, 0.5].
    np.testing.assert_allclose(trajectory["discounted_returns"], [0.9, 1.0], rtol=1e-6)
    np.testing.assert_allclose(trajectory["discounted_returns_rnd"], [0.75, 0.5], rtol=1e-6)
    np.testing.assert_allclose(trajectory["advantages"], [0.9 - 0.1 + 0.75 - 0.3, 1.0 - 0.2 + 0.5 - 0.4], rtol=1e-6)
    assert trainer._signal_stats["Policy/Rnd Reward"] == [0.5, 0.5]
    assert trainer._signal_stats["Policy/Extrinsic Value Estimate"] == pytest.approx([0.1, 0.2])


# ---------------------------------------------------------------- configuration
@pytest.mark.parametrize("block, message", [
    ("rdn: {strength: 0.01}", "key 'reward_signals.rdn': unknown reward signal. Did you mean 'rnd'?"),
    ("rnd: {strenght: 0.01}", "key 'reward_signals.rnd.strenght': unknown key of the rnd signal. "
                              "Did you mean 'strength'?"),
    ("curiosity: {encoding_size: 1.5}", "key 'reward_signals.curiosity.encoding_size': expected an integer, got 1.5"),
    ("extrinsic: {strength: high}", "key 'reward_signals.extrinsic.strength': expected a number, got 'high'"),
    ("extrinsic: {gamma: 1.5}", "key 'reward_signals.extrinsic.gamma': must be in [0, 1], got 1.5"),
    ("extrinsic: 1.0", "key 'reward_signals.extrinsic': expected a block of key: value"),
    ("", "key 'reward_signals': the block is empty"),
])
def test_reward_signal_mistakes_are_named_errors(tmp_path, block, message):
    error = config_error(tmp_path, f"PyramidsBrain:\n    reward_signals: {{{block}}}\n")
    assert "config.yaml: brain 'PyramidsBrain'" in error and message in error, error


def test_reward_signals_must_be_a_block(tmp_path):
    with pytest.raises(TrainerConfigError, match=r"brain 'B', key 'reward_signals': expected a block of key: value, "
                                                 r"got 'rnd'"):
        load_config(tmp_path, "B:\n    reward_signals: rnd\n")


def test_reward_signals_defaults_yaml11_numbers_and_extrinsic_first(tmp_path):
    config = load_config(tmp_path, """
        B:
            reward_signals:
                rnd: {learning_rate: 1.0e-3}
                extrinsic:
    """)
    signals = config.settings_for("B").parameters["reward_signals"]
    assert list(signals) == ["extrinsic", "rnd"]
    assert signals["rnd"] == {"strength": 0.01, "gamma": 0.99, "encoding_size": 64, "learning_rate": 1e-3,
                              "num_layers": 2}
    assert signals["extrinsic"] == {"strength": 1.0, "gamma": 0.99}
    assert config.settings_for("C").parameters["reward_signals"] is None   # no block: as before
    assert validate_reward_signals("B", None) is None


def test_shipped_pyramids_blocks_use_rnd_and_curiosity():
    root = __file__.rsplit("/tests/", 1)[0]
    config = load_trainer_config(os.path.join(root, "trainer_configurations.yaml"), REGISTRY)
    assert set(config.settings_for("PyramidsBrain").parameters["reward_signals"]) == {"extrinsic", "rnd"}
    curious = config.settings_for("PyramidsBrainCuriosity").parameters["reward_signals"]
    assert set(curious) == {"extrinsic", "curiosity"}


# ---------------------------------------------------------------- PPO with reward signals
def brain_info(states, rewards, dones, agents=(1, 2)):
    return BrainInfo([], np.asarray(states, np.float32), None, list(rewards), list(agents), list(dones),
                     np.zeros((len(agents), 1)))


def run_trainer(params, steps=12, seed=0, initial=None):
    """A PPO trainer on a stream of two agents; returns (trainer, its graph's variable values).

    ``initial``, a dict, receives the variable values right after initialisation."""
    graph = tf.Graph()
    sess = tf.Session(graph=graph)
    with graph.as_default():
        tf.set_random_seed(seed)
    brain = make_brain()
    base = {"batch_size": 8, "buffer_size": 16, "time_horizon": 4, "hidden_units": 8, "num_layers": 1,
            "summary_freq": 1000, "max_steps": 1000, "num_epoch": 2, "graph_scope": "", "summary_path": ""}
    params = {**base, **params}
    trainer = PPOTrainer(sess, {"B": brain}, "B", params, training=True, seed=seed)
    with graph.as_default():
        sess.run(tf.global_variables_initializer())
        if initial is not None:
            initial.update({v.op.name: sess.run(v) for v in tf.global_variables()})
    graph.finalize()
    rng = np.random.default_rng(seed)
    info = {"B": brain_info(rng.normal(size=(2, 4)), [0, 0], [False, False])}
    updates = 0
    for t in range(steps):
        _, _, _, out = trainer.take_action(info)
        following = {"B": brain_info(rng.normal(size=(2, 4)), [0.1 * t, -0.1], [t % 5 == 4, False])}
        learn_from_step(trainer, info, following, out)
        if trainer.is_ready_update():
            trainer.update_model()
            updates += 1
        info = following
    assert updates >= 1
    with graph.as_default():
        values = {v.op.name: sess.run(v) for v in tf.global_variables()}
    return trainer, values


@pytest.mark.slow
def test_an_extrinsic_only_block_trains_exactly_like_no_block():
    plain, plain_values = run_trainer({})
    block, block_values = run_trainer({"reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99}}})
    assert plain.reward_signals == {} and set(block.reward_signals) == {"extrinsic"}
    assert plain_values.keys() == block_values.keys()
    for name, value in plain_values.items():
        np.testing.assert_allclose(block_values[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.slow
def test_ppo_with_rnd_and_curiosity_trains_them_saves_them_and_exports_without_them(tmp_path):
    signals = {"extrinsic": {"strength": 1.0, "gamma": 0.99},
               "rnd": {"strength": 0.01, "gamma": 0.9, "encoding_size": 8, "learning_rate": 1e-3},
               "curiosity": {"strength": 0.02, "gamma": 0.9, "encoding_size": 8, "learning_rate": 1e-3}}
    initial = {}
    trainer, values = run_trainer({"reward_signals": signals}, steps=20, initial=initial)
    sess, graph = trainer.sess, trainer.sess.graph
    assert set(trainer.model.values) == {"extrinsic", "rnd", "curiosity"}
    stats = trainer._signal_stats
    for title in ("Extrinsic", "Rnd", "Curiosity"):  # ML-Agents Release 22's names
        assert stats[f"Policy/{title} Reward"] and stats[f"Policy/{title} Value Estimate"]
    assert stats["Losses/RND Loss"] and stats["Losses/Curiosity Inverse Loss"]
    # Trained by PPO's updates: every weight of the RND predictor and of the curiosity models moved
    # from its initial value; the RND target (a fixed random network) did not.
    def moved(prefix):
        names = [n for n in values if n.startswith(prefix) and not n.endswith(("Adam", "Adam_1", "_power"))]
        assert names, prefix
        return {n: not np.array_equal(values[n], initial[n]) for n in names}

    assert not any(moved("rnd/target/").values()), moved("rnd/target/")
    for prefix in ("rnd/predictor", "curiosity/"):
        kernels = {n: m for n, m in moved(prefix).items() if n.endswith("kernel")}
        assert kernels and all(kernels.values()), (prefix, kernels)

    # Checkpointed: the fixed RND target is among the variables a default Saver writes.
    with graph.as_default():
        names = {v.op.name for v in tf.global_variables()}
    assert any(n.startswith("rnd/target/") for n in names) and any(n.startswith("curiosity/") for n in names)
    assert "value_head_rnd/kernel" in names

    # Left out of the export: nothing of the signals or of their value heads is in the frozen graph.
    path = str(tmp_path / "B.bytes")
    export_graph(sess, trainer.export_nodes(), path, keep_nodes=contract_inputs(graph, ""))
    exported = [node.name for node in load_graph_def(path).node]
    assert "action" in exported and "value_estimate" in exported and "state" in exported
    leaked = [n for n in exported if n.startswith(("rnd/", "curiosity/", "value_head_"))]
    assert leaked == []


def test_rnd_is_restored_by_a_checkpoint_target_statistics_and_predictor_alike(tmp_path):
    """What ``--load`` relies on: the controller's default Saver holds every RND variable."""
    states = {"signal_state": np.random.default_rng(2).normal(size=(16, 4)).astype(np.float32)}
    settings = {"strength": 0.01, "gamma": 0.99, "encoding_size": 8, "learning_rate": 1e-2}
    path = str(tmp_path / "model.cptk")
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(1)
        signal = RNDSignal(make_brain(), settings)
        sess.run(tf.global_variables_initializer())
        signal.evaluate(sess, states, training=True)
        sess.run(signal.update_op, signal.update_feed(states))
        expected = signal.evaluate(sess, states, training=False)
        tf.train.Saver().save(sess, path)
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(2)   # another initialisation, replaced by the checkpoint
        signal = RNDSignal(make_brain(), settings)
        sess.run(tf.global_variables_initializer())
        assert not np.allclose(signal.evaluate(sess, states, training=False), expected)
        tf.train.Saver().restore(sess, path)
        np.testing.assert_allclose(signal.evaluate(sess, states, training=False), expected, rtol=1e-6)
