"""What a trainer keeps stays bounded however long it acts: a run that goes on after one of its
trainers stopped learning (past its ``max_steps`` while another brain trains, a timed soak, or
acting without ``--train``) must not let that trainer's update buffer grow with every step.

The trainer here is the on-policy base with no network, fed scripted ``BrainInfo``s directly, so
thousands of steps cost milliseconds.
"""
import numpy as np

from runner.controller import still_trains
from tests.fake_env import collector_of, learn_from_step
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.on_policy import OnPolicyTrainer
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import BrainParameters

BRAIN = {"stateSize": 2, "actionSize": 1, "memorySize": 0, "cameraResolutions": [],
         "actionDescriptions": [], "actionSpaceType": 1, "stateSpaceType": 1}
AGENTS = 4
EPISODE = 10  # every agent's episode ends after this many steps
BUFFER_SIZE = 40


class NoNetworkTrainer(OnPolicyTrainer):
    """The on-policy base with no network: the state is the stored field, every update is a no-op."""

    def __init__(self, max_steps: float, training: bool = True):
        brains = {"B": BrainParameters("B", BRAIN)}
        super().__init__(None, brains, "B", {"time_horizon": 1000, "buffer_size": BUFFER_SIZE,
                                             "max_steps": max_steps, "summary_freq": 10 ** 9}, training)
        self.update_fields = ["obs", "rewards"]
        self.updates = 0

    def act(self, info: BrainInfo) -> PolicyOutput:
        return PolicyOutput(actions=np.zeros((len(info.agents), 1), np.float32), fields={"obs": info.states})

    def process_trajectory(self, trajectory, value_next) -> None:
        pass

    def update(self, batch) -> None:
        self.updates += 1


def info_at(step: int) -> BrainInfo:
    states = np.full((AGENTS, 2), step, dtype=np.float32)
    return BrainInfo([], states, np.zeros((AGENTS, 0), np.float32), [1.0] * AGENTS, list(range(AGENTS)),
                     [step % EPISODE == 0] * AGENTS, np.zeros((AGENTS, 1), np.float32))


def run(trainer: NoNetworkTrainer, steps: int, train: bool = True) -> None:
    """The controller's loop for one brain: act, step, collect, update when due, count the steps."""
    info = {"B": info_at(0)}
    for step in range(1, steps + 1):
        _, _, _, out = trainer.take_action(info)
        new = {"B": info_at(step)}
        learn_from_step(trainer, info, new, out)
        if train and still_trains(trainer) and trainer.is_ready_update():
            trainer.update_model()
        trainer.increment_step(AGENTS)
        info = new


def test_a_trainer_past_max_steps_keeps_no_growing_update_buffer():
    trainer = NoNetworkTrainer(max_steps=100 * AGENTS)
    run(trainer, 2000 + EPISODE // 2)
    assert not still_trains(trainer) and trainer.updates > 0  # it learned, then stopped
    assert trainer.update_buffer_steps() < BUFFER_SIZE
    trajectories = collector_of(trainer).trajectories  # mid-episode: every agent's is in progress
    assert len(trajectories) == AGENTS and all(len(t["obs"]) < EPISODE for t in trajectories.values())


def test_a_trainer_that_only_acts_keeps_no_update_buffer():
    trainer = NoNetworkTrainer(max_steps=1e9, training=False)
    run(trainer, 500, train=False)
    assert trainer.update_buffer_steps() == 0
    assert trainer.stats["cumulative_reward"] == [float(EPISODE)] * (500 // EPISODE * AGENTS)  # episodes counted


def test_a_learning_trainer_still_moves_its_trajectories_to_the_update_buffer():
    trainer = NoNetworkTrainer(max_steps=1e9)
    run(trainer, EPISODE, train=False)
    assert trainer.update_buffer_steps() == EPISODE * AGENTS
