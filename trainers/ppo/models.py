"""The PPO graph of one brain: policy, value, and the clipped-surrogate update, all built once.

``create_agent_model(brain, ...)`` keeps the seed's signature and public attributes
(``state_in``, ``observation_in``, ``batch_size``, ``sequence_length``, ``epsilon``, ``output``,
``probs``, ``value``, ``entropy``, ``learning_rate``, ``memory_in``/``memory_out``), and names its
nodes per the export contract (``docs/plugins.md`` §6), relative to the caller's variable scope:

========================  =================================================================
inputs                    ``state``, ``observation_k``, ``batch_size``, ``sequence_length``,
                          ``recurrent_in``, ``epsilon`` (continuous; defaults to zeros)
outputs                   ``action``, ``value_estimate``, ``action_probs``, ``recurrent_out``
========================  =================================================================

Architecture: camera frames go through one small CNN each (shared by policy and value, as in the
Nature-CNN trunk), concatenated with the vector state (one-hot if discrete, running-normalised if
``normalize``); with ``use_recurrent`` that concatenation feeds one LSTM whose state is the brain's
memory, and the LSTM output is appended to it (so the small memory adds history rather than
replacing the present input); the update's losses read that LSTM through its fused twin
(``_training_terms``), so a minibatch step runs no loop. Policy and value then have separate
``num_layers`` x ``h_size`` tanh MLPs (separate networks learn faster on simple control tasks).
The policy head is a Gaussian (continuous), one masked softmax per branch (discrete), or both for
a hybrid brain (``_create_hybrid_policy``: its ``action`` row is the continuous sample then the
branch indices).

The update differs from the original ML-Agents 0.3 PPO on purpose: the
ratio is evaluated at the *stored* action against the stored log-probability of the whole action
(log-probs summed over dimensions), the value loss is clipped around the stored old prediction,
the entropy bonus applies to continuous actions too, advantages are normalised per minibatch,
gradients are clipped by global norm and Adam uses epsilon 1e-5 (one Adam over all variables as one
flat vector, ``trainers.flat_adam``: bit for bit ``tf.train.AdamOptimizer``'s step, in a handful of
ops). The learning rate, the clip range and the entropy coefficient are placeholders with
defaults: the trainer computes their schedules from its agent-step counter in Python, so
``--load`` restores them exactly.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from trainers.encoders import Inputs, concat_features, create_inputs
from trainers.flat_adam import FlatAdam
from trainers.models import dense, fused_lstm, loop_gradients, lstm, mlp, new_trainable_variables
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import BrainParameters

_LOG_2PI = math.log(2.0 * math.pi)


def validate_memory_size(brain: BrainParameters, m_size: Optional[int]) -> int:
    """The LSTM memory size for ``brain``: ``m_size`` if given, else the brain's ``memorySize``.

    The memory holds the LSTM's ``c`` and ``h`` halves, so it must be positive and even. An API-2
    scene stores ``memorySize`` floats per agent and sends them back, so a size set in the
    configuration must equal it there; a modern-protocol brain reports no memory (the trainer
    keeps it), so its size comes from the configuration.
    """
    declared = brain.memory_space_size
    if m_size is not None and declared and m_size != declared:
        raise UnityTrainerException(
            f"Brain '{brain.brain_name}' has memorySize {declared} in the scene, which stores that many floats per "
            f"agent, but memory_size is {m_size}. Remove memory_size (the brain's memorySize is used) or set it "
            f"to {declared}.")
    size = declared if m_size is None else m_size
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size % 2:
        fix = ("Set memory_size to an even number such as 128 (network_settings.memory.memory_size in a "
               "Release 22 run config)" if not declared and m_size is None and
               brain.continuous_action_contract == "unit" else
               "Set the brain's Memory Size in the scene (or memory_size) to an even number such as 64")
        raise UnityTrainerException(
            f"Brain '{brain.brain_name}' uses a recurrent model (use_recurrent: true), which needs a positive, even "
            f"memory size (the LSTM state c and h, half each), but its memorySize is {size!r}. {fix}, or set "
            "use_recurrent: false."
        )
    return size


class PPOModel:
    """The graph of one brain (see the module docstring). Build it through ``create_agent_model``.

    Public tensors (besides the seed's): ``log_prob`` (log-probability of ``output`` under the
    current policy, stored by the trainer as the old log-prob), ``vector_in`` (the float vector
    the networks see: normalised state or one-hot; feedable, which lets training replay exactly
    the normalised input used when acting), ``update_normalization`` (None unless normalising),
    and the loss side: ``taken_actions``, ``old_log_probs``, ``advantages``, ``returns``,
    ``old_value``, ``masks``, ``clip_epsilon``, ``beta``, ``policy_loss``, ``value_loss``,
    ``mean_entropy``, ``approx_kl``, ``clip_fraction``, ``grad_norm``, ``update_batch``.

    With reward signals (``reward_signals``: their names, extrinsic first): ``values[name]``, one
    value head each on the value MLP (the first is ``value``, the exported ``value_estimate``;
    the others, ``value_head_<name>``, are not exported), with ``signal_returns[name]`` and
    ``signal_old_values[name]`` placeholders; ``value_loss`` is the mean of their losses.
    ``inputs`` is the shared encoder's ``trainers.encoders.Inputs``.
    """

    def __init__(
        self,
        brain: BrainParameters,
        lr: float = 1e-4,
        h_size: int = 128,
        epsilon: float = 0.2,
        beta: float = 1e-3,
        normalize: bool = False,
        use_recurrent: bool = False,
        num_layers: int = 2,
        m_size: Optional[int] = None,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        clip_value: bool = True,
        reward_signals: Sequence[str] = (),
        vis_encode_type: str = "simple",
    ):
        self.brain = brain
        self.is_continuous = brain.action_space_type == "continuous"
        self.use_recurrent = use_recurrent
        self.m_size = validate_memory_size(brain, m_size) if use_recurrent else None
        variables_before = tf.trainable_variables()

        self.batch_size = tf.placeholder(tf.int32, None, name="batch_size")
        self.sequence_length = tf.placeholder(tf.int32, None, name="sequence_length")
        self.inputs: Inputs = create_inputs(brain, h_size, normalize, vis_encode_type=vis_encode_type)
        self.state_in = self.inputs.state
        self.vector_in = self.inputs.vector_in
        self.update_normalization = self.inputs.update_normalization
        self.normalize = self.inputs.normalize
        self.observation_in = self.inputs.observations
        encoded = concat_features(self.inputs.features)
        # Per-step weights: 1 for real steps, 0 for the Buffer's padding; ones unless fed.
        self.masks = tf.placeholder_with_default(tf.ones(tf.shape(encoded)[:1]), [None], name="masks")
        if use_recurrent:
            self.memory_in = tf.placeholder(tf.float32, [None, self.m_size], name="recurrent_in")
            remembered, memory_out = lstm(encoded, self.memory_in, self.sequence_length, "lstm", masks=self.masks)
            self.memory_out = tf.identity(memory_out, name="recurrent_out")
            self._lstm_features = (encoded, remembered)  # the loop's inputs and outputs (``_training_terms``)
            # The MLPs see the current features next to the LSTM output: the memory (memorySize/2
            # units, often 16) then only has to carry what the present input lacks (a cue seen
            # earlier, a velocity), instead of being a bottleneck for everything the policy uses.
            encoded = tf.concat([encoded, remembered], axis=1)
        else:
            self.memory_in = self.memory_out = None

        hidden_policy = mlp(encoded, h_size, num_layers, "policy")
        hidden_value = mlp(encoded, h_size, num_layers, "value")
        self.value = tf.identity(dense(hidden_value, 1, "value_head", gain=1.0), name="value_estimate")
        self.is_hybrid = bool(getattr(brain, "is_hybrid", False))
        if self.is_hybrid:
            self._create_hybrid_policy(hidden_policy, brain.action_space_size, brain.action_branches)
        elif self.is_continuous:
            self._create_gaussian_policy(hidden_policy, brain.action_space_size)
        else:
            self._create_categorical_policy(hidden_policy, brain.action_space_size)
        # One value head per reward signal, on the value MLP. The first signal's is the exported
        # ``value_estimate``; the others (``value_head_<signal>``) are built after the policy, so
        # a brain without reward signals has exactly the graph (and initial weights) it had before.
        self.signal_names: List[str] = list(reward_signals) or ["extrinsic"]
        self.values: Dict[str, tf.Tensor] = {self.signal_names[0]: self.value}
        for name in self.signal_names[1:]:
            self.values[name] = dense(hidden_value, 1, f"value_head_{name}", gain=1.0)
        self.variables = new_trainable_variables(variables_before)
        self._h_size, self._num_layers = h_size, num_layers
        self._create_ppo_optimizer(lr, epsilon, beta, vf_coef, max_grad_norm, clip_value)

    # ------------------------------------------------------------------ policies
    def _gaussian(self, hidden: tf.Tensor, action_size: int) -> Tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        """Diagonal Gaussian with a state-independent log-std initialised to 0 (sigma = 1).

        Sets ``mu``, ``log_sigma`` and ``epsilon``; returns the sample ``mu + sigma * epsilon`` and
        the log-density of an action per dimension (``[N, action_size]``), which the continuous
        and the hybrid policies both sum over the dimensions.
        """
        self.mu, self.log_sigma, sigma, log_prob_per_dim = self._gaussian_density(hidden, action_size)
        # Zeros unless fed: Unity's Internal brain then acts with the mean. The shape is left
        # open so that a single [0] broadcasts, as well as a full [N, actionSize] noise feed.
        self.epsilon = tf.placeholder_with_default(tf.zeros([1]), None, name="epsilon")
        sampled = self.mu + sigma * self.epsilon
        sampled.set_shape(self.mu.shape)
        return sampled, log_prob_per_dim

    @staticmethod
    def _gaussian_density(hidden: tf.Tensor, action_size: int
                          ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        """``(mu, log_sigma, sigma, log-density per dimension)`` of the Gaussian head on ``hidden``."""
        mu = dense(hidden, action_size, "policy_head", gain=0.01)
        log_sigma = tf.get_variable("log_sigma", [action_size], initializer=tf.zeros_initializer())
        sigma = tf.exp(log_sigma)

        def log_prob_per_dim(x: tf.Tensor) -> tf.Tensor:
            return -0.5 * tf.square((x - mu) / sigma) - log_sigma - 0.5 * _LOG_2PI

        return mu, log_sigma, sigma, log_prob_per_dim

    def _gaussian_entropy(self, mu: Optional[tf.Tensor] = None, log_sigma: Optional[tf.Tensor] = None) -> tf.Tensor:
        """The Gaussian's entropy ``[N]``: the same for every row, since sigma does not depend on the state."""
        mu = self.mu if mu is None else mu
        log_sigma = self.log_sigma if log_sigma is None else log_sigma
        return tf.reduce_sum(log_sigma + 0.5 * (_LOG_2PI + 1.0)) * tf.ones_like(mu[:, 0])

    def _create_gaussian_policy(self, hidden: tf.Tensor, action_size: int) -> None:
        """The Gaussian of ``_gaussian`` for a continuous brain; ``action_probs`` is the density per dimension."""
        sampled, log_prob_per_dim = self._gaussian(hidden, action_size)
        self.output = tf.identity(sampled, name="action")
        output_log_prob = log_prob_per_dim(tf.stop_gradient(self.output))
        self.probs = tf.exp(output_log_prob, name="action_probs")
        self.log_prob = tf.reduce_sum(output_log_prob, axis=1)
        self.entropy = self._gaussian_entropy()
        self.taken_actions = tf.placeholder(tf.float32, [None, action_size], name="taken_actions")
        self._new_log_prob = tf.reduce_sum(log_prob_per_dim(self.taken_actions), axis=1)

    def _create_categorical_policy(self, hidden: tf.Tensor, action_size: int) -> None:
        """Softmax over ``action_size`` actions, sampled in the graph.

        Brains of the modern protocol may have several branches (one action each) and action
        masks; they get ``_create_branched_policy``. API-2 brains keep this graph exactly.
        """
        branches = list(getattr(self.brain, "action_branches", None) or [action_size])
        self.action_masks = None
        if len(branches) > 1 or getattr(self.brain, "uses_action_masks", False):
            self._create_branched_policy(hidden, branches)
            return
        logits = dense(hidden, action_size, "policy_head", gain=0.01)
        log_probs = tf.nn.log_softmax(logits)
        self.probs = tf.nn.softmax(logits, name="action_probs")
        self.output = tf.identity(tf.multinomial(logits, 1), name="action")
        self.log_prob = tf.reduce_sum(log_probs * tf.one_hot(self.output[:, 0], action_size), axis=1)
        self.entropy = -tf.reduce_sum(self.probs * log_probs, axis=1)
        self.taken_actions = tf.placeholder(tf.int32, [None], name="taken_actions")
        self._new_log_prob = tf.reduce_sum(log_probs * tf.one_hot(self.taken_actions, action_size), axis=1)

    def _training_terms(self) -> Tuple[tf.Tensor, tf.Tensor, Dict[str, tf.Tensor]]:
        """``(log-probability of the taken actions, entropy, values)`` for the losses of a recurrent
        model: the networks again over the same variables, the LSTM's output from the loop's fused
        twin (``trainers.models.fused_lstm``).

        The twin gives the loop's values on every real step, so a minibatch step runs the LSTM as
        one kernel forward and one backward, and no loop; ``loop_gradients`` splits the gradient at
        the twin as it would at the loop's outputs, so the step's arithmetic is the same. Built
        with the losses, after every variable: ops added before a variable would move the seeds
        TensorFlow derives for its initialiser (from the graph's op count). The acting graph and
        the export keep the loop.

        The networks after the LSTM run on the real rows only (``masks`` > 0), gathered, and their
        terms are scattered back with 0 on the padding, which the losses weigh 0. A minibatch of a
        scene with short episodes is mostly the Buffer's left padding (a Hallway episode of 7 steps
        fills a sequence of 64), and the dense layers' cost goes with the rows they run.
        """
        features, remembered = self._lstm_features
        real = tf.where(self.masks > 0.0)  # [R, 1]
        rows = tf.shape(self.masks, out_type=tf.int64)

        def scattered(x: tf.Tensor) -> tf.Tensor:
            return tf.scatter_nd(real, x, tf.concat([rows, tf.shape(x, out_type=tf.int64)[1:]], axis=0))

        encoded = tf.gather_nd(tf.concat([features, fused_lstm(remembered)], axis=1), real)
        self._training_rows = encoded
        taken_actions = tf.gather_nd(self.taken_actions, real)
        allowed = tf.gather_nd(self.action_masks, real) if getattr(self, "action_masks", None) is not None else None
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            hidden_policy = mlp(encoded, self._h_size, self._num_layers, "policy")
            hidden_value = mlp(encoded, self._h_size, self._num_layers, "value")
            values = {self.signal_names[0]: dense(hidden_value, 1, "value_head", gain=1.0)}
            for name in self.signal_names[1:]:
                values[name] = dense(hidden_value, 1, f"value_head_{name}", gain=1.0)
            branches = list(getattr(self.brain, "action_branches", None) or [self.brain.action_space_size])
            if self.is_hybrid or self.is_continuous:
                n = self.brain.action_space_size
                mu, log_sigma, _, log_prob_per_dim = self._gaussian_density(hidden_policy, n)
                taken = taken_actions[:, :n] if self.is_hybrid else taken_actions
                new_log_prob = tf.reduce_sum(log_prob_per_dim(taken), axis=1)
                entropy = self._gaussian_entropy(mu, log_sigma)
                if self.is_hybrid:
                    taken_indices = tf.cast(tf.round(taken_actions[:, n:]), tf.int32)
                    *_, branch_new_log_prob, branch_entropy = self._masked_branches(
                        hidden_policy, branches, taken_indices, lambda k: f"policy_head_{k}", allowed)
                    new_log_prob, entropy = new_log_prob + branch_new_log_prob, entropy + branch_entropy
            elif self.action_masks is not None:  # one masked softmax per branch
                single = len(branches) == 1
                taken = taken_actions[:, None] if single else taken_actions
                *_, new_log_prob, entropy = self._masked_branches(
                    hidden_policy, branches, taken, lambda k: "policy_head" if single else f"policy_head_{k}", allowed)
            else:
                size = self.brain.action_space_size
                logits = dense(hidden_policy, size, "policy_head", gain=0.01)
                log_probs = tf.nn.log_softmax(logits)
                entropy = -tf.reduce_sum(tf.nn.softmax(logits) * log_probs, axis=1)
                new_log_prob = tf.reduce_sum(log_probs * tf.one_hot(taken_actions, size), axis=1)
        return scattered(new_log_prob), scattered(entropy), {k: scattered(v) for k, v in values.items()}

    def _create_branched_policy(self, hidden: tf.Tensor, branches: Sequence[int]) -> None:
        """One softmax per discrete branch, over the actions its mask allows.

        ``action_masks`` (float ``[N, sum(branches)]``, 1 = allowed; all ones unless fed) pushes
        the logits of masked actions down by 1e9, so they get probability 0 (exactly, in float32)
        and are never sampled; log-probabilities and entropies are sums over the branches.
        ``output`` is int64 ``[N, len(branches)]``; ``taken_actions`` is int32 ``[N]`` for one
        branch (as without masks) and ``[N, len(branches)]`` for several.
        """
        total = int(sum(branches))
        self.action_masks = tf.placeholder_with_default(
            tf.ones(tf.stack([tf.shape(hidden)[0], total])), [None, total], name="action_masks")
        single = len(branches) == 1
        self.taken_actions = tf.placeholder(tf.int32, [None] if single else [None, len(branches)],
                                            name="taken_actions")
        taken = self.taken_actions[:, None] if single else self.taken_actions
        outputs, probs, log_prob, new_log_prob, entropy = self._masked_branches(
            hidden, branches, taken, lambda k: "policy_head" if single else f"policy_head_{k}")
        self.output = tf.identity(tf.concat(outputs, axis=1), name="action")
        self.probs = tf.identity(tf.concat(probs, axis=1), name="action_probs")
        self.log_prob, self._new_log_prob, self.entropy = log_prob, new_log_prob, entropy

    def _masked_branches(self, hidden: tf.Tensor, branches: Sequence[int], taken: tf.Tensor,
                         head_name: Callable[[int], str], allowed_masks: Optional[tf.Tensor] = None
                         ) -> Tuple[list, list, Any, Any, Any]:
        """One softmax per branch over the actions ``action_masks`` allows (masked logits lowered by
        1e9, so their probability is 0 exactly), and a sample of each: ``(samples, probs, log_prob,
        new_log_prob, entropy)``, the last three summed over the branches (``new_log_prob`` of the
        ``taken`` indices, int ``[N, len(branches)]``). ``allowed_masks`` stands for ``action_masks``
        where ``hidden`` holds other rows (the recurrent losses' real rows)."""
        samples, probs, log_prob, new_log_prob, entropy = [], [], 0.0, 0.0, 0.0
        offset = 0
        for k, size in enumerate(branches):
            logits = dense(hidden, size, head_name(k), gain=0.01)
            allowed = (self.action_masks if allowed_masks is None else allowed_masks)[:, offset:offset + size]
            offset += size
            logits = logits - (1.0 - allowed) * 1e9
            branch_log_probs = tf.nn.log_softmax(logits)
            branch_probs = tf.nn.softmax(logits)
            sampled = tf.multinomial(logits, 1)
            samples.append(sampled)
            probs.append(branch_probs)
            log_prob += tf.reduce_sum(branch_log_probs * tf.one_hot(sampled[:, 0], size), axis=1)
            new_log_prob += tf.reduce_sum(branch_log_probs * tf.one_hot(taken[:, k], size), axis=1)
            entropy += -tf.reduce_sum(branch_probs * branch_log_probs, axis=1)
        return samples, probs, log_prob, new_log_prob, entropy

    def _create_hybrid_policy(self, hidden: tf.Tensor, n_continuous: int, branches: Sequence[int]) -> None:
        """A diagonal Gaussian for the continuous actions and one masked softmax per discrete branch.

        The two parts are independent given the state, so log-probabilities and entropies add.
        ``output`` (``action``) is float ``[N, n_continuous + len(branches)]``: the Gaussian sample
        then each branch's index, the layout of an action row of a hybrid brain; the parts are also
        ``continuous_action`` (mean + sigma * epsilon) and ``discrete_action`` (int64), which the
        ONNX export turns into ``continuous_actions`` and ``discrete_actions``. ``action_probs``
        holds the branches' probabilities; ``taken_actions`` is an action row.
        """
        sampled, log_prob_per_dim = self._gaussian(hidden, n_continuous)
        self.continuous_output = tf.identity(sampled, name="continuous_action")
        total = int(sum(branches))
        self.action_masks = tf.placeholder_with_default(
            tf.ones(tf.stack([tf.shape(hidden)[0], total])), [None, total], name="action_masks")
        width = n_continuous + len(branches)
        self.taken_actions = tf.placeholder(tf.float32, [None, width], name="taken_actions")
        taken_indices = tf.cast(tf.round(self.taken_actions[:, n_continuous:]), tf.int32)
        log_prob = tf.reduce_sum(log_prob_per_dim(tf.stop_gradient(self.continuous_output)), axis=1)
        new_log_prob = tf.reduce_sum(log_prob_per_dim(self.taken_actions[:, :n_continuous]), axis=1)
        entropy = self._gaussian_entropy()
        samples, probs, branch_log_prob, branch_new_log_prob, branch_entropy = self._masked_branches(
            hidden, branches, taken_indices, lambda k: f"policy_head_{k}")
        log_prob, new_log_prob = log_prob + branch_log_prob, new_log_prob + branch_new_log_prob
        entropy = entropy + branch_entropy
        self.discrete_output = tf.identity(tf.concat(samples, axis=1), name="discrete_action")
        self.output = tf.identity(
            tf.concat([self.continuous_output, tf.cast(self.discrete_output, tf.float32)], axis=1), name="action")
        self.probs = tf.identity(tf.concat(probs, axis=1), name="action_probs")
        self.log_prob, self._new_log_prob, self.entropy = log_prob, new_log_prob, entropy

    # ------------------------------------------------------------------ loss and optimiser
    def _create_ppo_optimizer(
        self, lr: float, epsilon: float, beta: float, vf_coef: float, max_grad_norm: float, clip_value: bool
    ) -> None:
        self.learning_rate = tf.placeholder_with_default(float(lr), [], name="learning_rate")
        self.clip_epsilon = tf.placeholder_with_default(float(epsilon), [], name="clip_epsilon")
        self.beta = tf.placeholder_with_default(float(beta), [], name="beta")
        self.old_log_probs = tf.placeholder(tf.float32, [None], name="old_log_probs")
        self.advantages = tf.placeholder(tf.float32, [None], name="advantages")
        self.returns = tf.placeholder(tf.float32, [None], name="discounted_rewards")
        self.old_value = tf.placeholder(tf.float32, [None], name="old_value")
        # Per reward signal: the first signal uses the two placeholders above.
        first = self.signal_names[0]
        self.signal_returns: Dict[str, tf.Tensor] = {first: self.returns}
        self.signal_old_values: Dict[str, tf.Tensor] = {first: self.old_value}
        for name in self.signal_names[1:]:
            self.signal_returns[name] = tf.placeholder(tf.float32, [None], name=f"discounted_rewards_{name}")
            self.signal_old_values[name] = tf.placeholder(tf.float32, [None], name=f"old_value_{name}")

        with tf.name_scope("ppo_loss"):
            # Recurrent: the losses read the LSTM through its fused twin, not the loop (``_training_terms``).
            new_log_prob, entropy, values = (self._training_terms() if self.use_recurrent else
                                             (self._new_log_prob, self.entropy, self.values))
            weights = self.masks
            count = tf.maximum(tf.reduce_sum(weights), 1.0)

            def masked_mean(x):
                return tf.reduce_sum(x * weights) / count

            adv_mean = masked_mean(self.advantages)
            adv_std = tf.sqrt(masked_mean(tf.square(self.advantages - adv_mean)))
            advantages = (self.advantages - adv_mean) / (adv_std + 1e-8)

            log_ratio = new_log_prob - self.old_log_probs
            ratio = tf.exp(log_ratio)
            clipped_ratio = tf.minimum(tf.maximum(ratio, 1.0 - self.clip_epsilon), 1.0 + self.clip_epsilon)
            self.policy_loss = -masked_mean(tf.minimum(ratio * advantages, clipped_ratio * advantages))

            def value_loss(value, returns, old_value):
                value = value[:, 0]
                value_error = tf.square(value - returns)
                if clip_value:
                    clipped_value = old_value + tf.minimum(
                        tf.maximum(value - old_value, -self.clip_epsilon), self.clip_epsilon
                    )
                    value_error = tf.maximum(value_error, tf.square(clipped_value - returns))
                return 0.5 * masked_mean(value_error)

            # Each reward signal's head regresses to that signal's returns; the loss is their mean
            # (one head: exactly the single value loss).
            self.value_losses: Dict[str, tf.Tensor] = {}
            for name in self.signal_names:
                returns, old_value = self.signal_returns[name], self.signal_old_values[name]
                self.value_losses[name] = value_loss(values[name], returns, old_value)
            losses = list(self.value_losses.values())
            self.value_loss = losses[0] if len(losses) == 1 else tf.add_n(losses) / float(len(losses))

            self.mean_entropy = masked_mean(entropy)
            self.loss = self.policy_loss + vf_coef * self.value_loss - self.beta * self.mean_entropy
            # k3 estimator of KL(old || new): unbiased and always >= 0 (Schulman's blog "Approximating KL").
            self.approx_kl = masked_mean((ratio - 1.0) - log_ratio)
            self.clip_fraction = masked_mean(tf.cast(tf.abs(ratio - 1.0) > self.clip_epsilon, tf.float32))

        # One Adam over every variable as one flat vector (``trainers.flat_adam``), after the
        # gradients and the metrics fetched with the step.
        # Recurrent: the gradient through the LSTM comes from one fused kernel (``loop_gradients``).
        options: Dict[str, Any] = {"gradients": loop_gradients} if self.use_recurrent else {}
        adam = FlatAdam([(self.loss, self.variables)], self.learning_rate, epsilon=1e-5, clip_norm=max_grad_norm,
                        allow_unused=True, name="adam", **options)
        self.grad_norm = adam.gradient_norm
        self.update_batch = adam.apply(wait_for=[self.policy_loss, self.value_loss, self.mean_entropy,
                                                 self.approx_kl, self.clip_fraction], name="update_batch")


