"""ImitationTrainer: the (states[t], previous_actions[t+1]) pairing, learning a teacher's mapping
(discrete and continuous), the exported graph, and the scene checks of its configuration."""
import textwrap

import numpy as np
import pytest

from runner.settings.trainer_config import load_trainer_config
from tests.fake_env import end_episodes, learn_from_step
from trainers.export.frozen_graph import freeze
from trainers.imitation.trainer import IMITATION_HYPERPARAMETERS, ImitationTrainer
from trainers.tf_utils import tf
from trainers.trainer.base import TrainerConfigError, UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.registry import load_registry
from trainers.trainer.trajectory import pair_transitions
from unityagents.brain import BrainParameters

STUDENT, TEACHER = "Student", "Teacher"
STATE_SIZE = 4


def make_brain(name, action_type=1, action_size=2, state_size=STATE_SIZE, state_type=1, cameras=()):
    return BrainParameters(name, {
        "stateSize": state_size, "actionSize": action_size, "memorySize": 0,
        "cameraResolutions": list(cameras), "actionDescriptions": [""] * action_size,
        "actionSpaceType": action_type, "stateSpaceType": state_type,
    })


def make_trainer(action_type=1, action_size=2, scope=STUDENT, training=True, **overrides):
    brains = {STUDENT: make_brain(STUDENT, action_type, action_size),
              TEACHER: make_brain(TEACHER, action_type, action_size)}
    params = {k: p.default for k, p in IMITATION_HYPERPARAMETERS.items()}
    params.update(trainer="imitation", brain_to_imitate=TEACHER, graph_scope=scope, summary_path=None,
                  batch_size=64, batches_per_epoch=10, hidden_units=32, learning_rate=3e-3, buffer_size=4096)
    params.update(overrides)
    graph = tf.Graph()
    with graph.as_default():
        sess = tf.Session(graph=graph)
        trainer = ImitationTrainer(sess, brains, STUDENT, params, training, seed=0)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    return trainer


def info(states, previous_actions, agents, done=None, rewards=None):
    n = len(agents)
    return BrainInfo([], np.asarray(states, np.float32), np.zeros((n, 0)), list(rewards or [0.0] * n),
                     list(agents), list(done or [False] * n), np.asarray(previous_actions, np.float32))


def test_pairs_states_t_with_previous_actions_t_plus_1_by_agent_id_across_dones():
    trainer = make_trainer()
    states_t = np.arange(12, dtype=np.float32).reshape(3, 4)
    # At t agent 7 was done: its state is already the first state of its next episode.
    now = info(states_t, np.full((3, 2), -9.0), agents=[5, 7, 9], done=[False, True, False])
    # At t+1 the agents come in another order, agent 9 has left, agent 11 is new, agent 5 is done
    # (its state is post-reset, but previous_actions is still what it did from states_t[0]).
    later = info(np.full((3, 4), 99.0), [[1.0, 1.5], [2.0, 2.5], [3.0, 3.5]], agents=[11, 7, 5],
                 done=[False, False, True])
    pairs = trainer.teacher_pairs(pair_transitions(now, later))
    np.testing.assert_array_equal(pairs["states"], states_t[[0, 1]])
    np.testing.assert_array_equal(pairs["actions"], [[3.0, 3.5], [2.0, 2.5]])

    learn_from_step(trainer, {TEACHER: now, STUDENT: now}, {TEACHER: later, STUDENT: later}, None)
    assert len(trainer.demonstrations) == 2
    np.testing.assert_array_equal(trainer.demonstrations.fields["actions"][:2], [[3.0, 3.5], [2.0, 2.5]])


def test_discrete_teacher_actions_become_indices_and_bad_indices_are_refused():
    trainer = make_trainer(action_type=0, action_size=3)
    now = info(np.zeros((2, 4)), [[0.0], [0.0]], agents=[1, 2])
    pairs = trainer.teacher_pairs(pair_transitions(now, info(np.zeros((2, 4)), [[2.0], [1.0]], agents=[1, 2])))
    assert pairs["actions"].dtype == np.int32 and pairs["actions"].tolist() == [2, 1]
    with pytest.raises(UnityTrainerException, match="teacher 'Teacher' executed action 3, outside 0...2"):
        trainer.teacher_pairs(pair_transitions(now, info(np.zeros((2, 4)), [[3.0], [1.0]], agents=[1, 2])))


