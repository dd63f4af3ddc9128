"""The on-policy base: per-agent trajectories, cut at a done or at ``time_horizon``, learnt from once.

See ``trainers.trainer.rl_trainer`` for how the bases divide the work, and
``runner.collector`` for how steps become trajectories.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Dict, List, Tuple, Union

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.trainer.base import COMMON_HYPERPARAMETERS, Param, UnityTrainerException, positive
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.reward_signal_fields import RewardSignalFields
from trainers.trainer.rl_trainer import RLTrainer
from trainers.trainer.trajectory import Collection, Experience, Trajectory, bootstrap_value

ON_POLICY_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "buffer_size": Param(int, 10240, check=(positive, "> 0"), doc="agent steps collected before each update"),
    "time_horizon": Param(int, 128, check=(positive, "> 0"),
                          doc="steps after which an unfinished trajectory is cut and bootstrapped"),
}


class OnPolicyTrainer(RewardSignalFields, RLTrainer):
    """Learns from per-agent trajectories, ``buffer_size`` steps at a time, in ``update``.

    Hooks (all called with the graph already finalized; none may create ops):

    * ``act(info) -> PolicyOutput``: the collector appends its ``fields`` to each agent's
      trajectory, with the ``rewards``;
    * ``bootstrap_values(info, rows) -> [len(rows)]``: the value of the current state of the
      agents at ``rows`` of ``info``, for trajectories cut at ``time_horizon``;
    * ``process_trajectory(trajectory, value_next)``: add fields computed from the whole
      trajectory, e.g. ``trainers.returns.add_gae_fields``; ``value_next`` is 0.0 after a done;
    * ``update(batch)``: learn from the update buffer, given as one array per field of
      ``update_fields`` (``[steps, ...]``, or ``[sequences, sequence_length, ...]`` when
      ``sequence_length > 1``); the base empties the buffer afterwards.

    Attributes a subclass sets in ``setup``: ``update_fields`` (the trajectory fields moved to
    the update buffer) and, for recurrent policies, ``sequence_length`` and ``memory_size``.
    Reward signals: see ``RewardSignalFields``.
    """

    hyperparameters: ClassVar[Dict[str, Param]] = ON_POLICY_HYPERPARAMETERS
    #: > 1: trajectories move to the update buffer as sequences of this many steps (first one left-padded).
    sequence_length: int = 1

    def setup(self) -> None:
        super().setup()
        #: The trajectories' steps since the last update (``update_fields`` of each).
        self.update_buffer = AgentBuffer()
        self.update_fields: List[str] = []

    # ------------------------------------------------------------------ hooks
    def bootstrap_values(self, info: BrainInfo, rows: np.ndarray) -> np.ndarray:
        """V(s) of the agents at ``rows`` of ``info``; one batched ``sess.run`` is expected."""
        raise UnityTrainerException(
            f"{type(self).__name__} must implement bootstrap_values(info, rows) to cut trajectories at time_horizon.")

    def process_trajectory(self, trajectory: AgentBuffer, value_next: float) -> None:
        """Add the fields that need the whole trajectory (returns, advantages) before it moves."""
        raise UnityTrainerException(
            f"{type(self).__name__} must implement process_trajectory(trajectory, value_next), "
            "e.g. with trainers.returns.add_gae_fields.")

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """Learn from the update buffer (one array per field of ``update_fields``)."""
        raise UnityTrainerException(f"{type(self).__name__} must implement update(batch).")

    # ------------------------------------------------------------------ learning from trajectories
    @property
    def collection(self) -> Collection:
        """Trajectories cut at ``time_horizon``, with the fields of ``step_fields`` in each step."""
        return Collection(horizon=self.settings.time_horizon, step_fields=self.step_fields)

    def step_fields(self, before: BrainInfo, after: BrainInfo) -> Dict[str, Tuple[Any, str]]:
        """The raw inputs the intrinsic reward signals read (none without them)."""
        return self._signal_input_fields(before, after) if self.reward_signals else {}

    def process_experience(self, experience: Experience) -> None:
        """Record the ended episodes; move each ended trajectory to the update buffer.

        Trajectories move in the collector's order (finished, interrupted, cut); the bootstrap
        values of those that need one come from one ``bootstrap_values`` call per batch they
        were taken from.
        """
        self._record_episodes(experience.episodes)
        values = self._bootstrap_values(experience.trajectories)
        for trajectory in experience.trajectories:
            self._finish_trajectory(trajectory, values.get(id(trajectory), 0.0))

    def _bootstrap_values(self, trajectories: List[Trajectory]) -> Dict[int, Union[float, Dict[str, float]]]:
        """``id(trajectory)`` -> the value after its last step, for the trajectories bootstrapped."""
        groups: Dict[int, Tuple[BrainInfo, List[Tuple[Trajectory, int]]]] = {}
        for trajectory in trajectories:
            if trajectory.bootstrap is not None:
                info, row = trajectory.bootstrap
                groups.setdefault(id(info), (info, []))[1].append((trajectory, row))
        values: Dict[int, Union[float, Dict[str, float]]] = {}
        for info, members in groups.values():
            estimates = self.bootstrap_values(info, np.asarray([row for _, row in members]))
            for k, (trajectory, _) in enumerate(members):
                values[id(trajectory)] = bootstrap_value(estimates, k)
        return values

    def _finish_trajectory(self, trajectory: Trajectory, value_next: Union[float, Dict[str, float]]) -> None:
        """Move the trajectory to the update buffer, or drop it when no update will come.

        A trainer that acts without learning (not training, or past its ``max_steps`` while
        another brain keeps the run going) never empties the update buffer, so it must not fill it.
        """
        if self.is_training and self.step < self.get_max_steps:
            self.process_trajectory(trajectory.steps, value_next)
            trajectory.steps.append_to(
                self.update_buffer, key_list=self.update_fields,
                training_length=self.sequence_length if self.sequence_length > 1 else None, owner=trajectory.agent)

    # ------------------------------------------------------------------ updating
    def update_buffer_steps(self) -> int:
        """Agent steps in the update buffer (padding included when moved as sequences)."""
        sizes = [len(values) for values in self.update_buffer.values()]
        return max(sizes, default=0) * self.sequence_length

    def is_ready_update(self) -> bool:
        return self.update_buffer_steps() >= self.settings.buffer_size

    #: Whether ``act`` changes nothing ``process_experience`` reads, bootstrap values aside, and
    #: reads nothing it changes but the weights an update writes (``experience_can_wait``). False
    #: here, as ``act`` is a subclass's; ``PPOTrainer`` says when its own are.
    acts_apart_from_experience: bool = False
    #: Whether ``act`` moves what ``bootstrap_values`` reads (a running normaliser): then a step
    #: whose experience may need a bootstrap value does not wait.
    bootstrap_reads_acting: bool = False

    def experience_can_wait(self, steps: int, deciding: int, bootstraps: bool) -> bool:
        """Yes when acting and this experience are apart (``acts_apart_from_experience``, and no
        bootstrap value that acting moves), and the experience can neither fill the update buffer
        (an update comes before the next action) nor make the step count reach a summary or ``max_steps``."""
        if not self.acts_apart_from_experience or self.sequence_length > 1:
            return False
        if bootstraps and self.bootstrap_reads_acting:
            return False
        return self.update_buffer_steps() + steps < self.settings.buffer_size and self._count_stays_short(deciding)

    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field of ``update_fields``."""
        update_buffer = self.update_buffer
        return {key: np.asarray(update_buffer[key]) for key in self.update_fields}

    def take_update_batch(self) -> Dict[str, np.ndarray]:
        """The update buffer as ``update`` reads it; the buffer is emptied (on-policy data is used once)."""
        batch = self.update_arrays()
        self.update_buffer.reset_agent()
        return batch

    def update_model(self) -> None:
        """``update`` on the whole update buffer, which is emptied."""
        self.update(self.take_update_batch())

    def prepare_update(self) -> Callable[[], None]:
        """The batch is taken (and the buffer emptied) now; ``update`` on it is the work returned.

        While it runs the trainer keeps acting with the weights it has, so the experience gathered
        meanwhile comes from the policy before the update: an importance ratio against the stored
        log-probabilities (PPO's) stays correct for it.
        """
        batch = self.take_update_batch()
        return lambda: self.update(batch)


__all__ = ["ON_POLICY_HYPERPARAMETERS", "OnPolicyTrainer"]
