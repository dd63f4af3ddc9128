"""The PPO graph of one brain: policy, value, and the clipped-surrogate update, all built once.

``create_agent_model(brain, ...)`` keeps the seed's signature and public attributes
(``state_in``, ``observation_in``, ``batch_size``, ``sequence_length``, ``epsilon``, ``output``,
``probs``, ``value``, ``entropy``, ``learning_rate``, ``memory_in``/``memory_out``), and names its
nodes per the export contract of DESIGN §5, relative to the caller's variable scope:

========================  =================================================================
inputs                    ``state``, ``observation_k``, ``batch_size``, ``sequence_length``,
                          ``recurrent_in``, ``epsilon`` (continuous; defaults to zeros)
outputs                   ``action``, ``value_estimate``, ``action_probs``, ``recurrent_out``
========================  =================================================================

Architecture: camera frames go through one small CNN each (shared by policy and value, as in the
Nature-CNN trunk), concatenated with the vector state (one-hot if discrete, running-normalised if
``normalize``); with ``use_recurrent`` that concatenation feeds one LSTM whose state is the brain's
memory, and the LSTM output is appended to it (so the small memory adds history rather than
replacing the present input). Policy and value then have separate ``num_layers`` x ``h_size`` tanh
MLPs (separate networks learn faster on simple control tasks, ``reference/peers.md`` §4a.13).

The update differs from the original on purpose (``reference/api2-facts.md`` §6, §11.15): the
ratio is evaluated at the *stored* action against the stored log-probability of the whole action
(log-probs summed over dimensions), the value loss is clipped around the stored old prediction,
the entropy bonus applies to continuous actions too, advantages are normalised per minibatch,
gradients are clipped by global norm and Adam uses epsilon 1e-5. The learning rate, the clip range
and the entropy coefficient are placeholders with defaults: the trainer computes their schedules
from its agent-step counter in Python, so ``--load`` restores them exactly.
"""
from __future__ import annotations

import math
from typing import List, Optional

from trainers.models import (
    RunningNormalizer,
    dense,
    lstm,
    mlp,
    new_trainable_variables,
    visual_encoder,
    visual_encoder_min_size,
)
from trainers.tf_utils import tf
from trainers.trainer import UnityTrainerException
from unityagents.brain import BrainParameters

_LOG_2PI = math.log(2.0 * math.pi)


