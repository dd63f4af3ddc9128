"""The on-policy base: per-agent trajectories, cut at a done or at ``time_horizon``, learnt from once.

See ``trainers.trainer.rl_trainer`` for how the bases divide the work, and
``trainers.trainer.trajectory`` for how two steps pair into transitions.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, Hashable, Iterable, List, Mapping, Optional, Union

import numpy as np

from trainers.buffer import AgentBuffer, Buffer
from trainers.trainer.base import COMMON_HYPERPARAMETERS, Param, UnityTrainerException, positive
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.reward_signal_fields import RewardSignalFields
from trainers.trainer.rl_trainer import RLTrainer
from trainers.trainer.trajectory import PolicyOutput, bootstrap_value, step_rewards, trajectory_ends

ON_POLICY_HYPERPARAMETERS: Dict[str, Param] = {
    **COMMON_HYPERPARAMETERS,
    "buffer_size": Param(int, 10240, check=(positive, "> 0"), doc="agent steps collected before each update"),
    "time_horizon": Param(int, 128, check=(positive, "> 0"),
                          doc="steps after which an unfinished trajectory is cut and bootstrapped"),
}


class OnPolicyTrainer(RewardSignalFields, RLTrainer):
    """Collects per-agent trajectories and hands ``buffer_size`` steps at a time to ``update``.

    Hooks (all called with the graph already finalized; none may create ops):

    * ``act(info) -> PolicyOutput``: its ``fields`` are appended to each agent's trajectory,
      with the ``rewards`` this base adds;
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
        self.training_buffer = Buffer()
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

    # ------------------------------------------------------------------ collecting
    def add_experiences(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo],
                        outputs: Optional[PolicyOutput]) -> None:
        """One transition per agent present in both infos: ``outputs.fields`` row, and the reward
        ``next_info`` reports for the action taken from ``info``'s state."""
        if outputs is None:
            return
        info, outputs = self._with_late_decisions(info, next_info, outputs)
        rewards = step_rewards(next_info[self.brain_name])
        signal_fields = self._signal_input_fields(info, next_info) if self.reward_signals else None
        for i, j, agent in self._pairs(info, next_info):
            trajectory = self.training_buffer[agent]
            for key, values in outputs.fields.items():
                trajectory[key].append(values[i])
            if signal_fields is not None:
                for key, (values, row) in signal_fields.items():
                    trajectory[key].append(values[i if row == "current" else j])
            reward = float(rewards[j])
            trajectory["rewards"].append(reward)
            self._count_reward(agent, reward)

    def process_experiences(self, info: Mapping[str, BrainInfo]) -> None:
        """Move finished (done) and long (``time_horizon``) trajectories to the update buffer.

        Trajectories of done agents move first, in agent order, then the interrupted ones (an
        episode cut by its max step, bootstrapped from its last observation), then the cut ones;
        each group's bootstrap values come from one ``bootstrap_values`` call.
        """
        current = info[self.brain_name]
        buffer = self.training_buffer
        ends = trajectory_ends(current, lambda agent: len(buffer[agent]["rewards"]) if agent in buffer else 0,
                               self.settings.time_horizon)
        for agent in ends.finished:
            self._finish_trajectory(agent, 0.0)
        for agent in ends.done:
            self._close_episode(agent)
        if ends.interrupted:
            # The value of the episode's last observation (the terminal info's row when the agent
            # already reported its next episode's first observation, modern protocol).
            source = current.terminal_info if current.terminal_info is not None else current
            where = {agent: r for r, agent in enumerate(source.agents)}
            values = self.bootstrap_values(source, np.asarray([where[a] for a in ends.interrupted]))
            for k, agent in enumerate(ends.interrupted):
                self._finish_trajectory(agent, bootstrap_value(values, k))
        if ends.cut:
            values = self.bootstrap_values(current, np.asarray(ends.cut))
            for k, j in enumerate(ends.cut):
                self._finish_trajectory(current.agents[j], bootstrap_value(values, k))

    def _finish_trajectory(self, agent: Any, value_next: Union[float, Dict[str, float]]) -> None:
        """Move the agent's trajectory to the update buffer, or drop it when no update will come.

        A trainer that acts without learning (not training, or past its ``max_steps`` while
        another brain keeps the run going) never empties the update buffer, so it must not fill it.
        """
        trajectory = self.training_buffer[agent]
        if self.is_training and self.should_still_train:
            self.process_trajectory(trajectory, value_next)
            self.training_buffer.append_update_buffer(
                agent, key_list=self.update_fields,
                training_length=self.sequence_length if self.sequence_length > 1 else None,
            )
        trajectory.reset_agent()

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """After an environment reset: drop the trajectories in progress of ``agents`` (None: all),
        whose continuation is gone; the other agents' trajectories go on."""
        agents = list(self.training_buffer.keys()) if agents is None else list(agents)
        for agent in agents:
            if agent in self.training_buffer:
                self.training_buffer[agent].reset_agent()
        super().end_episode(agents)

    # ------------------------------------------------------------------ updating
    def update_buffer_steps(self) -> int:
        """Agent steps in the update buffer (padding included when moved as sequences)."""
        sizes = [len(values) for values in self.training_buffer.update_buffer.values()]
        return max(sizes, default=0) * self.sequence_length

    def is_ready_update(self) -> bool:
        return self.update_buffer_steps() >= self.settings.buffer_size

    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field of ``update_fields``."""
        update_buffer = self.training_buffer.update_buffer
        return {key: np.asarray(update_buffer[key]) for key in self.update_fields}

    def update_model(self) -> None:
        """``update`` on the whole update buffer, then empty it (on-policy data is used once)."""
        self.update(self.update_arrays())
        self.training_buffer.reset_update_buffer()


__all__ = ["ON_POLICY_HYPERPARAMETERS", "OnPolicyTrainer"]
