"""The layers both example trainers build their networks from, initialised as the seed plugin's.

ML-Agents' torch networks (which the seed plugin's A2C and DQN use) initialise hidden layers with
He's normal initialisation (standard deviation ``sqrt(2 / fan_in)``), scale the heads by a gain
(0.2 for a Gaussian mean, 0.1 for logits), use Glorot's uniform initialisation for value heads,
zero biases and the swish activation. The scale matters as much as the algorithm: with a fixed
Adam step per weight, how fast a network's output moves depends on the size of its activations.
"""
from __future__ import annotations

from trainers.tf_utils import tf


def swish(x: tf.Tensor) -> tf.Tensor:
    """``x * sigmoid(x)``."""
    return x * tf.sigmoid(x)


def he_normal(gain: float = 1.0):
    """Normal weights of standard deviation ``gain * sqrt(2 / fan_in)``."""
    return tf.variance_scaling_initializer(scale=2.0 * gain * gain, mode="fan_in", distribution="untruncated_normal")


def glorot_uniform():
    """Uniform weights in ``+-sqrt(6 / (fan_in + fan_out))``."""
    return tf.glorot_uniform_initializer()


def linear(x: tf.Tensor, units: int, name: str, initializer=None) -> tf.Tensor:
    """``x @ W + b`` with ``W`` from ``initializer`` (He normal unless given) and ``b = 0``."""
    with tf.variable_scope(name):
        kernel = tf.get_variable("kernel", [int(x.shape[-1]), units], initializer=initializer or he_normal())
        bias = tf.get_variable("bias", [units], initializer=tf.zeros_initializer())
    return tf.nn.bias_add(tf.matmul(x, kernel), bias)


def body(x: tf.Tensor, units: int, num_layers: int, name: str) -> tf.Tensor:
    """``num_layers`` swish layers of ``units`` (``x`` itself when ``num_layers`` is 0)."""
    with tf.variable_scope(name):
        for i in range(num_layers):
            x = swish(linear(x, units, f"dense_{i}"))
    return x
