"""The A2C graph of one brain: policy, critic and the actor-critic loss with one optimiser step.

Built once, in the trainer's ``setup``, under the brain's scope. Exported nodes (``docs/plugins.md`` §6):
``action`` (float32 ``[N, actionSize]``, or int64 ``[N, 1]`` for discrete actions),
``value_estimate`` ``[N, 1]`` and ``action_probs``; inputs ``state`` / ``observation_k``,
``batch_size`` and, for continuous actions, ``epsilon`` (the Gaussian noise, zeros unless fed, so
Unity's Internal brain acts with the mean).

The networks are the seed plugin's (``..networks``): the policy and the critic each read the
encoded inputs through ``num_layers`` swish layers of ``hidden_units`` (the critic reads the
policy's with ``shared_critic``); a continuous policy is a Gaussian whose mean is a linear head
and whose log-std is one state-independent variable, initialised to 0; a discrete one is a
softmax.

Loss on a batch of N steps, with ``A`` the advantages (normalised over the update by the trainer)
and ``R`` the returns::

    policy_loss = -mean(log pi(a|s) * A)
    value_loss  = mean((V(s) - R)^2)
    loss        = policy_loss + vf_coef * value_loss - beta * mean(entropy)

where the entropy of a Gaussian is the mean over the action's dimensions, and ``learning_rate``
and ``beta`` are fed at each step (their schedules are the trainer's).
"""
from __future__ import annotations

import math
from typing import Optional

from trainers.encoders import create_inputs
from trainers.models import new_trainable_variables
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters

from ..networks import body, glorot_uniform, he_normal, linear

_LOG_2PI = math.log(2.0 * math.pi)


class A2CModel:
    """Public tensors: ``inputs`` (a ``trainers.encoders.Inputs``), ``batch_size``, ``epsilon``
    (continuous), ``output``, ``value``, ``probs``, ``entropy``; the loss side ``taken_actions``,
    ``advantages``, ``returns``, ``learning_rate``, ``beta``, ``policy_loss``, ``value_loss``,
    ``mean_entropy``, ``loss`` and ``update_batch`` (one optimiser step)."""

    def __init__(
        self,
        brain: BrainParameters,
        h_size: int,
        num_layers: int,
        normalize: bool,
        learning_rate: float,
        optimizer: str,
        beta: float,
        vf_coef: float,
        max_grad_norm: Optional[float],
        shared_critic: bool = False,
        vis_encode_type: str = "simple",
    ):
        self.is_continuous = brain.action_space_type == "continuous"
        variables_before = tf.trainable_variables()
        self.batch_size = tf.placeholder(tf.int32, None, name="batch_size")
        # The export contract's inputs, from the trainers package's one encoder (as PPO builds them).
        self.inputs = create_inputs(brain, h_size, normalize, vis_encode_type=vis_encode_type)
        features = self.inputs.encoded
        hidden_policy = body(features, h_size, num_layers, "policy")
        hidden_value = hidden_policy if shared_critic else body(features, h_size, num_layers, "value")
        self.value = tf.identity(linear(hidden_value, 1, "value_head", glorot_uniform()), name="value_estimate")
        if self.is_continuous:
            self._gaussian_policy(hidden_policy, brain.action_space_size)
        else:
            self._categorical_policy(hidden_policy, brain.action_space_size)
        self.variables = new_trainable_variables(variables_before)
        self._loss_and_optimizer(learning_rate, optimizer, beta, vf_coef, max_grad_norm)

    def _gaussian_policy(self, hidden: tf.Tensor, action_size: int) -> None:
        """Diagonal Gaussian; the log-std is a state-independent variable initialised to 0."""
        mu = linear(hidden, action_size, "policy_head", he_normal(0.2))
        self.log_sigma = tf.get_variable("log_sigma", [action_size], initializer=tf.zeros_initializer())
        sigma = tf.exp(self.log_sigma)
        self.epsilon = tf.placeholder_with_default(tf.zeros([1]), None, name="epsilon")
        sampled = mu + sigma * self.epsilon
        sampled.set_shape(mu.shape)
        self.output = tf.identity(sampled, name="action")
        self.taken_actions = tf.placeholder(tf.float32, [None, action_size], name="taken_actions")

        def log_prob_per_dim(x: tf.Tensor) -> tf.Tensor:
            return -0.5 * tf.square((x - mu) / sigma) - self.log_sigma - 0.5 * _LOG_2PI

        self.probs = tf.exp(log_prob_per_dim(tf.stop_gradient(self.output)), name="action_probs")
        self.log_prob = tf.reduce_sum(log_prob_per_dim(self.taken_actions), axis=1)
        self.entropy = tf.reduce_mean(self.log_sigma + 0.5 * (_LOG_2PI + 1.0)) * tf.ones_like(mu[:, 0])

    def _categorical_policy(self, hidden: tf.Tensor, action_size: int) -> None:
        """Softmax over the actions, sampled in the graph (Unity's Internal brain samples too)."""
        self.epsilon = None
        logits = linear(hidden, action_size, "policy_head", he_normal(0.1))
        log_probs = tf.nn.log_softmax(logits)
        self.probs = tf.nn.softmax(logits, name="action_probs")
        self.output = tf.identity(tf.multinomial(logits, 1), name="action")
        self.taken_actions = tf.placeholder(tf.int32, [None], name="taken_actions")
        self.log_prob = tf.reduce_sum(log_probs * tf.one_hot(self.taken_actions, action_size), axis=1)
        self.entropy = -tf.reduce_sum(self.probs * log_probs, axis=1)

    def _loss_and_optimizer(self, learning_rate: float, optimizer: str, beta: float, vf_coef: float,
                            max_grad_norm: Optional[float]) -> None:
        self.advantages = tf.placeholder(tf.float32, [None], name="advantages")
        self.returns = tf.placeholder(tf.float32, [None], name="returns")
        self.learning_rate = tf.placeholder_with_default(float(learning_rate), [], name="learning_rate")
        self.beta = tf.placeholder_with_default(float(beta), [], name="beta")
        with tf.name_scope("a2c_loss"):
            self.policy_loss = -tf.reduce_mean(self.log_prob * self.advantages)
            self.value_loss = tf.reduce_mean(tf.square(self.value[:, 0] - self.returns))
            self.mean_entropy = tf.reduce_mean(self.entropy)
            self.loss = self.policy_loss + vf_coef * self.value_loss - self.beta * self.mean_entropy
            gradients = tf.gradients(self.loss, self.variables)
            if max_grad_norm is not None:
                gradients, _ = tf.clip_by_global_norm(gradients, max_grad_norm)
            if optimizer == "rmsprop":
                opt = tf.train.RMSPropOptimizer(self.learning_rate, decay=0.99, epsilon=1e-5)
            else:
                opt = tf.train.AdamOptimizer(self.learning_rate)
            self.update_batch = opt.apply_gradients(list(zip(gradients, self.variables)))