def run_teacher(trainer, teacher, steps, n_agents=12, seed=0):
    """Feed ``steps`` environment steps of a teacher policy through the trainer as the controller would."""
    rng = np.random.default_rng(seed)
    agents = list(range(n_agents))
    states = rng.normal(size=(n_agents, STATE_SIZE))
    previous = np.asarray(teacher(states)) * 0
    for _ in range(steps):
        done = list(rng.random(n_agents) < 0.05)
        now = info(states, previous, agents, done=done)
        student_actions = trainer.take_action({STUDENT: now, TEACHER: now})[0]
        assert student_actions.shape == (n_agents, trainer.brain.action_width)
        executed = teacher(states)
        states = rng.normal(size=(n_agents, STATE_SIZE))
        later = info(states, executed, agents, done=list(rng.random(n_agents) < 0.05), rewards=[1.0] * n_agents)
        learn_from_step(trainer, {STUDENT: now, TEACHER: now}, {STUDENT: later, TEACHER: later}, None)
        if trainer.is_ready_update():
            trainer.update_model()
        trainer.increment_step(n_agents)
        previous = executed


def test_learns_a_discrete_teacher():
    trainer = make_trainer(action_type=0, action_size=STATE_SIZE)

    def teacher(states):  # the index of the largest state component
        return np.argmax(states, axis=1).reshape(-1, 1).astype(np.float32)

    run_teacher(trainer, teacher, 400)
    assert trainer.stats["loss"][-1] < 0.25 < trainer.stats["loss"][0]
    test_states = np.random.default_rng(99).normal(size=(500, STATE_SIZE)).astype(np.float32)
    actions = trainer.take_action({STUDENT: info(test_states, np.zeros((500, 1)), list(range(500)))})[0]
    assert np.mean(actions[:, 0] == teacher(test_states)[:, 0]) > 0.9
    assert trainer.stats["cumulative_reward"] and trainer.stats["teacher_reward"]


def test_learns_a_continuous_teacher():
    trainer = make_trainer(action_type=1, action_size=2, normalize=True)
    weights = np.array([[0.5, -0.3], [0.2, 0.8], [-0.6, 0.1], [0.3, 0.3]])

    def teacher(states):
        return np.clip(states @ weights, -1.0, 1.0).astype(np.float32)

    run_teacher(trainer, teacher, 400)
    assert trainer.stats["loss"][-1] < 0.02 < trainer.stats["loss"][0]
    test_states = np.random.default_rng(99).normal(size=(500, STATE_SIZE)).astype(np.float32)
    actions = trainer.take_action({STUDENT: info(test_states, np.zeros((500, 2)), list(range(500)))})[0]
    assert np.mean((actions - teacher(test_states)) ** 2) < 0.02


def test_updates_wait_for_a_full_minibatch_of_new_pairs_and_the_buffer_is_bounded():
    trainer = make_trainer(batch_size=32, buffer_size=40)
    now = info(np.zeros((12, 4)), np.zeros((12, 2)), list(range(12)))
    for expected_ready in (False, False, True):
        learn_from_step(trainer, {TEACHER: now, STUDENT: now}, {TEACHER: now, STUDENT: now}, None)
        assert trainer.is_ready_update() is expected_ready
    trainer.update_model()
    assert not trainer.is_ready_update()
    for _ in range(3):
        learn_from_step(trainer, {TEACHER: now, STUDENT: now}, {TEACHER: now, STUDENT: now}, None)
    assert len(trainer.demonstrations) == 40


def step(done, reward):
    """One step's batches: the student's agent 3 got ``reward``, the teacher's ten times it."""
    return {STUDENT: info(np.zeros((1, 4)), np.zeros((1, 2)), [3], done=[done], rewards=[reward]),
            TEACHER: info(np.zeros((1, 4)), np.zeros((1, 2)), [3], done=[done], rewards=[10 * reward])}


def test_episode_rewards_of_student_and_teacher():
    trainer = make_trainer()
    before = step(False, 0.0)
    for done, reward in ((False, 1.0), (True, 2.0)):
        after = step(done, reward)
        learn_from_step(trainer, before, after, None)
        before = after
    assert trainer.stats["cumulative_reward"] == [3.0] and trainer.stats["teacher_reward"] == [30.0]
    assert trainer.stats["episode_length"] == [2.0]


