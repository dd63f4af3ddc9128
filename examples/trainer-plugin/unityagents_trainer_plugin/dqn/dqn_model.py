"""The DQN graph of one brain: online and target Q-networks and the TD update, built once.

Exported nodes (``docs/plugins.md`` §6): ``action``, the greedy action, int64 ``[N, 1]`` (exploration is done
by the trainer in NumPy, so the exported graph is the greedy policy) and ``value_estimate``
(``max_a Q``, ``[N, 1]``); inputs ``state`` / ``observation_k`` and ``batch_size``.

The Q-network is the seed plugin's (``..networks``): ``num_layers`` swish layers of ``hidden_units`` over the
encoded inputs (a continuous state optionally normalised by running statistics), then one
linear output per action. The update regresses ``Q(s, a)`` to ``y = r + gamma * (1 - done) *
Q_target(s', a*)`` with the Huber loss (PyTorch's ``smooth_l1_loss``), where ``a* = argmax_a
Q(s', a)`` of the online network (double DQN, van Hasselt et al. 2016) or ``argmax_a
Q_target(s', a)``. ``s'`` is fed through ``next_state`` / ``next_observation_k`` and normalised
with the statistics of ``s``.
"""
from __future__ import annotations

from typing import List, Optional

from trainers.encoders import encode, observation_placeholders, state_placeholder, state_vector
from trainers.models import RunningNormalizer, new_trainable_variables
from trainers.tf_utils import tf
from unityagents.brain import BrainParameters

from ..networks import body, glorot_uniform, linear


def huber(x: tf.Tensor) -> tf.Tensor:
    """``0.5 x^2`` for ``|x| <= 1``, ``|x| - 0.5`` beyond; written without ``Select`` ops."""
    absolute = tf.abs(x)
    quadratic = tf.minimum(absolute, 1.0)
    return 0.5 * tf.square(quadratic) + (absolute - quadratic)


class DQNModel:
    """Public tensors: ``state`` / ``observations`` (and ``next_*``), ``batch_size``, ``q_values``,
    ``output`` (greedy action), ``value``, ``next_q_target``; ``update_normalization`` (None unless normalising); the
    update side ``taken_actions``, ``rewards``, ``dones``, ``learning_rate``, ``target``, ``loss``,
    ``update_batch``; ``online_variables`` / ``target_variables`` in the same order (for
    ``OffPolicyTrainer.create_target_updates``)."""

    def __init__(self, brain: BrainParameters, h_size: int, num_layers: int, learning_rate: float,
                 gamma: float, double_dqn: bool, max_grad_norm: Optional[float], normalize: bool = False,
                 vis_encode_type: str = "simple"):
        n_actions = brain.action_space_size
        self.batch_size = tf.placeholder(tf.int32, None, name="batch_size")
        self.state = state_placeholder(brain, "state") if brain.state_space_size > 0 else None
        self.observations = observation_placeholders(brain, "observation")
        self.next_state = state_placeholder(brain, "next_state") if brain.state_space_size > 0 else None
        self.next_observations = observation_placeholders(brain, "next_observation")
        self.update_normalization: Optional[tf.Operation] = None
        vector = next_vector = None
        if self.state is not None:
            if normalize and brain.state_space_type == "continuous":
                normalizer = RunningNormalizer(self.state)
                vector, self.update_normalization = normalizer.normalized, normalizer.update
                next_vector = normalizer.apply(self.next_state)
            else:
                vector, next_vector = state_vector(brain, self.state), state_vector(brain, self.next_state)

        def q_network(inputs: Optional[tf.Tensor], observations: List[tf.Tensor], scope: str,
                      reuse: bool = False) -> tf.Tensor:
            with tf.variable_scope(scope, reuse=reuse):
                hidden = body(encode(inputs, observations, h_size, vis_encode_type), h_size, num_layers, "hidden")
                return linear(hidden, n_actions, "q_head", glorot_uniform())

        before = tf.trainable_variables()
        self.q_values = q_network(vector, self.observations, "online")
        self.online_variables = new_trainable_variables(before)
        self.output = tf.expand_dims(tf.argmax(self.q_values, axis=1), 1, name="action")
        self.value = tf.reduce_max(self.q_values, axis=1, keepdims=True, name="value_estimate")

        before = tf.trainable_variables()
        self.next_q_target = next_q_target = q_network(next_vector, self.next_observations, "target")
        self.target_variables = new_trainable_variables(before)

        self.taken_actions = tf.placeholder(tf.int32, [None], name="taken_actions")
        self.rewards = tf.placeholder(tf.float32, [None], name="rewards")
        self.dones = tf.placeholder(tf.float32, [None], name="dones")
        self.learning_rate = tf.placeholder_with_default(float(learning_rate), [], name="learning_rate")
        with tf.name_scope("dqn_loss"):
            if double_dqn:
                next_q_online = q_network(next_vector, self.next_observations, "online", reuse=True)
                best = tf.argmax(next_q_online, axis=1)
            else:
                best = tf.argmax(next_q_target, axis=1)
            next_value = tf.reduce_sum(next_q_target * tf.one_hot(best, n_actions), axis=1)
            self.target = tf.stop_gradient(self.rewards + gamma * (1.0 - self.dones) * next_value)
            q_taken = tf.reduce_sum(self.q_values * tf.one_hot(self.taken_actions, n_actions), axis=1)
            self.loss = tf.reduce_mean(huber(q_taken - self.target))
            gradients = tf.gradients(self.loss, self.online_variables)
            if max_grad_norm is not None:
                gradients, _ = tf.clip_by_global_norm(gradients, max_grad_norm)
            optimizer = tf.train.AdamOptimizer(self.learning_rate)
            self.update_batch = optimizer.apply_gradients(list(zip(gradients, self.online_variables)))
