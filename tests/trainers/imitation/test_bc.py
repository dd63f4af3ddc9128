"""Behavioral cloning beside PPO and SAC: the loss pulls the policy toward recorded actions (discrete,
with masks, and continuous, in the environment's units), its schedule (SAC's once per time_horizon),
its configuration errors, and one short learning run."""

import numpy as np
import pytest

from academy import load_scene
from academy.academy import Academy
from academy.brain import BrainConfig
from academy.demo_recorder import record_demonstration
from runner.settings.trainer_config import TrainerConfigError
from tests.conftest import config_error, load_config
from trainers.ppo.trainer import PPOTrainer
from trainers.sac.trainer import SACTrainer
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters
from unityagents.demo import load_demonstration


def _demo(tmp_path, scene: str, episodes: int, name: str = "demo.demo") -> str:
    path = str(tmp_path / name)
    record_demonstration(Academy(load_scene(scene)(7)), load_scene(scene).brains[0].name, path, episodes)
    return path


def _brain(scene: str, **extra) -> BrainParameters:
    spec = load_scene(scene).brains[0]
    return BrainParameters(spec.name, {**spec.parameters_json(), **extra})


def _trainer(brain: BrainParameters, bc: dict, cls=PPOTrainer, **overrides):
    params = {"graph_scope": "", "summary_path": "", "batch_size": 64, "buffer_size": 256, "hidden_units": 32,
              "max_steps": 1000, "learning_rate": 3e-3, "behavioral_cloning": bc, **overrides}
    sess = tf.Session(graph=tf.Graph())
    with sess.graph.as_default():
        tf.set_random_seed(0)
    trainer = cls(sess, {brain.brain_name: brain}, brain.brain_name, params, training=True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    return trainer


def _agreement(trainer) -> float:
    """How often the policy's most likely action is the expert's (discrete)."""
    bc = trainer.bc
    probs = trainer.sess.run(trainer.model.probs, bc.feed(np.arange(len(bc))))
    return float(np.mean(np.argmax(probs, axis=1) == bc.actions[:, 0]))


def test_bc_loss_falls_and_the_policy_takes_the_experts_actions(tmp_path):
    trainer = _trainer(_brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 4), "num_epoch": 5})
    loss_before, agree_before = trainer.bc.loss_value(trainer.sess), _agreement(trainer)
    for _ in range(8):
        trainer.bc.update(trainer.sess, trainer.step, trainer.rng)
    loss_after, agree_after = trainer.bc.loss_value(trainer.sess), _agreement(trainer)
    assert loss_after < 0.6 * loss_before, (loss_before, loss_after)
    assert agree_after > max(0.7, agree_before + 0.2), (agree_before, agree_after)


@pytest.mark.slow
def test_bc_respects_action_masks_and_clones_continuous_actions(tmp_path):
    grid = BrainParameters("GridWorldBrain", {**_brain("GridWorld").to_dict(), "actionBranches": [4],
                                              "actionMasks": True, "stateSize": 2})  # the modern goal signal
    trainer = _trainer(grid, {"demo_path": _demo(tmp_path, "GridWorld", 2, "grid.demo")})
    bc = trainer.bc
    assert bc.masks.min() == 0.0  # the recording holds masked moves
    probs = trainer.sess.run(trainer.model.probs, bc.feed(np.arange(len(bc))))
    assert np.all(probs[bc.masks == 0.0] == 0.0)
    assert np.isfinite(bc.loss_value(trainer.sess))

    ball = _trainer(_brain("3DBall"), {"demo_path": _demo(tmp_path, "3DBall", 1, "ball.demo"), "batch_size": 256,
                                       "samples_per_update": 512, "num_epoch": 2})
    before = ball.bc.loss_value(ball.sess)
    for _ in range(10):
        ball.bc.update(ball.sess, 0, ball.rng)
    assert ball.bc.loss_value(ball.sess) < 0.5 * before


