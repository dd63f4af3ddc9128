"""What the off-policy base stores for a step: the state reached, and whether a target may bootstrap.

An episode that ended is reached at its last observation where the environment sends it (the
modern protocol's terminal steps); one cut by its max step is not terminal (``dones`` 0), one that
finished is (``dones`` 1); API-2 sends no last observation, so there the next episode's first
observation is stored, masked by ``dones``. The trainer has no network: only the replay is read.
"""
import numpy as np

from tests.fake_env import learn_from_step
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.off_policy import OffPolicyTrainer
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import BrainParameters

BRAIN = {"stateSize": 1, "actionSize": 1, "memorySize": 0, "cameraResolutions": [], "actionDescriptions": [],
         "actionSpaceType": 1, "stateSpaceType": 1}


class ReplayOnly(OffPolicyTrainer):
    def __init__(self):
        super().__init__(None, {"B": BrainParameters("B", BRAIN)}, "B",
                         {"buffer_size": 100, "learning_starts": 100, "batch_size": 1}, True)

    def act(self, info: BrainInfo) -> PolicyOutput:
        return PolicyOutput(np.zeros((len(info.agents), 1), np.float32),
                            {"actions": np.zeros((len(info.agents), 1), np.float32)})


def info(agents, states, done=None, interrupted=None, rewards=None, terminal=None) -> BrainInfo:
    n = len(agents)
    return BrainInfo([], np.asarray(states, np.float32).reshape(n, 1), np.zeros((n, 0)), rewards or [0.0] * n,
                     list(agents), done or [False] * n, np.zeros((n, 1)), max_reached=interrupted,
                     terminal_info=terminal)


def test_an_interrupted_episode_bootstraps_from_its_last_observation_a_finished_one_does_not():
    trainer = ReplayOnly()
    before = info([1, 2, 3], [10.0, 20.0, 30.0])
    # Agents 1 and 2 ended (1 cut by its max step, 2 finished) and already asked for their next
    # decision: their rows hold the next episode's first state; the terminal rows their last.
    last = info([1, 2], [11.0, 21.0], done=[True, True], interrupted=[True, False], rewards=[0.5, 1.0])
    after = info([1, 2, 3], [100.0, 200.0, 31.0], done=[True, True, False], interrupted=[True, False, False],
                 rewards=[0.5, 1.0, 0.1], terminal=last)
    _, _, _, out = trainer.take_action({"B": before})
    learn_from_step(trainer, {"B": before}, {"B": after}, out)
    stored = trainer.replay.fields
    np.testing.assert_array_equal(stored["states"][:3, 0], [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(stored["next_states"][:3, 0], [11.0, 21.0, 31.0])
    np.testing.assert_array_equal(stored["dones"][:3], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(stored["rewards"][:3], [0.5, 1.0, 0.1])


def test_without_last_observations_an_ended_episode_is_terminal_and_masked():
    trainer = ReplayOnly()
    before = info([1, 2], [10.0, 20.0])
    after = info([1, 2], [100.0, 21.0], done=[True, False])  # API-2: the reset state, no terminal rows
    _, _, _, out = trainer.take_action({"B": before})
    learn_from_step(trainer, {"B": before}, {"B": after}, out)
    stored = trainer.replay.fields
    np.testing.assert_array_equal(stored["next_states"][:2, 0], [100.0, 21.0])
    np.testing.assert_array_equal(stored["dones"][:2], [1.0, 0.0])
