"""The SAC graph of one brain: actor, twin Q networks, their targets, entropy coefficients, one update op.

Soft actor-critic (Haarnoja et al. 2018, with the twin target critics and automatic temperature of
the 2018 "algorithms and applications" version; discrete actions as Christodoulou 2019, per branch
as ML-Agents). Everything is built once, under the trainer's build scope.

Export contract (names relative to the scope): inputs ``state``, ``observation_k``, ``batch_size``,
``epsilon`` (continuous, zeros unless fed), ``action_masks`` (discrete, ones unless fed); outputs

* ``action``: continuous ``tanh(mu + sigma * epsilon)``, in [-1, 1] and not clipped or scaled (an
  Internal brain that leaves ``epsilon`` at 0 acts with ``tanh(mu)``); discrete int64
  ``[N, branches]``, sampled per branch from the masked softmax;
* ``deterministic_action`` (continuous): ``tanh(mu)``; ``action_probs`` (discrete): the masked
  probabilities, branch after branch;
* ``value_estimate`` ``[N, 1]``: ``min(Q1, Q2)`` of the first reward stream at ``action``
  (continuous) or its expectation under the policy (discrete).

Networks, as Release 22's (its ``LinearEncoder``, ``ValueHeads`` and action heads): the actor and each
critic are ``num_layers`` swish layers of ``hidden_units`` over the encoded inputs (a critic's
continuous action appended), kernels ``N(0, 1/fan_in)``, biases 0; the Q heads are Glorot-uniform, the
discrete logits ``N(0, 0.1^2/fan_in)``, the Gaussian's mean and log sigma ``N(0, 0.2^2/fan_in)``. On the
built-in Basic this form reaches 0.9 in fewer agent-steps than ReLU layers with orthogonal kernels
(docs/benchmarks.md). A recurrent brain keeps ReLU layers with orthogonal kernels (gain sqrt 2; heads 1
for Q, 0.01 for the actor): its LSTM reads the encoded inputs and its output joins them before these
layers, where Release 22 runs its LSTM after them, and on the built-in Hallway the swish form learns
slower (seeds 1-4 reach 0.7 in 10,000-20,000 agent-steps against 6,000-12,000, seed 0 not in 54,000).

Losses, per reward stream ``s`` (gamma_s; ``use_done_s`` cuts the bootstrap at episode ends, which
only the extrinsic stream does, as in ML-Agents), averaged over streams, with ``a' ~ pi(s')``:

* Q: ``0.5 * (Q_i(s, a) - y)^2`` with ``y = r + gamma (1 - d) [min Qbar(s', a') - alpha log pi(a'|s')]``;
  discrete: the branch mean of the taken actions' Q, and the expectation over ``pi(.|s')`` per branch;
* policy: ``alpha log pi(a~|s) - min Q(s, a~)`` with ``a~`` reparameterised; discrete: per branch
  ``sum_a p (alpha_b log p - min Q_b)``, summed over branches;
* temperature: ``-log alpha * (log pi + H)`` with ``H`` = -``action_size`` (continuous) and
  ``0.2 ln(branch size)`` per branch (discrete).

Release 22 computes two of these otherwise: its Q backs up from a state value V with a target copy,
and its policy loss reads Q1 alone. Across the built-in Basic, 3DBall and Hallway neither takes fewer
agent-steps to the target (docs/benchmarks.md, the zoo), so the twin target Qs and ``min Q`` stay.

All gradients are computed from the parameters before the step, then Adam applies to each loss's
variables, then the targets move by ``tau`` (one op, ``trainers.sac.update``).

Recurrent (``use_recurrent``): the inputs are ``sequence_length`` steps per sequence, laid out
sequence after sequence. The actor has an LSTM after the encoder whose state is the brain's memory
(exported as ``recurrent_in`` / ``recurrent_out``, ``[N, memory_size]``): a training sequence starts
from the memory stored with its first transition, and its next states (the same steps shifted by
one) from the memory that first step returned (``next_recurrent_in``). Each critic and target has
its own LSTM of the same size that starts every sequence from zeros, as ML-Agents' Q networks do
(no critic memory is kept while acting). The LSTM's output is appended to the encoded inputs, as in
the PPO graph. ``masks`` (1 real, 0 padding) weight every mean of the losses; a padded step also
holds the LSTM state. The losses read every LSTM through a fused ``BlockLSTM`` kernel (the actor's
acting loop through its twin, ``trainers.models.fused_lstm``), so the update runs no loop. Without
``use_recurrent`` none of these ops exist.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from trainers.encoders import check_inputs, encode, observation_placeholders, state_placeholder, state_vector
from trainers.models import (
    RunningNormalizer,
    dense,
    fused_lstm,
    loop_gradients,
    lstm,
    mlp,
    new_trainable_variables,
    swish,
    training_lstm,
)
from trainers.ppo.models import validate_memory_size
from trainers.sac.update import fused_sac_update
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters

_LOG_2PI = math.log(2.0 * math.pi)
LOG_SIGMA_BOUNDS = (-20.0, 2.0)
#: Target entropy: -scale * action_size (continuous), scale * ln(branch size) per branch (discrete).
CONTINUOUS_TARGET_ENTROPY_SCALE = 1.0
DISCRETE_TARGET_ENTROPY_SCALE = 0.2


#: ML-Agents' output layers: ``N(0, (gain / sqrt(fan_in))^2)`` kernels for the discrete logits and for
#: the Gaussian's mean and log sigma; the Q heads are Glorot-uniform.
LOGITS_GAIN = 0.1
GAUSSIAN_GAIN = 0.2


def he_normal(gain: float, fan_in: int):
    """``N(0, (gain / sqrt(fan_in))^2)``, not truncated: PyTorch's ``kaiming_normal_`` for a linear
    layer (its gain 1), times ``gain``, which ML-Agents' ``linear_layer`` applies."""
    return tf.random_normal_initializer(stddev=gain / math.sqrt(fan_in))


