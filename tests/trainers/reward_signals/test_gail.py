"""The ``gail`` reward signal: its discriminator learns to reward the recording's behaviour, its
config errors, and its place in PPO's update fields."""

import numpy as np
import pytest

from academy import load_scene
from academy.academy import Academy
from academy.demo_recorder import record_demonstration
from runner.settings.trainer_config import TrainerConfigError
from tests.conftest import load_config
from trainers.ppo.trainer import PPOTrainer
from trainers.reward_signals.gail import GAILSignal
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters
from unityagents.demo import load_demonstration


def _demo(tmp_path, scene: str = "Pyramids", episodes: int = 3) -> str:
    path = str(tmp_path / f"{scene}.demo")
    record_demonstration(Academy(load_scene(scene)(5)), load_scene(scene).brains[0].name, path, episodes)
    return path


def _brain(scene: str = "Pyramids") -> BrainParameters:
    spec = load_scene(scene).brains[0]
    return BrainParameters(spec.name, spec.parameters_json())


def _settings(path: str, **overrides) -> dict:
    return {"strength": 1.0, "gamma": 0.99, "demo_path": path, "encoding_size": 32, "learning_rate": 1e-3,
            "use_actions": False, "use_vail": False, "gradient_penalty_weight": 10.0, **overrides}


def _random_agent(n: int, rng) -> dict:
    return {"signal_state": rng.uniform(0.0, 1.0, (n, 37)).astype(np.float32), "actions": rng.integers(0, 4, n),
            "signal_done": np.zeros(n, np.float32)}


@pytest.mark.parametrize("use_actions, use_vail", [(False, False), (True, True)])
def test_discriminator_rewards_the_recordings_steps_over_the_agents(tmp_path, use_actions, use_vail):
    path = _demo(tmp_path)
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(0)
        signal = GAILSignal(_brain(), _settings(path, use_actions=use_actions, use_vail=use_vail))
        sess.run(tf.global_variables_initializer())
        rng = np.random.default_rng(0)
        expert = signal.expert_feed()
        agent = _random_agent(len(expert["actions"]), rng)
        before = signal.evaluate(sess, expert, True).mean() - signal.evaluate(sess, agent, True).mean()
        for _ in range(150):
            rows = rng.integers(0, len(agent["actions"]), 64)
            sess.run(signal.update_op, signal.update_feed({k: v[rows] for k, v in agent.items()}))
        expert_reward = signal.evaluate(sess, expert, True).mean()
        agent_reward = signal.evaluate(sess, agent, True).mean()
        beta = sess.run(signal.beta)
    assert abs(before) < 0.1
    assert expert_reward > 2.0 * agent_reward and expert_reward > 0.9, (expert_reward, agent_reward)
    assert (beta > 0.0) == use_vail  # VAIL's dual ascent moves beta off 0, without VAIL it stays
    # The hidden layers' swish is written with tanh (trainers.models.swish): a dense layer followed by
    # Sigmoid times its input is fused by the graph optimizer into a much slower kernel.
    graph = signal.update_op.graph
    swishes = [op for op in graph.get_operations() if op.type == "Mul" and any(
        i.op.type == "Sigmoid" and i.op.inputs[0] in list(op.inputs) for i in op.inputs)]
    assert not swishes and any(op.type == "Tanh" for op in graph.get_operations())


def test_normalize_gives_the_discriminator_states_by_the_statistics_of_both_kinds_of_step(tmp_path):
    """Release 22's ``gail.network_settings.normalize``: the statistics fold in the agent's and the
    recording's states at each discriminator step, and D still tells them apart."""
    path = _demo(tmp_path)
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.set_random_seed(0)
        signal = GAILSignal(_brain(), _settings(path, normalize=True))
        statistics = signal.state_statistics
        sess.run(tf.global_variables_initializer())
        rng = np.random.default_rng(0)
        expert = signal.expert_feed()
        agent = _random_agent(len(expert["actions"]), rng)
        seen = []
        for _ in range(150):
            rows = rng.integers(0, len(agent["actions"]), 64)
            feed = signal.update_feed({k: v[rows] for k, v in agent.items()})
            seen += [feed[signal.inputs.state], feed[signal.expert_state]]
            sess.run(signal.update_op, feed)
        mean, variance = sess.run([statistics.mean, statistics.variance])
        expert_reward = signal.evaluate(sess, expert, True).mean()
        agent_reward = signal.evaluate(sess, agent, True).mean()
    seen = np.concatenate(seen)
    np.testing.assert_allclose(mean, seen.mean(axis=0), atol=1e-3)
    np.testing.assert_allclose(variance, seen.var(axis=0), atol=1e-3)
    assert expert_reward > 2.0 * agent_reward and expert_reward > 0.9, (expert_reward, agent_reward)
    with tf.Graph().as_default():
        assert GAILSignal(_brain(), _settings(path)).state_statistics is None  # off by default


def test_expert_samples_pair_each_step_with_the_next_done(tmp_path):
    path = _demo(tmp_path, episodes=2)
    with tf.Graph().as_default():
        signal = GAILSignal(_brain(), _settings(path, use_actions=True))
    demo = load_demonstration(path)
    assert len(signal.expert["actions"]) == len(demo) - 2  # the two terminal steps are no samples
    assert signal.expert["dones"].sum() == 2 and signal.expert["actions"].shape[1] == 4
    np.testing.assert_array_equal(signal.expert["actions"].sum(axis=1), 1.0)  # one-hot


def test_gail_block_errors_name_the_key_or_file(tmp_path):
    with pytest.raises(TrainerConfigError, match=r"config.yaml: brain 'PyramidsBrain', key "
                                                 r"'reward_signals.gail.demo_path': required by the gail signal"):
        load_config(tmp_path, "PyramidsBrain:\n    reward_signals: {gail: {strength: 0.01}}\n")
    with pytest.raises(TrainerConfigError, match=r"'reward_signals.gail.use_vail': expected true or false"):
        load_config(tmp_path, "PyramidsBrain:\n    reward_signals: {gail: {demo_path: a.demo, use_vail: 3}}\n")
    ball = _demo(tmp_path, "3DBall", 1)
    config = load_config(tmp_path, f"PyramidsBrain:\n    reward_signals: {{gail: {{demo_path: {ball}}}}}\n")
    with pytest.raises(TrainerConfigError, match="reward_signals.gail.demo_path.*another behaviour spec") as error:
        config.settings_for_environment({"PyramidsBrain": _brain()}, ["PyramidsBrain"])
    assert ball in str(error.value)


@pytest.mark.slow
def test_ppo_with_gail_moves_the_done_flag_to_its_updates(tmp_path):
    params = {"graph_scope": "", "summary_path": "", "batch_size": 32, "buffer_size": 64, "hidden_units": 16,
              "reward_signals": {"extrinsic": {}, "gail": {"demo_path": _demo(tmp_path), "use_actions": True}}}
    trainer = PPOTrainer(tf.Session(graph=tf.Graph()), {"PyramidsBrain": _brain()}, "PyramidsBrain", params,
                         training=True)
    assert list(trainer.reward_signals) == ["extrinsic", "gail"]
    assert {"signal_state", "signal_done", "discounted_returns_gail"} <= set(trainer.update_fields)
