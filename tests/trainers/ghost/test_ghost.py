"""GhostTrainer: the snapshot pool's assign ops, a graph that never grows, checkpointing of the
pool, the self-play rating, and the scene checks of its configuration."""
import glob
import os
import textwrap

import numpy as np
import pytest

from runner.controller import still_trains
from runner.settings.trainer_config import load_trainer_config
from tests.fake_env import end_episodes, learn_from_step
from trainers.ghost.self_play import SnapshotRing
from trainers.ghost.trainer import ELO_K, INITIAL_ELO, GhostTrainer
from trainers.ppo.trainer import PPO_HYPERPARAMETERS, PPOTrainer
from trainers.tf_utils import tf
from trainers.trainer.base import TrainerConfigError, UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.registry import load_registry
from unityagents.brain import BrainParameters

LEARNER, GHOST = "TennisBrain", "ghost-TennisBrain"


def make_brain(name, state_size=8, action_size=2, action_type=1, memory=0, cameras=()):
    return BrainParameters(name, {
        "stateSize": state_size, "actionSize": action_size, "memorySize": memory,
        "cameraResolutions": list(cameras), "actionDescriptions": [""] * action_size,
        "actionSpaceType": action_type, "stateSpaceType": 1,
    })


def learner_parameters(**overrides):
    params = {k: p.default for k, p in PPO_HYPERPARAMETERS.items()}
    params.update(trainer="ppo", graph_scope=LEARNER, summary_path=None, hidden_units=16, normalize=True)
    params.update(overrides)
    return params


def ghost_parameters(original, **overrides):
    params = dict(trainer="ghost", brain_to_copy=LEARNER, new_model_freq=4, max_num_models=3, max_steps=1000,
                  summary_freq=100, graph_scope=GHOST, summary_path=None, original_brain_parameters=original)
    params.update(overrides)
    return params


class Run:
    """A learner and its ghost in a fresh graph, initialised and finalized like the controller does."""

    def __init__(self, action_type=1, recurrent=False, training=True, ghost_overrides=None, finalize=True):
        memory = 8 if recurrent else 0
        self.brains = {LEARNER: make_brain(LEARNER, action_type=action_type, memory=memory),
                       GHOST: make_brain(GHOST, action_type=action_type, memory=memory)}
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.sess = tf.Session(graph=self.graph)
            self.original = learner_parameters(use_recurrent=recurrent)
            self.learner = PPOTrainer(self.sess, self.brains, LEARNER, self.original, training)
            self.ghost = GhostTrainer(self.sess, self.brains, GHOST,
                                      ghost_parameters(self.original, **(ghost_overrides or {})), training)
            self.saver = tf.train.Saver()
            self.sess.run(tf.global_variables_initializer())
        if finalize:
            self.graph.finalize()

    def acting_pairs(self):
        """(learner variable, ghost acting variable) for every weight the ghost copies."""
        by_name = {v.op.name: v for v in self.graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)}
        pool_names = [v.op.name[len(GHOST + "/snapshot_pool/"):] for v in self.ghost.pool.variables]
        return [(by_name[f"{LEARNER}/{n}"], by_name[f"{GHOST}/{n}"]) for n in pool_names]

    def perturb_learner(self, rng):
        """Give the learner new weights (Variable.load feeds the initializer: no new op)."""
        with self.graph.as_default():
            for learner_var, _ in self.acting_pairs():
                value = self.sess.run(learner_var)
                learner_var.load(value + rng.normal(size=value.shape).astype(value.dtype), self.sess)

    def learner_values(self):
        return [self.sess.run(v) for v, _ in self.acting_pairs()]

    def acting_values(self):
        return [self.sess.run(v) for _, v in self.acting_pairs()]

    def policies(self, states):
        """What each network's policy outputs for ``states`` (mean action, or action probabilities)."""
        result = []
        for model in (self.learner.model, self.ghost.model):
            tensor = model.output if model.is_continuous else model.probs
            feed = {model.state_in: states, model.batch_size: len(states), model.sequence_length: 1}
            if model.use_recurrent:
                feed[model.memory_in] = np.zeros((len(states), model.m_size), np.float32)
            result.append(self.sess.run(tensor, feed))
        return result


def brain_info(n=2, state_size=8, rewards=None, done=None, agents=None, memory=0, seed=0):
    rng = np.random.default_rng(seed)
    agents = list(range(n)) if agents is None else agents
    return BrainInfo([], rng.normal(size=(n, state_size)).astype(np.float32), np.zeros((n, memory), np.float32),
                     list(rewards or [0.0] * n), agents, list(done or [False] * n), np.zeros((n, 2)))