def linear(x: tf.Tensor, units: int, name: str, initializer) -> tf.Tensor:
    """``x @ W + b`` with ``W`` from ``initializer`` (called with the fan-in) and ``b = 0``."""
    in_size = int(x.shape[-1])
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [in_size, units], initializer=initializer(in_size))
        bias = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)


def hidden_layers(x: tf.Tensor, h_size: int, num_layers: int, name: str) -> tf.Tensor:
    """ML-Agents' ``LinearEncoder``: ``num_layers`` layers of ``h_size`` swish units, He-normal kernels."""
    with tf.variable_scope(name):
        for i in range(num_layers):
            x = swish(linear(x, h_size, f"dense_{i}", lambda fan_in: he_normal(1.0, fan_in)))
    return x


def release22_head(x: tf.Tensor, units: int, name: str, kind: str) -> tf.Tensor:
    """An output layer as ML-Agents initialises it: ``kind`` "q" Glorot-uniform, "logits" and
    "gaussian" He-normal with ``LOGITS_GAIN`` / ``GAUSSIAN_GAIN``; zero bias."""
    if kind == "q":
        return linear(x, units, name, lambda _: tf.glorot_uniform_initializer())
    gain = {"logits": LOGITS_GAIN, "gaussian": GAUSSIAN_GAIN}[kind]
    return linear(x, units, name, lambda fan_in: he_normal(gain, fan_in))


#: The recurrent networks' output gains (orthogonal kernels, after ReLU layers): Q heads 1, actor heads 0.01.
RECURRENT_HEAD_GAINS = {"q": 1.0, "logits": 0.01, "gaussian": 0.01}


def squash_correction(pre_tanh: tf.Tensor) -> tf.Tensor:
    """``log(1 - tanh(x)^2)`` per element, as ``2 (log 2 - x - softplus(-2x))`` (exact, no cancellation)."""
    return 2.0 * (math.log(2.0) - pre_tanh - tf.nn.softplus(-2.0 * pre_tanh))


