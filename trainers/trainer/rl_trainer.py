"""What the on- and off-policy bases share: acting, and learning from the collector's experience.

A trainer (built-in or from a plugin package) is a ``trainers.trainer.base.Trainer``. Most of what a
``Trainer`` must do is the same for every algorithm of a family: learn from the collector's
trajectories or transitions (``runner.collector``), record episodes, decide when to
learn. The bases do that once, so an algorithm only writes its graph and its learning step:

``OnPolicyTrainer`` (``trainers.trainer.on_policy``: PPO, A2C, ...)
    receives one trajectory per agent, ended when the agent is done (value 0 after it) or cut at
    ``time_horizon`` steps (bootstrapped with ``bootstrap_values``); lets the subclass add
    returns/advantages (``process_trajectory``); moves it to the update buffer; once that holds
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

from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from trainers.trainer.base import Trainer, TrainerConfigError, UnityTrainerException, check_batch_fits
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import PolicyOutput


def linear_schedule(start: float, end: float, step: float, duration: float) -> float:
    """``start`` at step 0, moving linearly to ``end`` at ``duration``, ``end`` afterwards."""
    fraction = min(max(step / duration, 0.0), 1.0) if duration > 0 else 1.0
    return start + (end - start) * fraction


def check_policy_settings(brain_name: str, params: Mapping[str, Any], consequence: str) -> Dict[str, Any]:
    """The checks PPO and SAC share, as a new block: a minibatch that fits the buffer
    (``consequence`` says what else could not work); a memory only for a recurrent policy, and a
    sequence that fits a minibatch. The nested blocks were checked where they were read, by their
    declarations (``Param.block``)."""
    checked = dict(params)
    check_batch_fits(brain_name, checked, consequence)
    if checked["memory_size"] and not checked["use_recurrent"]:
        raise TrainerConfigError(
            f"brain '{brain_name}', key 'memory_size': {checked['memory_size']} sizes a memory, but use_recurrent "
            "is false, so the policy has none. Set use_recurrent: true, or remove memory_size.")
    if checked["use_recurrent"] and checked["sequence_length"] > checked["batch_size"]:
        raise TrainerConfigError(
            f"brain '{brain_name}', key 'sequence_length': {checked['sequence_length']} is longer than "
            f"batch_size {checked['batch_size']}; a minibatch must hold at least one whole sequence.")
    return checked


class RLTrainer(Trainer):
    """What both bases share: acting.

    Subclasses implement ``act``. ``take_action`` calls it (the controller never calls it with an
    empty brain, but a direct caller may); the collector stores its ``fields`` with each step.
    """

    #: ``[N, memorySize]`` width of the memories ``act`` returns; None for non-recurrent policies.
    memory_size: Optional[int] = None

    def setup(self) -> None:
        super().setup()
        self.is_continuous = self.brain.action_space_type == "continuous"

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
        out.sent = self._environment_actions(out.actions)
        values = out.values if out.values is not None else np.zeros(n, dtype=np.float32)
        return out.sent, out.memories, values, out


__all__ = ["RLTrainer", "linear_schedule"]