def create_agent_model(brain: BrainParameters, max_step: float = 5e6, **options: Any) -> PPOModel:
    """Build the PPO graph of ``brain`` in the current graph and variable scope.

    ``options`` are ``PPOModel``'s keyword arguments, with its defaults:

    :param lr: default of the ``learning_rate`` placeholder, for a caller that runs the update
        without feeding it (the trainer feeds its schedule's value at every update).
    :param epsilon: default of the ``clip_epsilon`` placeholder: the PPO clip range, also used to
        clip the value around its old prediction (fed alike by the trainer).
    :param beta: default of the ``beta`` placeholder: the entropy-bonus coefficient (fed alike).
    :param max_step: accepted for the seed's signature; schedules are computed by the trainer
        from its agent-step counter, not in the graph.
    :param m_size: LSTM memory size; ``None`` takes the brain's ``memorySize`` (must be even, > 0).
    :param vf_coef: weight of the value loss in the single loss both networks minimise.
    :param max_grad_norm: the global norm gradients are clipped to.
    :param clip_value: clip the value loss around the old predictions (PPO2-style).
    :param reward_signals: the names of the reward signals, one value head each (the first one's
        is ``value_estimate``); empty: one head for the extrinsic reward, the graph of old.
    :param vis_encode_type: the camera encoder (``trainers.encoders.VISUAL_ENCODERS``).
    """
    del max_step  # see the docstring: the schedule lives in the trainer
    return PPOModel(brain, **options)


__all__ = ["PPOModel", "create_agent_model", "validate_memory_size"]