def step_infos(learner_rewards=None, ghost_rewards=None, learner_done=None, ghost_done=None, seed=0, memory=0):
    return {LEARNER: brain_info(rewards=learner_rewards, done=learner_done, seed=seed, memory=memory),
            GHOST: brain_info(rewards=ghost_rewards, done=ghost_done, seed=seed + 1, memory=memory)}


@pytest.mark.parametrize("action_type, recurrent",
                         [(1, False), (0, False), pytest.param(1, True, marks=pytest.mark.slow)],
                         ids=["continuous", "discrete", "recurrent"])
def test_snapshot_and_load_copy_the_learner_into_the_acting_network(action_type, recurrent):
    run = Run(action_type=action_type, recurrent=recurrent)
    rng = np.random.default_rng(0)
    states = rng.normal(size=(5, 8)).astype(np.float32)
    run.perturb_learner(rng)
    assert not all(np.allclose(a, b) for a, b in zip(run.learner_values(), run.acting_values()))

    run.ghost.take_snapshot()
    run.ghost.select_slot(0)
    for learner_value, acting_value in zip(run.learner_values(), run.acting_values()):
        np.testing.assert_array_equal(acting_value, learner_value)
    learner_policy, ghost_policy = run.policies(states)
    np.testing.assert_allclose(ghost_policy, learner_policy, rtol=1e-6)

    first = run.learner_values()
    run.perturb_learner(rng)  # the learner trains on; the ghost keeps playing the snapshot
    learner_policy, ghost_policy = run.policies(states)
    assert not np.allclose(ghost_policy, learner_policy)
    for snapshot_value, acting_value in zip(first, run.acting_values()):
        np.testing.assert_array_equal(acting_value, snapshot_value)

    run.ghost.take_snapshot()  # slot 1
    run.ghost.select_slot(1)
    np.testing.assert_allclose(*run.policies(states), rtol=1e-6)
    run.ghost.select_slot(0)
    for snapshot_value, acting_value in zip(first, run.acting_values()):
        np.testing.assert_array_equal(acting_value, snapshot_value)


def test_the_pool_holds_the_acting_weights_only_and_matches_them_by_name():
    run = Run()
    names = sorted(v.op.name[len(GHOST + "/snapshot_pool/"):] for v in run.ghost.pool.variables)
    assert "log_sigma" in names and "normalizer/running_mean" in names and "policy_head/kernel" in names
    assert not any(n.startswith("value") or "Adam" in n for n in names), names
    assert all(v not in tf.trainable_variables() for v in run.ghost.pool.variables)
    assert all(v.shape[0] == 3 for v in run.ghost.pool.variables)


@pytest.mark.slow
def test_many_snapshot_cycles_leave_the_graph_unchanged():
    run = Run(recurrent=True)
    ops_after_setup = len(run.graph.get_operations())
    rng = np.random.default_rng(1)
    slots = set()
    for t in range(60):
        done = [t % 7 == 6] * 2
        info = step_infos(learner_rewards=[0.1, -0.1], ghost_rewards=[-0.1, 0.1], learner_done=done,
                          ghost_done=done, seed=t, memory=8)
        actions, memories, values, outputs = run.ghost.take_action(info)
        assert actions.shape == (2, 2) and memories.shape == (2, 8) and values is None
        learn_from_step(run.ghost, info, info, outputs)
        run.ghost.write_summary(0)
        run.ghost.increment_step(2)
        slots.add(run.ghost.current_slot)
        if t % 20 == 19:
            run.perturb_learner(rng)
            end_episodes(run.ghost)
    assert len(run.graph.get_operations()) == ops_after_setup
    assert run.ghost.n_snapshots == 1 + 120 // 4  # before the first action, then every new_model_freq steps
    assert run.ghost.filled_slots == 3 and slots == {0, 1, 2}


def test_no_snapshots_without_training_after_the_first():
    run = Run(training=False)
    for t in range(10):
        run.ghost.take_action(step_infos(seed=t))
        run.ghost.increment_step(2)
    assert run.ghost.n_snapshots == 1


