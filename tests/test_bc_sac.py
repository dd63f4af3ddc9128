"""Behavioral cloning beside SAC (continuous and masked discrete actions), its schedule inside SAC's
update calls, and PPO's cloning target in the environment's units under the gRPC action contract."""
import numpy as np

from academy import load_scene
from academy.academy import Academy
from academy.demo_recorder import record_demonstration
from trainers.ppo_trainer import PPOTrainer
from trainers.sac.trainer import SACTrainer
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters


def _demo(tmp_path, scene: str, episodes: int) -> str:
    path = str(tmp_path / f"{scene}.demo")
    record_demonstration(Academy(load_scene(scene)(7)), load_scene(scene).brains[0].name, path, episodes)
    return path


def _brain(scene: str, **extra) -> BrainParameters:
    spec = load_scene(scene).brains[0]
    return BrainParameters(spec.name, {**spec.parameters_json(), **extra})


def _trainer(cls, brain: BrainParameters, bc: dict, **overrides):
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


def _train(trainer, passes: int) -> None:
    for _ in range(passes):
        trainer.bc.update(trainer.sess, 0, trainer.rng)


def test_sac_clones_continuous_actions_through_its_squashed_mean(tmp_path):
    ball = _trainer(SACTrainer, _brain("3DBall"), {"demo_path": _demo(tmp_path, "3DBall", 1), "batch_size": 256,
                                                   "samples_per_update": 512, "num_epoch": 2})
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
    pyramids = _trainer(SACTrainer, _brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 4), "num_epoch": 5})
    bc = pyramids.bc

    def agreement() -> float:
        probs = pyramids.sess.run(pyramids.model.probs, bc.feed(np.arange(len(bc))))
        return float(np.mean(np.argmax(probs, axis=1) == bc.actions[:, 0]))

    agree_before = agreement()
    _train(pyramids, 8)
    assert agreement() > max(0.7, agree_before + 0.2), (agree_before, agreement())

    grid = BrainParameters("GridWorldBrain", {**_brain("GridWorld").to_dict(), "actionBranches": [4],
                                              "actionMasks": True})
    masked = _trainer(SACTrainer, grid, {"demo_path": _demo(tmp_path, "GridWorld", 2)})
    assert masked.bc.masks.min() == 0.0
    probs = masked.sess.run(masked.model.probs, masked.bc.feed(np.arange(len(masked.bc))))
    assert np.all(probs[masked.bc.masks == 0.0] == 0.0)


def test_sac_runs_bc_once_per_time_horizon_of_new_transitions(tmp_path, monkeypatch):
    trainer = _trainer(SACTrainer, _brain("Pyramids"), {"demo_path": _demo(tmp_path, "Pyramids", 1)},
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
        ball = _trainer(PPOTrainer, _brain("3DBall", continuousActionContract=contract),
                        {"demo_path": demo, "batch_size": 256, "samples_per_update": 512, "num_epoch": 2},
                        learning_rate=1e-2)
        ball.bc.actions = np.full_like(ball.bc.actions, 0.5)
        _train(ball, 20)
        means[contract] = float(np.mean(ball.sess.run(ball.model.mu, ball.bc.feed(np.arange(len(ball.bc))))))
    assert abs(means["unit"] - 1.5) < 0.1 and abs(means["raw"] - 0.5) < 0.05, means