def test_strength_anneals_to_zero_then_bc_stops(tmp_path):
    trainer = _trainer(_brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 1), "strength": 0.5,
                                            "steps": 1000})
    bc = trainer.bc
    assert bc.current_learning_rate(0) == pytest.approx(3e-3 * 0.5)
    assert bc.current_learning_rate(750) == pytest.approx(3e-3 * 0.5 * 0.25)
    variables = trainer.sess.run(trainer.model.variables)
    assert bc.update(trainer.sess, 1000, trainer.rng) is None
    assert all(np.array_equal(a, b) for a, b in zip(variables, trainer.sess.run(trainer.model.variables)))
    assert bc.update(trainer.sess, 999, trainer.rng) is not None


@pytest.mark.parametrize("block, message", [
    ("{demo_path: x.demo, strenght: 0.5}",
     "key 'behavioral_cloning.strenght': unknown key of behavioral_cloning. Did you mean 'strength'?"),
    ("{strength: 0.5}", "key 'behavioral_cloning.demo_path': required by behavioral_cloning but missing"),
    ("{demo_path: x.demo, steps: -1}", "key 'behavioral_cloning.steps': must be >= 0, got -1"),
    ("{demo_path: x.demo, batch_size: many}", "key 'behavioral_cloning.batch_size': expected an integer"),
    ("x.demo", "key 'behavioral_cloning': expected a block of key: value"),
])
def test_bc_block_mistakes_are_named_errors(tmp_path, block, message):
    error = config_error(tmp_path, f"PyramidsBrain:\n    behavioral_cloning: {block}\n")
    assert "config.yaml: brain 'PyramidsBrain'" in error and message in error, error


def test_demo_that_does_not_fit_the_brain_is_refused_before_training(tmp_path):
    ball = _demo(tmp_path, "3DBall", 1, "ball.demo")
    config = load_config(tmp_path, f"PyramidsBrain:\n    behavioral_cloning: {{demo_path: {ball}}}\n")
    with pytest.raises(TrainerConfigError, match="behavioral_cloning.demo_path.*another behaviour spec") as error:
        config.settings_for_environment({"PyramidsBrain": _brain("Pyramids")}, ["PyramidsBrain"])
    assert ball in str(error.value)
    pyramids = _demo(tmp_path, "Pyramids", 1)
    config = load_config(tmp_path, f"PyramidsBrain:\n    use_recurrent: true\n"
                             f"    behavioral_cloning: {{demo_path: {pyramids}}}\n")
    with pytest.raises(TrainerConfigError, match="not supported with use_recurrent"):
        config.settings_for_environment({"PyramidsBrain": _brain("Pyramids")}, ["PyramidsBrain"])


def test_ppo_runs_bc_after_each_rl_update(tmp_path, monkeypatch):
    trainer = _trainer(_brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 1)})
    rl_updates = []
    monkeypatch.setattr(trainer, "update", lambda batch: rl_updates.append(batch))
    before = trainer.bc.loss_value(trainer.sess)
    trainer.update_model()
    assert len(rl_updates) == 1 and len(trainer.stats["bc_loss"]) == 1
    assert trainer.bc.loss_value(trainer.sess) < before


class _Policy:
    """The trained policy as the scene's Internal brain: it samples, as when training."""

    def __init__(self, trainer):
        self.trainer = trainer

    def decide(self, states, observations, memories):
        m = self.trainer.model
        actions = self.trainer.sess.run(m.output, {m.state_in: states, m.batch_size: len(states),
                                                   m.sequence_length: 1})
        return actions.astype(float), memories


@pytest.mark.slow
def test_bc_alone_reaches_half_the_heuristics_mean_on_pyramids(tmp_path):
    """Cloning a recording, with no reward at all, is enough to find the gold brick most of the time."""
    path = _demo(tmp_path, "Pyramids", 40)
    heuristic = load_demonstration(path).metas[0].mean_reward
    trainer = _trainer(_brain("Pyramids"), {"demo_path": path, "num_epoch": 1, "samples_per_update": 256,
                                            "batch_size": 256}, hidden_units=64)
    for _ in range(400):
        trainer.bc.update(trainer.sess, 0, trainer.rng)
    scene = load_scene("Pyramids")(11)
    mean = Academy(scene, {"PyramidsBrain": BrainConfig("internal", policy=_Policy(trainer))}).run_episodes(32)
    assert mean["PyramidsBrain"] >= 0.5 * heuristic, (mean, heuristic)