@pytest.mark.slow
def test_saver_round_trip_restores_the_pool_and_its_bookkeeping(tmp_path):
    run = Run()
    rng = np.random.default_rng(2)
    run.perturb_learner(rng)
    run.ghost.take_snapshot()
    first = run.learner_values()
    run.perturb_learner(rng)
    run.ghost.take_snapshot()
    second = run.learner_values()
    run.ghost.select_slot(1)
    run.ghost.ring.record_game(1.0)
    with run.graph.as_default():  # the Saver needs graph mode, as in the controller
        path = run.saver.save(run.sess, str(tmp_path / "model.cptk"))
    state = run.ghost.get_state()

    restored = Run(finalize=False)
    restored.perturb_learner(rng)
    with restored.graph.as_default():
        restored.saver.restore(restored.sess, path)
    restored.ghost.set_state(state)
    restored.graph.finalize()
    assert restored.ghost.n_snapshots == 2 and restored.ghost.current_slot == 1
    assert restored.ghost.elo == pytest.approx(run.ghost.elo)
    for expected, acting in zip(second, restored.acting_values()):
        np.testing.assert_array_equal(acting, expected)
    restored.ghost.select_slot(0)
    for expected, acting in zip(first, restored.acting_values()):
        np.testing.assert_array_equal(acting, expected)
    restored.ghost.take_action(step_infos())
    assert restored.ghost.n_snapshots == 2  # the restored pool is used, not refilled


def test_the_ghost_rates_only_the_learner_with_its_k_factor():
    def ring():
        r = SnapshotRing(3, INITIAL_ELO, np.random.default_rng(0), k=ELO_K, rate_opponent=False)
        r.record_snapshot()
        return r

    elo = ring()
    assert elo.record_game(0.5) == pytest.approx(0.0)
    assert elo.record_game(1.0) == pytest.approx(8.0) and elo.elo == pytest.approx(1208.0)  # k/2 between equals
    assert elo.elos[0] == INITIAL_ELO  # the snapshot's rating stays
    elo.elos[0] = 1400.0
    before = elo.elo
    assert elo.record_game(0.0) < 0 and elo.elo < before
    upset = ring()
    upset.elos[0] = 1400.0
    assert upset.record_game(1.0) > 8.0  # beating a stronger opponent is worth more
    assert {upset.choose_opponent() for _ in range(50)} == {0}  # the ghost never plays the latest weights


def test_episode_scores_pair_finished_episodes_and_fall_back_to_the_ghost_reward():
    # Tennis: the learner hit twice and the ghost missed the third ball (0.2 vs 0.1 - 0.1).
    assert GhostTrainer.episode_scores([0.0], [0.2]) == [1.0]
    assert GhostTrainer.episode_scores([0.3, 0.1], [-0.1 + 0.2, 0.1]) == [0.0, 0.5]
    assert GhostTrainer.episode_scores([-0.1, 0.2, 0.0], []) == [1.0, 0.0, 0.5]


def test_games_update_the_rating_and_draw_a_new_snapshot(tmp_path):
    run = Run(ghost_overrides={"summary_freq": 4, "summary_path": str(tmp_path / "ghost")})
    run.ghost.take_action(step_infos())
    run.ghost.take_snapshot()  # two filled slots
    before = step_infos()
    for t in range(5):  # the learner wins every rally
        rally = step_infos(learner_rewards=[0.1, 0.1], ghost_rewards=[0.0, 0.0], seed=t)
        learn_from_step(run.ghost, before, rally, None)
        before = step_infos(learner_rewards=[0.0, 0.1], ghost_rewards=[-0.1, -0.1],
                            learner_done=[True, True], ghost_done=[True, True], seed=t)
        learn_from_step(run.ghost, rally, before, None)
    assert run.ghost.elo > 1200.0
    assert run.ghost.games == [1.0] * 10
    run.ghost.increment_step(4)
    run.ghost.write_summary(0)
    run.ghost.close()
    tags = {value.tag: value.simple_value
            for path in glob.glob(os.path.join(str(tmp_path / "ghost"), "events.*"))
            for event in tf.train.summary_iterator(path) for value in event.summary.value}
    assert tags["Self-play/ELO"] == pytest.approx(run.ghost.elo)
    assert tags["Self-play/learner_win_rate"] == 1.0
    assert tags["Environment/Cumulative Reward"] == pytest.approx(-0.1)
    assert run.ghost.games == []


def test_a_reset_drops_the_unfinished_games():
    run = Run()
    run.ghost.take_action(step_infos())
    # The ghost leads the game in progress (0.5 vs 0.1) when the environment resets.
    learn_from_step(run.ghost, step_infos(), step_infos(learner_rewards=[0.1, 0.1], ghost_rewards=[0.5, 0.5]), None)
    end_episodes(run.ghost)
    learn_from_step(run.ghost, step_infos(seed=1),
                    step_infos(learner_rewards=[0.1, 0.1], ghost_rewards=[-0.1, -0.1],
                               learner_done=[True, True], ghost_done=[True, True], seed=2), None)
    assert run.ghost.stats["cumulative_reward"] == [-0.1, -0.1]  # the new games only
    assert run.ghost.games == [1.0, 1.0]