def validate_memory_size(brain: BrainParameters, m_size: Optional[int]) -> int:
    """The LSTM memory size for ``brain``: ``m_size`` if given, else the brain's ``memorySize``.

    The memory holds the LSTM's ``c`` and ``h`` halves, so it must be positive and even.
    """
    size = brain.memory_space_size if m_size is None else m_size
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size % 2:
        raise UnityTrainerException(
            f"Brain '{brain.brain_name}' uses a recurrent model (use_recurrent: true), which needs a positive, even "
            f"memory size (the LSTM state c and h, half each), but its memorySize is {size!r}. Set the brain's "
            "Memory Size in the scene to an even number such as 64, or set use_recurrent: false."
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
    ):
        self.brain = brain
        self.is_continuous = brain.action_space_type == "continuous"
        self.use_recurrent = use_recurrent
        self.m_size = validate_memory_size(brain, m_size) if use_recurrent else None
        self._check_inputs(brain)
        variables_before = tf.trainable_variables()

        self.batch_size = tf.placeholder(tf.int32, None, name="batch_size")
        self.sequence_length = tf.placeholder(tf.int32, None, name="sequence_length")
        features = self._create_inputs(brain, h_size, normalize)
        encoded = features[0] if len(features) == 1 else tf.concat(features, axis=1)
        # Per-step weights: 1 for real steps, 0 for the Buffer's padding; ones unless fed.
        self.masks = tf.placeholder_with_default(tf.ones(tf.shape(encoded)[:1]), [None], name="masks")
        if use_recurrent:
            self.memory_in = tf.placeholder(tf.float32, [None, self.m_size], name="recurrent_in")
            remembered, memory_out = lstm(encoded, self.memory_in, self.sequence_length, "lstm", masks=self.masks)
            self.memory_out = tf.identity(memory_out, name="recurrent_out")
            # The MLPs see the current features next to the LSTM output: the memory (memorySize/2
            # units, often 16) then only has to carry what the present input lacks (a cue seen
            # earlier, a velocity), instead of being a bottleneck for everything the policy uses.
            encoded = tf.concat([encoded, remembered], axis=1)
        else:
            self.memory_in = self.memory_out = None

        hidden_policy = mlp(encoded, h_size, num_layers, "policy")
        hidden_value = mlp(encoded, h_size, num_layers, "value")
        self.value = tf.identity(dense(hidden_value, 1, "value_head", gain=1.0), name="value_estimate")
        if self.is_continuous:
            self._create_gaussian_policy(hidden_policy, brain.action_space_size)
        else:
            self._create_categorical_policy(hidden_policy, brain.action_space_size)
        self.variables = new_trainable_variables(variables_before)
        self._create_ppo_optimizer(lr, epsilon, beta, vf_coef, max_grad_norm, clip_value)

    # ------------------------------------------------------------------ inputs and encoders
    @staticmethod
    def _check_inputs(brain: BrainParameters) -> None:
        if brain.state_space_size <= 0 and brain.number_observations == 0:
            raise UnityTrainerException(
                f"Brain '{brain.brain_name}' has neither a state (stateSize is {brain.state_space_size}) nor a "
                "camera, so a policy has nothing to look at. Give it a state or a camera."
            )
        smallest = visual_encoder_min_size()
        for k, camera in enumerate(brain.camera_resolutions):
            if camera["height"] < smallest or camera["width"] < smallest:
                raise UnityTrainerException(
                    f"Camera {k} of brain '{brain.brain_name}' is {camera['width']}x{camera['height']} pixels; the "
                    f"visual encoder needs at least {smallest}x{smallest}. Raise the camera resolution."
                )

    def _create_inputs(self, brain: BrainParameters, h_size: int, normalize: bool) -> List[tf.Tensor]:
        """Placeholders for the state and cameras; returns one feature tensor per input."""
        features = []
        self.state_in = None
        self.update_normalization = None
        self.normalize = normalize and brain.state_space_type == "continuous" and brain.state_space_size > 0
        if brain.state_space_size > 0:
            if brain.state_space_type == "continuous":
                self.state_in = tf.placeholder(tf.float32, [None, brain.state_space_size], name="state")
                if self.normalize:
                    normalizer = RunningNormalizer(self.state_in)
                    self.vector_in = normalizer.normalized
                    self.update_normalization = normalizer.update
                else:
                    self.vector_in = tf.identity(self.state_in, name="vector_in")
            else:
                self.state_in = tf.placeholder(tf.int32, [None, 1], name="state")
                self.vector_in = tf.one_hot(tf.reshape(self.state_in, [-1]), brain.state_space_size, name="vector_in")
            features.append(self.vector_in)
        else:
            self.vector_in = None

        self.observation_in = []
        for k, camera in enumerate(brain.camera_resolutions):
            channels = 1 if camera.get("blackAndWhite") else 3
            image = tf.placeholder(
                tf.float32, [None, camera["height"], camera["width"], channels], name=f"observation_{k}"
            )
            self.observation_in.append(image)
            features.append(visual_encoder(image, h_size, f"visual_encoder_{k}"))
        return features

    # ------------------------------------------------------------------ policies
    def _create_gaussian_policy(self, hidden: tf.Tensor, action_size: int) -> None:
        """Diagonal Gaussian with a state-independent log-std initialised to 0 (sigma = 1)."""
        self.mu = dense(hidden, action_size, "policy_head", gain=0.01)
        self.log_sigma = tf.get_variable("log_sigma", [action_size], initializer=tf.zeros_initializer())
        sigma = tf.exp(self.log_sigma)
        # Zeros unless fed: Unity's Internal brain then acts with the mean. The shape is left
        # open so that a single [0] broadcasts, as well as a full [N, actionSize] noise feed.
        self.epsilon = tf.placeholder_with_default(tf.zeros([1]), None, name="epsilon")
        sampled = self.mu + sigma * self.epsilon
        sampled.set_shape(self.mu.shape)
        self.output = tf.identity(sampled, name="action")

        def log_prob_per_dim(x):
            return -0.5 * tf.square((x - self.mu) / sigma) - self.log_sigma - 0.5 * _LOG_2PI

        output_log_prob = log_prob_per_dim(tf.stop_gradient(self.output))
        self.probs = tf.exp(output_log_prob, name="action_probs")
        self.log_prob = tf.reduce_sum(output_log_prob, axis=1)
        entropy = tf.reduce_sum(self.log_sigma + 0.5 * (_LOG_2PI + 1.0))
        self.entropy = entropy * tf.ones_like(self.mu[:, 0])
        self.taken_actions = tf.placeholder(tf.float32, [None, action_size], name="taken_actions")
        self._new_log_prob = tf.reduce_sum(log_prob_per_dim(self.taken_actions), axis=1)

    def _create_categorical_policy(self, hidden: tf.Tensor, action_size: int) -> None:
        """Softmax over ``action_size`` actions, sampled in the graph."""
        logits = dense(hidden, action_size, "policy_head", gain=0.01)
        log_probs = tf.nn.log_softmax(logits)
        self.probs = tf.nn.softmax(logits, name="action_probs")
        self.output = tf.identity(tf.multinomial(logits, 1), name="action")
        self.log_prob = tf.reduce_sum(log_probs * tf.one_hot(self.output[:, 0], action_size), axis=1)
        self.entropy = -tf.reduce_sum(self.probs * log_probs, axis=1)
        self.taken_actions = tf.placeholder(tf.int32, [None], name="taken_actions")
        self._new_log_prob = tf.reduce_sum(log_probs * tf.one_hot(self.taken_actions, action_size), axis=1)

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

        with tf.name_scope("ppo_loss"):
            weights = self.masks
            count = tf.maximum(tf.reduce_sum(weights), 1.0)

            def masked_mean(x):
                return tf.reduce_sum(x * weights) / count

            adv_mean = masked_mean(self.advantages)
            adv_std = tf.sqrt(masked_mean(tf.square(self.advantages - adv_mean)))
            advantages = (self.advantages - adv_mean) / (adv_std + 1e-8)

            log_ratio = self._new_log_prob - self.old_log_probs
            ratio = tf.exp(log_ratio)
            clipped_ratio = tf.minimum(tf.maximum(ratio, 1.0 - self.clip_epsilon), 1.0 + self.clip_epsilon)
            self.policy_loss = -masked_mean(tf.minimum(ratio * advantages, clipped_ratio * advantages))

            value = self.value[:, 0]
            value_error = tf.square(value - self.returns)
            if clip_value:
                clipped_value = self.old_value + tf.minimum(
                    tf.maximum(value - self.old_value, -self.clip_epsilon), self.clip_epsilon
                )
                value_error = tf.maximum(value_error, tf.square(clipped_value - self.returns))
            self.value_loss = 0.5 * masked_mean(value_error)

            self.mean_entropy = masked_mean(self.entropy)
            self.loss = self.policy_loss + vf_coef * self.value_loss - self.beta * self.mean_entropy
            # k3 estimator of KL(old || new): unbiased and always >= 0 (Schulman's blog "Approximating KL").
            self.approx_kl = masked_mean((ratio - 1.0) - log_ratio)
            self.clip_fraction = masked_mean(tf.cast(tf.abs(ratio - 1.0) > self.clip_epsilon, tf.float32))

            gradients = tf.gradients(self.loss, self.variables)
            gradients, self.grad_norm = tf.clip_by_global_norm(gradients, max_grad_norm)
            optimizer = tf.train.AdamOptimizer(self.learning_rate, epsilon=1e-5)
            self.update_batch = optimizer.apply_gradients(list(zip(gradients, self.variables)))


