"""The reward signals of an on-policy trainer: their inputs per step, their returns, their updates.

A trainer with a ``reward_signals`` block (``trainers.reward_signals``) learns from several reward
streams, each with its own value head, gamma and strength, and intrinsic signals (curiosity, RND,
GAIL) train networks of their own on the update's minibatches. ``OnPolicyTrainer`` mixes this in;
without the block none of it runs and nothing is built.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

from trainers.buffer import AgentBuffer
from trainers.reward_signals import (
    RewardSignal,
    create_reward_signals,
    signal_gae,
    signal_settings,
)
from trainers.trainer.brain_info import BrainInfo


class RewardSignalFields:
    """Reward-signal plumbing mixed into an on-policy trainer (see ``build_reward_signals``).

    It reads the trainer's ``brain``, ``brain_name``, its settings, ``sess`` and ``is_training``.

    It keeps, per summary period, each signal's mean reward and value estimate (``_signal_stats``),
    written with the trainer's summary under ``Policy/<Signal> Reward`` and the like.
    """

    def setup(self) -> None:
        super().setup()
        #: Filled by ``build_reward_signals`` (empty: the trainer has no ``reward_signals`` block).
        self.reward_signals: Dict[str, RewardSignal] = {}
        self._signal_stats: Dict[str, List[float]] = {}

    def build_reward_signals(self) -> List[str]:
        """Build the ``reward_signals`` block's signals; call inside ``build_scope`` in ``setup``.

        Returns the signal names (extrinsic first), one value head each, or ``[]`` when the
        trainer has no block (then nothing is built and nothing changes). A subclass that
        supports reward signals declares ``"reward_signals": REWARD_SIGNALS_PARAM`` among its
        hyperparameters, stores ``value_field(name)`` per signal in ``act``, returns
        ``{signal: values}`` from ``bootstrap_values``, calls ``add_reward_signal_fields`` in
        ``process_trajectory``, moves ``reward_signal_update_fields()`` to the update buffer and
        runs ``reward_signal_update(batch)``'s ops with each minibatch.
        """
        names = self.reward_signal_names()
        if names:
            self.reward_signals = create_reward_signals(self.brain, signal_settings(self._values))
        return names

    def reward_signal_names(self) -> List[str]:
        """The names of the checked ``reward_signals`` block (extrinsic first), ``[]`` without one;
        builds nothing."""
        block = self._values.get("reward_signals")
        return list(block) if block else []

    @staticmethod
    def value_field(names: Sequence[str], name: str) -> str:
        """The trajectory field of signal ``name``'s value estimates (the first signal's: ``value_estimates``)."""
        return "value_estimates" if name == names[0] else f"value_estimates_{name}"

    @staticmethod
    def returns_field(names: Sequence[str], name: str) -> str:
        """The trajectory field of signal ``name``'s returns (the first signal's: ``discounted_returns``)."""
        return "discounted_returns" if name == names[0] else f"discounted_returns_{name}"

    def _needs_next_inputs(self) -> bool:
        return any(signal.needs_next_inputs for signal in self.reward_signals.values())

    def _signal_input_fields(self, current: BrainInfo, following: BrainInfo) -> Dict[str, Tuple[Any, str]]:
        """The raw inputs the intrinsic signals read, ``{field: (values, 'current' | 'next')}``: each
        trajectory step holds the inputs acted from and, for signals that need them, those reached."""
        if set(self.reward_signals) == {"extrinsic"}:
            return {}
        fields: Dict[str, Tuple[Any, str]] = {}
        if self.brain.state_space_size > 0:
            fields["signal_state"] = (np.asarray(current.states, dtype=np.float32), "current")
        for k, observation in enumerate(current.observations):
            fields[f"signal_obs{k}"] = (observation, "current")
        if self._needs_next_inputs():
            if self.brain.state_space_size > 0:
                fields["signal_next_state"] = (np.asarray(following.states, dtype=np.float32), "next")
            for k, observation in enumerate(following.observations):
                fields[f"signal_next_obs{k}"] = (observation, "next")
            fields["signal_done"] = (np.asarray(following.local_done, dtype=np.float32), "next")
        return fields

    def reward_signal_update_fields(self) -> List[str]:
        """The trajectory fields the update needs for the signals (returns, inputs, actions)."""
        if not self.reward_signals:
            return []
        names = list(self.reward_signals)
        fields = [self.returns_field(names, n) for n in names[1:]] + [self.value_field(names, n) for n in names[1:]]
        if set(names) != {"extrinsic"}:
            if self.brain.state_space_size > 0:
                fields.append("signal_state")
            fields += [f"signal_obs{k}" for k in range(self.brain.number_observations)]
            if self._needs_next_inputs():
                if self.brain.state_space_size > 0:
                    fields.append("signal_next_state")
                fields += [f"signal_next_obs{k}" for k in range(self.brain.number_observations)]
                fields.append("signal_done")
        return fields

    def add_reward_signal_fields(self, trajectory: AgentBuffer, value_next: Union[float, Dict[str, float]],
                                 lambd: float) -> None:
        """Per signal: rewards x strength, GAE with its gamma, returns; ``advantages`` is their sum.

        Writes ``advantages``, ``masks`` and each signal's ``returns_field``; records each signal's
        mean reward (after ``strength``) and value estimate per step for the summaries.
        """
        names = list(self.reward_signals)
        wanted = {"rewards", "actions"} | {self.value_field(names, name) for name in names}
        fields = {key: np.asarray(trajectory[key]) for key in list(trajectory.keys())
                  if key in wanted or key.startswith("signal_")}
        rewards = {name: signal.strength * signal.evaluate(self.sess, fields, self.is_training)
                   for name, signal in self.reward_signals.items()}
        values = {name: fields[self.value_field(names, name)] for name in names}
        if not isinstance(value_next, dict):
            value_next = {name: float(value_next) for name in names}
        result = signal_gae(rewards, values, value_next,
                            {name: signal.gamma for name, signal in self.reward_signals.items()}, lambd)
        advantages = np.sum([result[name]["advantages"] for name in names], axis=0)
        trajectory["advantages"].set(advantages.astype(np.float32))
        for name in names:
            trajectory[self.returns_field(names, name)].set(result[name]["returns"].astype(np.float32))
            title = self.reward_signals[name].title
            self._signal_stats.setdefault(f"Policy/{title} Reward", []).extend(rewards[name].tolist())
            self._signal_stats.setdefault(f"Policy/{title} Value Estimate", []).extend(values[name].tolist())
        trajectory["masks"].set(np.ones(len(advantages), dtype=np.float32))

    def reward_signal_update(self, batch: Mapping[str, np.ndarray]) -> Tuple[Dict[Any, Any], List[Any], List[str]]:
        """``(feed, ops, metric names)`` that train the signals on a minibatch ``batch`` (flat rows).

        Run the ops in the same ``session.run`` as the policy's update; the first ``len(names)``
        of them are the metrics (``Losses/...``), the rest the signals' update ops.
        """
        feed: Dict[Any, Any] = {}
        metrics: List[Any] = []
        names: List[str] = []
        updates: List[Any] = []
        for signal in self.reward_signals.values():
            if signal.update_op is None:
                continue
            feed.update(signal.update_feed(batch))
            for name, tensor in signal.metrics.items():
                names.append(name)
                metrics.append(tensor)
            updates.append(signal.update_op)
        return feed, metrics + updates, names

    def add_signal_stat(self, key: str, value: float) -> None:
        """A value for a summary tag written as it is (``Policy/...``, ``Losses/...``), not under ``Info/``;
        safe from a background update, as ``add_stat`` is."""
        with self._stats_lock:
            self._signal_stats.setdefault(key, []).append(float(value))

    @property
    def _writes_signal_rewards(self) -> bool:
        return bool(getattr(self, "reward_signals", None))

    def write_summary(self, lesson: Any = None) -> None:
        """The base's summary, plus the reward signals' tags (``Policy/<Signal> Reward``, ...)."""
        due = self._summary_due()
        if due and "Policy/Extrinsic Value Estimate" in self._signal_stats:
            self.stats.pop("value_estimate", None)  # the signal's own tag carries it
        super().write_summary(lesson)
        if due and self._signal_stats:
            with self._stats_lock:
                stats, self._signal_stats = self._signal_stats, {}
            self._write_scalars({key: float(np.mean(v)) for key, v in stats.items() if v})


__all__ = ["RewardSignalFields"]