class SACModel:
    """Public tensors: the placeholders (``state``, ``observations``, ``next_*``, ``epsilon``,
    ``next_epsilon``, ``action_masks``, ``next_action_masks``, ``taken_actions``, ``rewards[stream]``,
    ``dones``, ``learning_rate``; recurrent: ``sequence_length``, ``memory_in``, ``next_memory_in``,
    ``masks``), ``output``, ``memory_out`` (recurrent), ``value``, ``probs`` (discrete), ``policy_tensors``
    (the acting policy's parts: ``mu``, ``log_sigma``, ``pre_tanh``, ``log_prob``), ``log_alpha``
    (``[1]`` continuous, ``[branches]`` discrete), ``metrics`` (name -> scalar), ``critic_outputs`` (what
    the losses read, by stream: ``q1``/``q2`` at the taken actions, ``q1_pi``/``q2_pi`` at the policy's,
    ``target_q1``/``target_q2`` at the next states and the next policy's actions; discrete: every
    action's), ``next_policy_tensors`` (the policy at the next states), ``train_op`` (the
    fused update), ``online_variables`` / ``target_variables`` (Q1+Q2 and their targets, in the same
    order), ``update_normalization`` (None unless normalising)."""

    def __init__(self, brain: BrainParameters, h_size: int, num_layers: int, normalize: bool,
                 streams: Sequence[str], gammas: Dict[str, float], use_dones: Dict[str, bool],
                 init_entcoef: float, tau: float, learning_rate: float, vis_encode_type: str = "simple",
                 use_recurrent: bool = False, m_size: Optional[int] = None):
        check_inputs(brain, "the SAC trainer", vis_encode_type)
        self.use_recurrent = bool(use_recurrent)
        self.m_size = validate_memory_size(brain, m_size) if self.use_recurrent else None
        self.vis_encode_type = vis_encode_type
        self.brain = brain
        self.is_continuous = brain.action_space_type == "continuous"
        self.streams = list(streams)
        self.h_size, self.num_layers = h_size, num_layers
        self.branches = [] if self.is_continuous else [int(b) for b in brain.action_branches]
        self.action_size = brain.action_space_size if self.is_continuous else len(self.branches)

        self.batch_size = tf.placeholder(tf.int32, None, name="batch_size")
        self.state = state_placeholder(brain, "state") if brain.state_space_size > 0 else None
        self.observations = observation_placeholders(brain, "observation")
        self.next_state = state_placeholder(brain, "next_state") if self.state is not None else None
        self.next_observations = observation_placeholders(brain, "next_observation")
        vector, next_vector = self._vectors(normalize)
        # The names PPOPolicy (its per-agent memories) reads.
        self.state_in, self.observation_in = self.state, self.observations
        self.memory_in = self.next_memory_in = self.memory_out = self.sequence_length = self.masks = None
        if self.use_recurrent:
            self.sequence_length = tf.placeholder(tf.int32, None, name="sequence_length")
            self.memory_in = tf.placeholder(tf.float32, [None, self.m_size], name="recurrent_in")
            self.next_memory_in = tf.placeholder(tf.float32, [None, self.m_size], name="next_recurrent_in")
            rows = tf.shape(self.state if self.state is not None else self.observations[0])[:1]
            self.masks = tf.placeholder_with_default(tf.ones(rows), [None], name="masks")

        def features(which: str) -> Tuple[Optional[tf.Tensor], List[tf.Tensor]]:
            return (vector, self.observations) if which == "current" else (next_vector, self.next_observations)

        self._features = features
        # The contract's optional inputs sit at the scope's root, where Unity and the exporter look.
        if self.is_continuous:
            # Zeros unless fed: Unity's Internal brain then acts with tanh(mu). The shape stays open
            # so that a single [0] broadcasts, as well as a full [N, actionSize] noise feed.
            self.epsilon = tf.placeholder_with_default(tf.zeros([1]), None, name="epsilon")
            self.next_epsilon = tf.placeholder_with_default(tf.zeros([1]), None, name="next_epsilon")
        else:
            total = int(sum(self.branches))
            rows = tf.shape(self.state if self.state is not None else self.observations[0])[0]
            ones = tf.ones(tf.stack([rows, total]))
            self.action_masks = tf.placeholder_with_default(ones, [None, total], name="action_masks")
            self.next_action_masks = tf.placeholder_with_default(ones, [None, total], name="next_action_masks")
        with tf.variable_scope("policy"):
            before = tf.trainable_variables()
            policy = self._policy("current", reuse=False)
            self.policy_variables = new_trainable_variables(before)
            next_policy = self._policy("next", reuse=True)
        self.policy_tensors = policy
        if self.use_recurrent:
            self.memory_out = tf.identity(policy["memory_out"], name="recurrent_out")
        if self.is_continuous:
            self.output = tf.identity(policy["action"], name="action")
            self.deterministic_output = tf.identity(tf.tanh(policy["mu"]), name="deterministic_action")
        else:
            self.output = tf.identity(policy["sample"], name="action")
            self.probs = tf.identity(tf.concat(policy["probs"], axis=1), name="action_probs")

        self.taken_actions = (tf.placeholder(tf.float32, [None, self.action_size], name="taken_actions")
                              if self.is_continuous else
                              tf.placeholder(tf.int32, [None, self.action_size], name="taken_actions"))
        before = tf.trainable_variables()
        q1 = self._q("q1", "current", self.taken_actions if self.is_continuous else None)
        q2 = self._q("q2", "current", self.taken_actions if self.is_continuous else None)
        self.online_variables = new_trainable_variables(before)
        before = tf.trainable_variables()
        target_q1 = self._q("target_q1", "next", next_policy.get("action"))
        target_q2 = self._q("target_q2", "next", next_policy.get("action"))
        self.target_variables = new_trainable_variables(before)
        if self.is_continuous:  # Q at the policy's own action, for the policy loss and the value
            q1_pi = self._q("q1", "current", policy["action"], reuse=True)
            q2_pi = self._q("q2", "current", policy["action"], reuse=True)
        else:
            q1_pi, q2_pi = q1, q2

        with tf.variable_scope("entropy"):
            n_alpha = 1 if self.is_continuous else len(self.branches)
            self.log_alpha = tf.get_variable(
                "log_alpha", [n_alpha], initializer=tf.constant_initializer(math.log(init_entcoef)))
        self.alpha = tf.exp(self.log_alpha)
        if self.is_continuous:
            self.target_entropy = [-CONTINUOUS_TARGET_ENTROPY_SCALE * float(self.action_size)]
        else:
            self.target_entropy = [DISCRETE_TARGET_ENTROPY_SCALE * math.log(b) for b in self.branches]

        first = tf.minimum(q1_pi[self.streams[0]], q2_pi[self.streams[0]])
        self.value = tf.identity(tf.expand_dims(self._expected(first, policy, with_entropy=False), 1),
                                 name="value_estimate")
        self.rewards = {s: tf.placeholder(tf.float32, [None], name=f"rewards_{s}") for s in self.streams}
        self.dones = tf.placeholder(tf.float32, [None], name="dones")
        self.learning_rate = tf.placeholder_with_default(float(learning_rate), [], name="learning_rate")
        with tf.name_scope("sac_loss"):
            # Recurrent: the losses read the actor's and the critics' LSTMs through fused kernels, not the
            # loops above (``_training_policy``, ``_training_critics``).
            train_policy = self._training_policy() if self.use_recurrent else policy
            if self.use_recurrent:
                q1, q2, q1_pi, q2_pi = self._training_critics(train_policy)
            self.critic_outputs = {"q1": q1, "q2": q2, "q1_pi": q1_pi, "q2_pi": q2_pi, "target_q1": target_q1,
                                   "target_q2": target_q2}
            self.next_policy_tensors = next_policy
            self._losses(train_policy, next_policy, q1, q2, q1_pi, q2_pi, target_q1, target_q2, gammas, use_dones)
            self._optimizer(tau)

    # ------------------------------------------------------------------ inputs
    def _vectors(self, normalize: bool) -> Tuple[Optional[tf.Tensor], Optional[tf.Tensor]]:
        """The state (and next state) as the networks see it: one-hot, raw, or running-normalised."""
        self.update_normalization = None
        self.normalize = bool(normalize and self.state is not None and self.brain.state_space_type == "continuous")
        if self.state is None:
            return None, None
        if not self.normalize:
            return state_vector(self.brain, self.state), state_vector(self.brain, self.next_state)
        normalizer = RunningNormalizer(self.state)
        self.update_normalization = normalizer.update
        scaled = (self.next_state - normalizer.mean) / tf.sqrt(normalizer.variance + 1e-8)
        return normalizer.normalized, tf.clip_by_value(scaled, -10.0, 10.0)

    def _body(self, which: str, extra: Optional[tf.Tensor] = None, memory: Optional[tf.Tensor] = None,
              fused: bool = False) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
        """The shared encoding of the inputs, the LSTM's output appended when recurrent (from
        ``memory``, zeros when None), then ``extra`` (e.g. the action), then the MLP; and the LSTM's
        final memory (None unless recurrent). The next states and ``fused`` networks, which only the
        update runs, run the LSTM as one fused kernel (``training_lstm``, no final memory)."""
        vector, observations = self._features(which)
        x = encode(vector, observations, self.h_size, self.vis_encode_type)
        memory_out = None
        if self.use_recurrent:
            if memory is None:
                sequences = tf.shape(x)[0] // tf.reshape(self.sequence_length, [])
                memory = tf.zeros(tf.stack([sequences, self.m_size]))
            if which == "next" or fused:
                remembered = training_lstm(x, memory, self.sequence_length, "lstm", masks=self.masks)
            else:
                remembered, memory_out = lstm(x, memory, self.sequence_length, "lstm", masks=self.masks)
                self._loop_features = (x, remembered)  # the last loop built: its inputs and outputs
            x = tf.concat([x, remembered], axis=1)
        if extra is not None:
            x = tf.concat([x, extra], axis=1)
        return self._hidden_layers(x), memory_out

    # ------------------------------------------------------------------ networks
    def _hidden_layers(self, x: tf.Tensor) -> tf.Tensor:
        """Release 22's swish layers (``hidden_layers``); recurrent: ReLU layers, orthogonal kernels."""
        if self.use_recurrent:
            return mlp(x, self.h_size, self.num_layers, "hidden", tf.nn.relu)
        return hidden_layers(x, self.h_size, self.num_layers, "hidden")

    def _head(self, x: tf.Tensor, units: int, name: str, kind: str) -> tf.Tensor:
        """An output layer (``kind`` "q", "logits" or "gaussian"): ``release22_head``; recurrent:
        orthogonal with ``RECURRENT_HEAD_GAINS``."""
        if self.use_recurrent:
            return dense(x, units, name, gain=RECURRENT_HEAD_GAINS[kind])
        return release22_head(x, units, name, kind)

    def _policy(self, which: str, reuse: bool) -> Dict[str, object]:
        with tf.variable_scope("actor", reuse=reuse):
            memory = None if not self.use_recurrent else self.memory_in if which == "current" else self.next_memory_in
            hidden, memory_out = self._body(which, memory=memory)
            if memory_out is not None:  # the acting loop, whose fused twin the losses read
                self._actor_loop = self._loop_features
            policy = self._gaussian(hidden, which) if self.is_continuous else self._categorical(hidden, which)
            if memory_out is not None:
                policy["memory_out"] = memory_out
            return policy

    def _training_policy(self) -> Dict[str, object]:
        """The current policy again over the same variables, its LSTM output from the acting loop's
        fused twin (``trainers.models.fused_lstm``), for the losses.

        The twin gives the loop's values on every real step, so the update runs the actor's LSTM
        as one kernel forward and one backward, and no loop; ``loop_gradients`` splits the
        gradient at the twin as it would at the loop's outputs, so the step's arithmetic is the
        same. Built with the losses, after every variable: ops added before a variable would move
        the seeds TensorFlow derives for its initialiser (from the graph's op count).
        """
        x, remembered = self._actor_loop
        with tf.variable_scope("policy", reuse=True), tf.variable_scope("actor"):
            hidden = self._hidden_layers(tf.concat([x, fused_lstm(remembered)], axis=1))
            if self.is_continuous:
                return self._gaussian(hidden, "current")
            return self._categorical(hidden, "current", sample=False)  # the losses draw no action

    def _gaussian(self, hidden: tf.Tensor, which: str) -> Dict[str, object]:
        n = self.action_size
        mu = self._head(hidden, n, "mu", "gaussian")
        log_sigma = tf.clip_by_value(self._head(hidden, n, "log_sigma", "gaussian"), *LOG_SIGMA_BOUNDS)
        epsilon = self.epsilon if which == "current" else self.next_epsilon
        pre = mu + tf.exp(log_sigma) * epsilon
        pre.set_shape(mu.shape)
        gaussian = -0.5 * tf.square((pre - mu) / tf.exp(log_sigma)) - log_sigma - 0.5 * _LOG_2PI
        log_prob = tf.reduce_sum(gaussian - squash_correction(pre), axis=1)
        return {"mu": mu, "log_sigma": log_sigma, "pre_tanh": pre, "action": tf.tanh(pre), "log_prob": log_prob}

    def _categorical(self, hidden: tf.Tensor, which: str, sample: bool = True) -> Dict[str, object]:
        masks = self.action_masks if which == "current" else self.next_action_masks
        probs, log_probs, samples = [], [], []
        offset = 0
        for k, size in enumerate(self.branches):
            logits = self._head(hidden, size, f"logits_{k}", "logits")
            allowed = masks[:, offset:offset + size]
            offset += size
            logits = logits - (1.0 - allowed) * 1e9  # masked actions get probability 0 exactly
            probs.append(tf.nn.softmax(logits))
            log_probs.append(tf.nn.log_softmax(logits))
            if which == "current" and sample:
                samples.append(tf.multinomial(logits, 1))
        result: Dict[str, object] = {"probs": probs, "log_probs": log_probs}
        if samples:
            result["sample"] = tf.concat(samples, axis=1)
        return result

    def _q(self, scope: str, which: str, action: Optional[tf.Tensor], reuse: bool = False,
           fused: bool = False) -> Dict[str, tf.Tensor]:
        """One head per stream: ``[N]`` (continuous, Q at ``action``) or ``[N, sum(branches)]`` (discrete)."""
        with tf.variable_scope(scope, reuse=reuse):
            hidden, _ = self._body(which, action, fused=fused)
            if self.is_continuous:
                return {s: tf.reshape(self._head(hidden, 1, f"head_{s}", "q"), [-1]) for s in self.streams}
            return {s: self._head(hidden, int(sum(self.branches)), f"head_{s}", "q") for s in self.streams}

    def _split(self, x: tf.Tensor) -> List[tf.Tensor]:
        out, offset = [], 0
        for size in self.branches:
            out.append(x[:, offset:offset + size])
            offset += size
        return out

    def _expected(self, q: tf.Tensor, policy: Dict[str, object], with_entropy: bool) -> tf.Tensor:
        """``[N]``: continuous ``q`` (minus ``alpha log pi`` if ``with_entropy``); discrete, per branch
        ``sum_a p (q - alpha_b log p)``, averaged over branches."""
        if self.is_continuous:
            return q - self.alpha[0] * policy["log_prob"] if with_entropy else q
        per_branch = []
        for k, (p, log_p, q_b) in enumerate(zip(policy["probs"], policy["log_probs"], self._split(q))):
            inner = q_b - self.alpha[k] * log_p if with_entropy else q_b
            per_branch.append(tf.reduce_sum(p * inner, axis=1))
        return tf.add_n(per_branch) / float(len(per_branch))

    # ------------------------------------------------------------------ losses
    def _mean(self, x: tf.Tensor) -> tf.Tensor:
        """The mean over the batch; recurrent: over the real steps only (``masks``)."""
        if not self.use_recurrent:
            return tf.reduce_mean(x)
        return tf.reduce_sum(x * self.masks) / tf.maximum(tf.reduce_sum(self.masks), 1.0)

    def _training_critics(self, policy: Dict[str, object]) -> Tuple[Dict[str, tf.Tensor], ...]:
        """``q1, q2, q1_pi, q2_pi`` again over the same variables, their LSTMs as one fused kernel each.

        The critics' loops stay for ``value_estimate`` (exported); the losses read these, so the
        update runs no critic loop forward and takes their gradients from the kernel.
        """
        taken = self.taken_actions if self.is_continuous else None
        q1 = self._q("q1", "current", taken, reuse=True, fused=True)
        q2 = self._q("q2", "current", taken, reuse=True, fused=True)
        if not self.is_continuous:
            return q1, q2, q1, q2
        return (q1, q2, self._q("q1", "current", policy["action"], reuse=True, fused=True),
                self._q("q2", "current", policy["action"], reuse=True, fused=True))

    def _losses(self, policy, next_policy, q1, q2, q1_pi, q2_pi, target_q1, target_q2, gammas, use_dones) -> None:
        q1_losses, q2_losses, stream_q = [], [], []
        if not self.is_continuous:
            taken = [tf.one_hot(self.taken_actions[:, k], size) for k, size in enumerate(self.branches)]
        for s in self.streams:
            next_value = self._expected(tf.minimum(target_q1[s], target_q2[s]), next_policy, with_entropy=True)
            cut = self.dones if use_dones[s] else tf.zeros_like(self.dones)
            target = tf.stop_gradient(self.rewards[s] + float(gammas[s]) * (1.0 - cut) * next_value)
            if self.is_continuous:
                taken_q1, taken_q2 = q1[s], q2[s]
            else:
                def select(q):
                    return tf.add_n([tf.reduce_sum(q_b * t, axis=1) for q_b, t in zip(self._split(q), taken)]) \
                        / float(len(self.branches))
                taken_q1, taken_q2 = select(q1[s]), select(q2[s])
            q1_losses.append(0.5 * self._mean(tf.square(taken_q1 - target)))
            q2_losses.append(0.5 * self._mean(tf.square(taken_q2 - target)))
            stream_q.append(tf.minimum(q1_pi[s], q2_pi[s]))
        self.q1_loss = tf.add_n(q1_losses) / len(self.streams)
        self.q2_loss = tf.add_n(q2_losses) / len(self.streams)
        min_q = tf.stop_gradient(tf.add_n(stream_q) / len(self.streams)) if not self.is_continuous else \
            tf.add_n(stream_q) / len(self.streams)
        alpha = tf.stop_gradient(self.alpha)
        if self.is_continuous:
            log_pi = policy["log_prob"]
            self.policy_loss = self._mean(alpha[0] * log_pi - min_q)
            self.entropy = -self._mean(log_pi)  # of the squashed sample (a Monte Carlo estimate)
            self.entropy_loss = -self._mean(self.log_alpha[0] * tf.stop_gradient(log_pi + self.target_entropy[0]))
        else:
            per_branch_policy, entropy_losses, entropies = [], [], []
            for k, (p, log_p, q_b) in enumerate(zip(policy["probs"], policy["log_probs"], self._split(min_q))):
                per_branch_policy.append(tf.reduce_sum(p * (alpha[k] * log_p - q_b), axis=1))
                neg_entropy = tf.reduce_sum(p * log_p, axis=1)
                entropies.append(-self._mean(neg_entropy))
                entropy_losses.append(
                    -self._mean(self.log_alpha[k] * tf.stop_gradient(neg_entropy + self.target_entropy[k])))
            self.policy_loss = self._mean(tf.add_n(per_branch_policy))
            self.entropy = tf.add_n(entropies)
            self.entropy_loss = tf.add_n(entropy_losses) / float(len(self.branches))
        # Keyed by their TensorBoard tags, ML-Agents' names for SAC's quantities where it has them.
        coefficient = "Policy/Continuous Entropy Coeff" if self.is_continuous else "Policy/Discrete Entropy Coeff"
        self.metrics = {"Losses/Q1 Loss": self.q1_loss, "Losses/Q2 Loss": self.q2_loss,
                        "Losses/Policy Loss": self.policy_loss, "Losses/Entropy Coeff Loss": self.entropy_loss,
                        "Losses/Update Entropy": self.entropy, coefficient: tf.reduce_mean(self.alpha)}

    def _optimizer(self, tau: float) -> None:
        """Gradients from the current parameters, then Adam on each loss's variables, then the soft
        target update: one op (``trainers.sac.update``)."""
        groups = ((self.policy_loss, self.policy_variables),
                  (self.q1_loss + self.q2_loss, self.online_variables),
                  (self.entropy_loss, [self.log_alpha]))
        # Recurrent: the gradients through the LSTMs come from one fused kernel each (``loop_gradients``).
        self.train_op = fused_sac_update(groups, self.learning_rate, self.online_variables, self.target_variables,
                                         tau, wait_for=list(self.metrics.values()),
                                         gradients=loop_gradients if self.use_recurrent else None)


__all__ = ["SACModel", "squash_correction", "hidden_layers", "linear", "he_normal", "swish", "release22_head",
           "CONTINUOUS_TARGET_ENTROPY_SCALE", "DISCRETE_TARGET_ENTROPY_SCALE", "LOGITS_GAIN", "GAUSSIAN_GAIN",
           "RECURRENT_HEAD_GAINS"]