def test_a_reset_drops_the_episodes_in_progress_of_student_and_teacher():
    trainer = make_trainer()
    learn_from_step(trainer, step(False, 0.0), step(False, 5.0), None)
    end_episodes(trainer)  # the environment reset: the episode of agent 3 has no result
    learn_from_step(trainer, step(False, 0.0), step(True, 2.0), None)
    assert trainer.stats["cumulative_reward"] == [2.0] and trainer.stats["teacher_reward"] == [20.0]
    assert trainer.stats["episode_length"] == [1.0]


@pytest.mark.parametrize("action_type, dtype, width", [(0, tf.int64, 1), (1, tf.float32, 3)],
                         ids=["discrete", "continuous"])
def test_export_nodes_names_and_dtypes(action_type, dtype, width):
    trainer = make_trainer(action_type=action_type, action_size=3)
    graph = trainer.sess.graph
    assert graph.get_tensor_by_name("Student/batch_size:0").dtype == tf.int32
    assert trainer.export_nodes() == ["action"] and trainer.graph_scope == STUDENT
    frozen = freeze(trainer.sess, ["Student/action"])
    with tf.Graph().as_default() as imported:
        tf.import_graph_def(frozen, name="")
    state = imported.get_tensor_by_name("Student/state:0")
    action = imported.get_tensor_by_name("Student/action:0")
    assert state.dtype == tf.float32 and state.shape.as_list() == [None, STATE_SIZE]
    assert action.dtype == dtype and action.shape.as_list() == [None, width]
    with tf.Session(graph=imported) as sess:
        out = sess.run(action, {state: np.ones((5, STATE_SIZE), np.float32)})
    assert out.shape == (5, width)


SCENE = {
    STUDENT: make_brain(STUDENT),
    TEACHER: make_brain(TEACHER),
    "Learner": make_brain("Learner"),
    "Wide": make_brain("Wide", action_size=3),
    "Discrete": make_brain("Discrete", action_type=0),
}
EXTERNAL = [STUDENT, "Learner"]


@pytest.mark.parametrize("teacher, match", [
    (STUDENT, "brain 'Student', key 'brain_to_imitate': a brain cannot imitate itself"),
    ("Nowhere",
     "key 'brain_to_imitate': the teacher 'Nowhere' does not broadcast.*broadcasting brains: Discrete, Teacher, Wide"),
    ("Learner", "key 'brain_to_imitate': the teacher 'Learner' is External.*broadcast"),
    ("Wide", "key 'brain_to_imitate':.*differ.*action size: 2 vs 3"),
    ("Discrete", "key 'brain_to_imitate':.*differ.*action space type: 'continuous' vs 'discrete'"),
], ids=["itself", "absent", "external", "action size", "action type"])
def test_check_environment_errors(teacher, match):
    with pytest.raises(TrainerConfigError, match=match):
        ImitationTrainer.check_environment(STUDENT, {"brain_to_imitate": teacher}, SCENE, EXTERNAL)
    ImitationTrainer.check_environment(STUDENT, {"brain_to_imitate": TEACHER}, SCENE, EXTERNAL)


def test_yaml_imitation_of_a_silent_teacher_fails_before_training(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent("""
        default:
            batch_size: 1024
            buffer_size: 10240
            beta: 5.0e-3
            max_steps: 5.0e5
        Student:
            is_imitation: true
            brain_to_imitate: Teacher
            time_horizon: 64
            batch_size: 4096
            buffer_size: 2048
    """))
    with pytest.raises(TrainerConfigError, match="brain 'Student', key 'batch_size'.*cannot exceed buffer_size"):
        load_trainer_config(str(path), load_registry())
    path.write_text(path.read_text().replace("batch_size: 4096", "batch_size: 512"))
    config = load_trainer_config(str(path), load_registry())
    assert config.settings_for(STUDENT).parameters["max_steps"] == 5e5
    scene = {STUDENT: SCENE[STUDENT], "Learner": SCENE["Learner"]}
    with pytest.raises(TrainerConfigError,
                       match="config.yaml: brain 'Student', key 'brain_to_imitate': "
                             "the teacher 'Teacher' does not broadcast"):
        config.settings_for_environment(scene, [STUDENT, "Learner"])