def test_the_ghost_is_not_a_learner_and_exports_nothing():
    run = Run()
    assert GhostTrainer.is_learner is False
    assert still_trains(run.ghost) is False and run.ghost.graph_scope is None
    state = run.ghost.get_state()
    assert {"step", "n_snapshots", "current_slot", "elo", "slot_ratings"} <= set(state)


@pytest.mark.slow
def test_a_ghost_of_a_non_ppo_brain_or_a_mismatched_memory_is_refused():
    with pytest.raises(UnityTrainerException,
                       match="trained by the 'imitation' trainer.*only copy a brain trained by the 'ppo'"):
        Run(ghost_overrides={"original_brain_parameters": learner_parameters(trainer="imitation")})
    brains = {LEARNER: make_brain(LEARNER, memory=8), GHOST: make_brain(GHOST, memory=4)}
    with tf.Graph().as_default() as graph:
        sess = tf.Session(graph=graph)
        original = learner_parameters(use_recurrent=True)
        PPOTrainer(sess, brains, LEARNER, original, True)
        with pytest.raises(UnityTrainerException, match="memorySize is 8, but its own memorySize is 4"):
            GhostTrainer(sess, brains, GHOST, ghost_parameters(original), True)


SCENE = {
    LEARNER: make_brain(LEARNER),
    GHOST: make_brain(GHOST),
    "Teacher": make_brain("Teacher"),
    "Small": make_brain("Small", state_size=6),
}


@pytest.mark.parametrize("copied, external, match", [
    (GHOST, [LEARNER, GHOST], "brain 'ghost-TennisBrain', key 'brain_to_copy': a ghost cannot copy itself"),
    ("Nowhere", [LEARNER, GHOST], "key 'brain_to_copy': the brain 'Nowhere' is not in the environment"),
    ("Teacher", [LEARNER, GHOST],
     "key 'brain_to_copy': the brain 'Teacher' is not External.*Name an External brain: TennisBrain"),
    ("Small", [LEARNER, GHOST, "Small"], "key 'brain_to_copy':.*differ.*state size: 8 vs 6"),
], ids=["itself", "absent", "not external", "other spaces"])
def test_check_environment_errors(copied, external, match):
    with pytest.raises(TrainerConfigError, match=match):
        GhostTrainer.check_environment(GHOST, {"brain_to_copy": copied}, SCENE, external)
    GhostTrainer.check_environment(GHOST, {"brain_to_copy": LEARNER}, SCENE, [LEARNER, GHOST])


def test_yaml_ghost_of_a_broadcast_brain_fails_before_training(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent("""
        ghost-TennisBrain:
            is_ghost: true
            brain_to_copy: Teacher
            new_model_freq: 1.0e4
            max_num_models: 5
    """))
    config = load_trainer_config(str(path), load_registry())
    params = config.settings_for(GHOST).parameters
    assert params["trainer"] == "ghost" and params["new_model_freq"] == 10000
    with pytest.raises(TrainerConfigError,
                       match="config.yaml: brain 'ghost-TennisBrain', key 'brain_to_copy'.*not External"):
        config.settings_for_environment(SCENE, [LEARNER, GHOST])


def test_the_self_play_names_that_moved_are_still_importable_from_their_old_modules():
    """Self-play's settings and the snapshot actor live beside the trainer base and the other settings;
    a script that imported them from trainers.ghost keeps working, and gets the same objects."""
    from trainers.ghost import self_play, snapshot
    from trainers.ghost import trainer as ghost_trainer
    from trainers.settings import self_play as settings
    from trainers.trainer import snapshot_actor

    for name in ("SelfPlaySettings", "check_team_behavior", "self_play_markdown", "validate_self_play"):
        assert getattr(self_play, name) is getattr(settings, name)
    assert self_play.check_team_behaviour is settings.check_team_behavior  # its first spelling
    for name in ("SnapshotActor", "acts_from_snapshots"):
        assert getattr(snapshot, name) is getattr(snapshot_actor, name)
    assert ghost_trainer.SnapshotPool is snapshot.SnapshotPool
    assert ghost_trainer.variables_read_by is snapshot.variables_read_by