# ---------------------------------------------------------------- beside SAC, and in the environment's units
def _train(trainer, passes: int) -> None:
    for _ in range(passes):
        trainer.bc.update(trainer.sess, 0, trainer.rng)


def test_sac_clones_continuous_actions_through_its_squashed_mean(tmp_path):
    ball = _trainer(_brain("3DBall"), {"demo_path": _demo(tmp_path, "3DBall", 1), "batch_size": 256,
                                        "samples_per_update": 512, "num_epoch": 2}, SACTrainer)
    bc, m = ball.bc, ball.model
    bc.actions = np.full_like(bc.actions, 0.8)  # an expert far from the initial policy, inside tanh's range
    critics = ball.sess.run(m.online_variables)
    before = bc.loss_value(ball.sess)
    _train(ball, 30)
    assert bc.loss_value(ball.sess) < 0.05 * before, (before, bc.loss_value(ball.sess))
    # What the deployed actor does (tanh of its mean) is the recorded action; the critics are untouched.
    acted = ball.sess.run(m.deterministic_output, bc.feed(np.arange(len(bc))))
    assert abs(np.median(acted) - 0.8) < 0.03, np.median(acted)
    assert all(np.array_equal(a, b) for a, b in zip(critics, ball.sess.run(m.online_variables)))


def test_sac_clones_discrete_actions_and_keeps_masked_ones_at_zero(tmp_path):
    pyramids = _trainer(_brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 4), "num_epoch": 5}, SACTrainer)
    bc = pyramids.bc

    def agreement() -> float:
        probs = pyramids.sess.run(pyramids.model.probs, bc.feed(np.arange(len(bc))))
        return float(np.mean(np.argmax(probs, axis=1) == bc.actions[:, 0]))

    agree_before = agreement()
    _train(pyramids, 12)  # the logits start near zero (N(0, 0.1^2/fan_in)): a few passes move them first
    assert agreement() > max(0.7, agree_before + 0.2), (agree_before, agreement())

    grid = BrainParameters("GridWorldBrain", {**_brain("GridWorld").to_dict(), "actionBranches": [4],
                                              "actionMasks": True, "stateSize": 2})  # the modern goal signal
    masked = _trainer(grid, {"demo_path": _demo(tmp_path, "GridWorld", 2)}, SACTrainer)
    assert masked.bc.masks.min() == 0.0
    probs = masked.sess.run(masked.model.probs, masked.bc.feed(np.arange(len(masked.bc))))
    assert np.all(probs[masked.bc.masks == 0.0] == 0.0)


def test_sac_runs_bc_once_per_time_horizon_of_new_transitions(tmp_path, monkeypatch):
    trainer = _trainer(_brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 1)}, SACTrainer,
                       time_horizon=32)
    calls = []
    monkeypatch.setattr(trainer.replay, "sample", lambda n, rng: {})  # the RL steps are not under test
    monkeypatch.setattr(trainer, "update", lambda batch: {})
    monkeypatch.setattr(trainer.bc, "update", lambda sess, step, rng: calls.append(step) or 0.1)
    for seen in (10, 31, 32, 40, 63, 64, 200):
        trainer.transitions_seen = seen
        trainer.update_model()
    assert len(calls) == 3  # at 32, 64 and 200 transitions
    state = trainer.get_state()
    assert state["bc_at"] == 200


def test_ppo_clones_in_the_environments_units_under_the_unit_contract(tmp_path):
    """Over gRPC the scene receives clamp(mean, -3, 3) / 3 and a recording holds those numbers, so BC
    pulls the mean toward three times the recorded action; over API-2 toward the action itself."""
    demo = _demo(tmp_path, "3DBall", 1)
    means = {}
    for contract in ("unit", "raw"):
        ball = _trainer(_brain("3DBall", continuousActionContract=contract),
                        {"demo_path": demo, "batch_size": 256, "samples_per_update": 512, "num_epoch": 2},
                        learning_rate=1e-2)
        ball.bc.actions = np.full_like(ball.bc.actions, 0.5)
        _train(ball, 20)
        means[contract] = float(np.mean(ball.sess.run(ball.model.mu, ball.bc.feed(np.arange(len(ball.bc))))))
    assert abs(means["unit"] - 1.5) < 0.1 and abs(means["raw"] - 0.5) < 0.05, means