def create_agent_model(
    brain: BrainParameters,
    lr: float = 1e-4,
    h_size: int = 128,
    epsilon: float = 0.2,
    beta: float = 1e-3,
    max_step: float = 5e6,
    normalize: bool = False,
    use_recurrent: bool = False,
    num_layers: int = 2,
    m_size: Optional[int] = None,
    vf_coef: float = 0.5,
    max_grad_norm: float = 0.5,
    clip_value: bool = True,
) -> PPOModel:
    """Build the PPO graph of ``brain`` in the current graph and variable scope.

    :param lr: default of the ``learning_rate`` placeholder (the trainer feeds its schedule).
    :param epsilon: default of the ``clip_epsilon`` placeholder: the PPO clip range, also used to
        clip the value around its old prediction.
    :param beta: default of the ``beta`` placeholder: the entropy-bonus coefficient.
    :param max_step: accepted for the seed's signature; schedules are computed by the trainer
        from its agent-step counter, not in the graph.
    :param m_size: LSTM memory size; ``None`` takes the brain's ``memorySize`` (must be even, > 0).
    :param vf_coef: weight of the value loss in the single loss both networks minimise.
    :param max_grad_norm: the global norm gradients are clipped to.
    :param clip_value: clip the value loss around the old predictions (PPO2-style).
    """
    del max_step  # see the docstring: the schedule lives in the trainer
    return PPOModel(
        brain, lr=lr, h_size=h_size, epsilon=epsilon, beta=beta, normalize=normalize,
        use_recurrent=use_recurrent, num_layers=num_layers, m_size=m_size, vf_coef=vf_coef,
        max_grad_norm=max_grad_norm, clip_value=clip_value,
    )


__all__ = ["PPOModel", "create_agent_model", "validate_memory_size"]
