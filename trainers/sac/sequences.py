"""Recurrent SAC's replay: each agent's transitions in order, ``sequence_length`` at a time.

A recurrent actor and critics learn from sequences of one agent's consecutive steps, but the
off-policy base stores the transitions of all agents of a step together. ``SequenceReplay`` holds
each agent's transitions until ``sequence_length`` of them (or the end of its episode) make one
block, zero-padded at the end with ``masks`` 0 on the padding, and stores the block at once; the
replay's capacity is a multiple of ``sequence_length``, so every block stays whole and a minibatch
is ``batch_size // sequence_length`` blocks (``ReplayBuffer.sample_sequences``). Each row keeps the
memory the actor started from (``memory``) and the one it returned (``next_memory``): a block's
first ``memory`` starts the sequence, its first ``next_memory`` starts the next states' sequence.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from trainers.buffer import ReplayBuffer
from trainers.trainer.off_policy import OffPolicyTrainer
from trainers.trainer.trajectory import Transitions


class SequenceReplay(OffPolicyTrainer):
    """The sequence storage of a recurrent off-policy trainer; a trainer without ``use_recurrent``
    stores and samples single transitions as the base does. Call ``setup_sequences`` in ``setup``."""

    def setup_sequences(self, use_recurrent: bool, sequence_length: int) -> None:
        self.use_recurrent = bool(use_recurrent)
        self.sequence_length = int(sequence_length) if self.use_recurrent else 1
        #: Each agent's transitions not stored yet (fewer than ``sequence_length``).
        self._pending: Dict[Any, List[Dict[str, np.ndarray]]] = {}
        if self.use_recurrent:
            length = self.sequence_length
            self.replay = ReplayBuffer(max(self.settings.buffer_size // length, 1) * length)

    def store(self, stored: Dict[str, np.ndarray], transitions: Transitions) -> None:
        """Recurrent: each agent's transitions wait until ``sequence_length`` of them (or its episode's
        end) make one block of the replay; otherwise the base stores them at once."""
        if not self.use_recurrent:
            super().store(stored, transitions)
            return
        ended = transitions.dones
        for k, agent in enumerate(transitions.agents):
            rows = self._pending.setdefault(agent, [])
            rows.append({key: values[k] for key, values in stored.items()})
            if len(rows) == self.sequence_length or ended[k]:
                self._store_sequence(agent)

    def _store_sequence(self, agent: Any) -> None:
        """The agent's pending transitions as one block of ``sequence_length`` rows, zero-padded and masked."""
        rows = self._pending.pop(agent, None)
        if not rows:
            return
        length, n = self.sequence_length, len(rows)
        block: Dict[str, np.ndarray] = {}
        for key in rows[0]:
            values = np.stack([row[key] for row in rows])
            padded = np.zeros((length,) + values.shape[1:], dtype=values.dtype)
            padded[:n] = values
            block[key] = padded
        block["masks"] = (np.arange(length) < n).astype(np.float32)
        self.replay.add(block)

    def end_episode(self, agents=None) -> None:
        """The agents' pending transitions are stored (their episodes are gone) and their memories dropped."""
        agents = None if agents is None else list(agents)
        for agent in list(self._pending) if agents is None else agents:
            self._store_sequence(agent)
        self.forget_memories(agents)
        super().end_episode(agents)

    def sample(self) -> Dict[str, np.ndarray]:
        """One minibatch: ``batch_size`` transitions, or ``batch_size // sequence_length`` whole sequences."""
        if not self.use_recurrent:
            return self.replay.sample(self.settings.batch_size, self.rng)
        count = max(self.settings.batch_size // self.sequence_length, 1)
        return self.replay.sample_sequences(count, self.sequence_length, self.rng)


    def forget_memories(self, agents: Optional[List[Any]]) -> None:
        """Hook: drop the acting memories of ``agents`` (None: all)."""


__all__ = ["SequenceReplay"]
