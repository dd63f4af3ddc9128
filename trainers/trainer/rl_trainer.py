"""What the on- and off-policy bases share: acting, pairing and episode stats.

A trainer (built-in or from a plugin package) is a ``trainers.trainer.base.Trainer``. Most of what a
``Trainer`` must do is the same for every algorithm of a family: turn API-2 ``BrainInfo`` pairs
into per-agent transitions (``trainers.trainer.trajectory``), count episodes, decide when to
learn. The bases do that once, so an algorithm only writes its graph and its learning step:

``OnPolicyTrainer`` (``trainers.trainer.on_policy``: PPO, A2C, ...)
    collects one trajectory per agent; cuts it when the agent is done (value 0 after it) or when
    it reaches ``time_horizon`` steps (bootstrapped with ``bootstrap_values``); lets the subclass
    add returns/advantages (``process_trajectory``); moves it to the update buffer; once that holds
    ``buffer_size`` steps, hands it over as arrays (``update``) and empties it.

``OffPolicyTrainer`` (``trainers.trainer.off_policy``: SAC, DQN, ...)
    stores every transition in a ``ReplayBuffer`` of ``buffer_size`` transitions (the oldest are
    overwritten); after ``learning_starts`` transitions, runs ``gradient_steps`` calls of
    ``update(minibatch)`` per ``train_every`` new transitions, each on ``batch_size`` transitions
    sampled uniformly; keeps target networks in step with hard or soft (``tau``) updates whose
    assign ops are built once, in ``setup``.

Hooks a subclass implements (``act`` for both; ``bootstrap_values``, ``process_trajectory`` and
``update`` for on-policy; ``update`` for off-policy) are listed on each class. Everything is built
in ``setup`` under ``with self.build_scope():`` (the brain's variable scope of the run's one
graph); the controller finalizes the graph before the loop, so an op created later fails loudly.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Iterable, Iterator, Mapping, Optional, Tuple

import numpy as np

from trainers.trainer.base import Trainer, UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import PolicyOutput, Waiting, agent_pairs, with_late_decisions


def linear_schedule(start: float, end: float, step: float, duration: float) -> float:
    """``start`` at step 0, moving linearly to ``end`` at ``duration``, ``end`` afterwards."""
    fraction = min(max(step / duration, 0.0), 1.0) if duration > 0 else 1.0
    return start + (end - start) * fraction


class RLTrainer(Trainer):
    """What both bases share: acting, pairing, episode stats.

    Subclasses implement ``act``. ``take_action`` calls it (the controller never calls it with an
    empty brain, but a direct caller may), and the bases' ``add_experiences`` hand its ``fields``
    to their storage. ``cumulative_reward`` and ``episode_length`` are recorded per finished
    episode, which is what the console line and the curriculum read.
    """

    #: ``[N, memorySize]`` width of the memories ``act`` returns; None for non-recurrent policies.
    memory_size: Optional[int] = None

    def setup(self) -> None:
        super().setup()
        self.is_continuous = self.brain.action_space_type == "continuous"
        self.cumulative_rewards: Dict[Any, float] = {}
        self.episode_steps: Dict[Any, int] = {}
        #: The decisions not answered yet (see ``trajectory.with_late_decisions``).
        self._waiting: Waiting = {}

    # ------------------------------------------------------------------ hooks
    def act(self, info: BrainInfo) -> PolicyOutput:
        """Decide for every agent of ``info`` (at least one) with the graph built in ``setup``.

        Explore when ``self.is_training``; act as the exported graph would otherwise.
        """
        raise UnityTrainerException(
            f"{type(self).__name__} must implement act(info) -> PolicyOutput (see trainers.trainer.rl_trainer).")

    # ------------------------------------------------------------------ Trainer interface
    def take_action(self, all_info: Mapping[str, BrainInfo]
                    ) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray, Any]:
        """``act`` on this brain's agents; returns ``(sent, memories, values, PolicyOutput)``, where
        ``sent`` is ``act``'s actions under the brain's action contract."""
        info = all_info[self.brain_name]
        n = len(info.agents)
        if n == 0:
            empty = np.zeros((0, self.brain.action_width), dtype=np.float32)
            memories = None if self.memory_size is None else np.zeros((0, self.memory_size), np.float32)
            return empty, memories, np.zeros(0), None
        out = self.act(info)
        out.sent = self.environment_actions(out.actions)
        values = out.values if out.values is not None else np.zeros(n, dtype=np.float32)
        return out.sent, out.memories, values, out

    def _pairs(self, info: Mapping[str, BrainInfo],
               next_info: Mapping[str, BrainInfo]) -> Iterator[Tuple[int, int, Any]]:
        """``(i, j, agent)`` for each agent of this brain in both infos (``trajectory.agent_pairs``)."""
        return agent_pairs(info[self.brain_name], next_info[self.brain_name])

    def _with_late_decisions(self, info: Mapping[str, BrainInfo], next_info: Mapping[str, BrainInfo],
                             outputs: Optional[PolicyOutput]) -> Tuple[Mapping[str, BrainInfo], Optional[PolicyOutput]]:
        """``info``/``outputs`` extended with the decisions answered only now (``trajectory.with_late_decisions``)."""
        if outputs is None:
            return info, outputs
        current, extended_outputs = with_late_decisions(info[self.brain_name], next_info[self.brain_name],
                                                        outputs, self._waiting)
        if extended_outputs is outputs:
            return info, outputs
        return {**info, self.brain_name: current}, extended_outputs

    def _count_reward(self, agent: Any, reward: float) -> None:
        self.cumulative_rewards[agent] = self.cumulative_rewards.get(agent, 0.0) + reward
        self.episode_steps[agent] = self.episode_steps.get(agent, 0) + 1

    def _close_episode(self, agent: Any) -> None:
        """Record the episode the agent just finished (if it took a step in it)."""
        if agent in self.episode_steps:
            self.add_stat("cumulative_reward", self.cumulative_rewards.pop(agent))
            self.add_stat("episode_length", self.episode_steps.pop(agent))

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """After an environment reset: the episodes of ``agents`` (None: all) are gone without a result."""
        if agents is None:
            self.cumulative_rewards.clear()
            self.episode_steps.clear()
            self._waiting.clear()
            return
        for agent in agents:
            self.cumulative_rewards.pop(agent, None)
            self.episode_steps.pop(agent, None)
            self._waiting.pop(agent, None)


__all__ = ["RLTrainer", "linear_schedule"]
