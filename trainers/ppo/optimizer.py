"""The PPO update: ``num_epoch`` shuffled passes of clipped-surrogate minibatch steps, and the schedules.

Once the update buffer holds ``buffer_size`` steps, ``update`` makes ``num_epoch`` shuffled passes
over minibatches that together use every sample (whole sequences when recurrent). Each epoch
permutes every field once; each minibatch is a contiguous slice (a view) of the permuted arrays,
fed to one compiled call that takes the Adam step together with ``minibatch_extras``.

Why one compiled call per minibatch and not the whole update inside the graph: a minibatch step
of 3DBall (256 rows, two 2x128 MLPs forward and backward, ~53 MFLOP, then Adam) is compute-bound
at ~1 ms of CPU here, and the session's own callable (``compiled_call``: the values handed over as
they are, the graph run in the calling thread) adds a few tens of microseconds to it, so permuting
and slicing in NumPy and calling once per minibatch leaves ~5-8 % of the update outside the
kernels. An in-graph loop over the epochs would need a second copy of every network fed from the
uploaded rollout (the networks read the acting placeholders, which the export contract fixes,
and the replayed normalised state is fed in place of an intermediate tensor), for at most that.

What the update sees is exactly what the policy saw when acting: the stored action, its stored
log-probability, the stored value, the stored normalised state, and for recurrent brains the
stored memory at the start of each sequence. So the first minibatch of each update has ratio 1.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from trainers.stopping import stop_requested
from trainers.tf_utils import compiled_call, tf

#: Where Release 22's linear schedules end at ``max_steps`` (``ModelUtils.DecayedValue`` floors).
BETA_FLOOR, EPSILON_FLOOR = 1.0e-5, 0.1


class PPOOptimizer:
    """The update half of ``PPOTrainer``, mixed into it (POCA overrides its inputs and its call).

    It reads the trainer's ``model``, ``hp``, ``rng``, ``step``, ``sess``, ``sequence_length``,
    ``use_recurrent``, ``signal_names`` and reward signals, and records the losses with ``add_stat``.
    """

    #: Whether the minibatch step runs its ops one after another in the calling thread
    #: (``compiled_call``'s ``inline``), which spares the inter-op pool's hand-offs on a graph of
    #: small ops; a trainer whose step has large independent branches runs them side by side instead.
    update_inline = True

    def setup(self) -> None:
        super().setup()
        self._update_inputs: Optional[List[Tuple[tf.Tensor, str, bool]]] = None
        self._update_calls: Dict[Any, Callable[..., List[Any]]] = {}

    # ------------------------------------------------------------------ schedules
    def current_learning_rate(self) -> float:
        """The learning rate at the current agent step (linear: decays to 0 at ``max_steps``)."""
        lr = self.settings.learning_rate
        if self.settings.learning_rate_schedule == "linear":
            lr *= max(1.0 - self.step / self.get_max_steps, 0.0)
        return lr

    def _decayed(self, key: str, floor: float) -> float:
        """``key`` at the current agent step: constant, or linear from its value to ``floor`` at ``max_steps``."""
        value = getattr(self.settings, key)
        if getattr(self.settings, f"{key}_schedule") != "linear":
            return value
        return (value - floor) * max(1.0 - self.step / self.get_max_steps, 0.0) + floor

    def current_beta(self) -> float:
        """The entropy coefficient at the current agent step (``beta_schedule``)."""
        return self._decayed("beta", BETA_FLOOR)

    def current_epsilon(self) -> float:
        """The clip range at the current agent step (``epsilon_schedule``)."""
        return self._decayed("epsilon", EPSILON_FLOOR)

    # ------------------------------------------------------------------ updating
    def update_arrays(self) -> Dict[str, np.ndarray]:
        """The update buffer as one array per field (plus ``initial_memory`` when recurrent)."""
        arrays = super().update_arrays()  # the on-policy base's
        if self.use_recurrent:
            # Sequences are left-padded; each starts from the memory stored at its first real step.
            first_real = np.argmax(arrays["masks"] > 0, axis=1)
            arrays["initial_memory"] = arrays["memory"][np.arange(len(first_real)), first_real]
        return arrays

    def update_inputs(self) -> List[Tuple[tf.Tensor, str, bool]]:
        """What each minibatch feeds: ``(placeholder, field, per step)``, in the compiled call's order.

        ``per step`` fields are flattened from sequences to steps when recurrent; the others
        (the initial memory) have one row per sequence.
        """
        if self._update_inputs is None:
            m = self.model
            inputs = [(m.taken_actions, "actions", True), (m.old_log_probs, "log_probs", True),
                      (m.old_value, "value_estimates", True), (m.advantages, "advantages", True),
                      (m.returns, "discounted_returns", True), (m.masks, "masks", True)]
            if m.state_in is not None:
                # Normalised brains replay the normalised input they acted on, not today's statistics.
                inputs.append((m.vector_in if m.normalize else m.state_in, "states", True))
            inputs += [(placeholder, f"observations{k}", True) for k, placeholder in enumerate(m.observation_in)]
            if getattr(m, "action_masks", None) is not None:
                inputs.append((m.action_masks, "action_masks", True))
            if self.use_recurrent:
                inputs.append((m.memory_in, "initial_memory", False))
            for name in self.signal_names[1:]:
                inputs.append((m.signal_returns[name], self.returns_field(self.signal_names, name), True))
                inputs.append((m.signal_old_values[name], self.value_field(self.signal_names, name), True))
            self._update_inputs = inputs
        return self._update_inputs

    def _scalar_inputs(self) -> List[tf.Tensor]:
        """The scalars fed with every minibatch, before the ``update_inputs``."""
        m = self.model
        return [m.batch_size, m.sequence_length, m.learning_rate, m.clip_epsilon, m.beta]

    def minibatch_feed(self, arrays: Mapping[str, np.ndarray], rows: np.ndarray,
                       learning_rate: float) -> Dict[tf.Tensor, Any]:
        """The feed of one minibatch as a dict: ``rows`` index samples (sequences when recurrent)."""
        scalars = [len(rows), self.sequence_length, learning_rate, self.current_epsilon(), self.current_beta()]
        feed: Dict[tf.Tensor, Any] = dict(zip(self._scalar_inputs(), scalars))
        for placeholder, key, per_step in self.update_inputs():
            feed[placeholder] = self._flat(arrays[key][rows]) if per_step else arrays[key][rows]
        return feed

    def minibatch_extras(self, minibatch: Mapping[str, np.ndarray]
                         ) -> Tuple[Dict[tf.Tensor, Any], List[Any], List[str]]:
        """``(feed, fetches, metric names)`` run with the policy's step on each minibatch, in the same call.

        The one place for anything else that trains on the update's minibatches (the reward
        signals' networks today): ``minibatch`` holds the fields of ``minibatch_fields`` for the
        minibatch's rows (flat steps); the first ``len(names)`` fetches are metrics, averaged
        over the update and recorded under those names; the rest are ops.
        """
        if not self.reward_signals:
            return {}, [], []
        return self.reward_signal_update(minibatch)

    def minibatch_fields(self, batch: Mapping[str, np.ndarray]) -> List[str]:
        """The fields ``minibatch_extras`` reads from each minibatch."""
        if not self.reward_signals:
            return []
        return [key for key in batch if key.startswith("signal_")] + ["actions", "masks"]

    def _update_call(self, extra_feeds: Sequence[tf.Tensor], extra_fetches: Sequence[Any]) -> Callable[..., List[Any]]:
        """The compiled minibatch step for this set of extra feeds and fetches (cached: one per set)."""
        key = (tuple(id(t) for t in extra_feeds), tuple(id(t) for t in extra_fetches))
        call = self._update_calls.get(key)
        if call is None:
            feeds = self._scalar_inputs() + [placeholder for placeholder, _, _ in self.update_inputs()]
            call = compiled_call(self.sess, self.update_metrics() + list(extra_fetches) + [self.update_op()],
                                 feeds + list(extra_feeds), inline=self.update_inline)
            self._update_calls[key] = call
        return call

    def update_metrics(self) -> List[tf.Tensor]:
        """The five losses each minibatch step returns: policy, value, entropy, approximate KL, clip fraction."""
        m = self.model
        return [m.policy_loss, m.value_loss, m.mean_entropy, m.approx_kl, m.clip_fraction]

    def update_op(self) -> tf.Operation:
        """The op of one minibatch step (Adam over the policy and value networks)."""
        return self.model.update_batch

    def update(self, batch: Dict[str, np.ndarray]) -> None:
        """``num_epoch`` shuffled passes over the update buffer (the base empties it afterwards).

        Each epoch permutes every field once; its minibatches are then contiguous slices (views)
        of the permuted arrays, each fed to one compiled call (``compiled_call``) that runs the
        PPO step and ``minibatch_extras``. The minibatches are those of ``np.array_split`` over the epoch's
        permutation, so the samples of each step do not depend on how they are fed.
        """
        n = len(batch["actions"])
        per_batch = max(self.settings.batch_size // self.sequence_length, 1)
        n_batches = max(math.ceil(n / per_batch), 1)
        learning_rate = self.current_learning_rate()
        epsilon, beta = self.current_epsilon(), self.current_beta()
        scalars = [self.sequence_length, learning_rate, epsilon, beta]
        inputs = self.update_inputs()
        extra_fields = self.minibatch_fields(batch)
        sizes = [len(part) for part in np.array_split(np.arange(n), n_batches)]
        bounds = np.cumsum([0] + sizes)
        metrics: List[List[float]] = []
        extra_metrics: List[List[float]] = []
        extra_names: List[str] = []
        for _ in range(self.settings.num_epoch):
            if metrics and stop_requested():
                break
            permutation = self.rng.permutation(n)
            shuffled = [batch[key][permutation] for _, key, _ in inputs]
            shuffled_extra = {key: batch[key][permutation] for key in extra_fields}
            for start, end in zip(bounds[:-1], bounds[1:]):
                if metrics and stop_requested():  # the run stops: the minibatches taken so far are the update
                    break
                values = [self._flat(a[start:end]) if per_step else a[start:end]
                          for a, (_, _, per_step) in zip(shuffled, inputs)]
                extra_feed, extra_fetches, extra_names = self.minibatch_extras(
                    {key: self._flat(a[start:end]) for key, a in shuffled_extra.items()})
                call = self._update_call(list(extra_feed), extra_fetches)
                out = call(int(end - start), *scalars, *values, *extra_feed.values())
                metrics.append(out[:5])
                if extra_names:
                    extra_metrics.append(out[5:5 + len(extra_names)])
        if extra_metrics:
            for name, value in zip(extra_names, np.mean(extra_metrics, axis=0)):
                self.add_signal_stat(name, value)
        for key, value in zip(("policy_loss", "value_loss", "policy_entropy", "approx_kl", "clip_fraction"),
                              np.mean(metrics, axis=0)):
            self.add_stat(key, value)
        self.add_stat("learning_rate", learning_rate)
        self.add_stat("epsilon", epsilon)
        self.add_stat("beta", beta)

    def _flat(self, batch: np.ndarray) -> np.ndarray:
        """``[sequences, T, ...] -> [sequences*T, ...]`` when recurrent; unchanged otherwise."""
        return batch.reshape((-1,) + batch.shape[2:]) if self.use_recurrent else batch


__all__ = ["BETA_FLOOR", "EPSILON_FLOOR", "PPOOptimizer"]
