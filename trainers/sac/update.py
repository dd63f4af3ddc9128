"""SAC's gradient step in few graph nodes: one Adam over all parameters as one flat vector.

At 3DBall's size (batch 128, hidden 64) a gradient step is a few hundred small ops, and the
executor's cost per op, not the arithmetic, is most of it. A fused ``ApplyAdam`` kernel per
variable is among the dearest of them (a traced step spends about a quarter of its op time in
the 21 of them), while one update of all parameters together is a handful of element-wise ops
on one vector (``bench/sac_step.py``: about half the CPU of the step with ``ApplyAdam``).
So the step here

* computes every group's gradients (each loss against its own variables) from the parameters
  before the step;
* lays all gradients and parameters end to end in one vector each and applies one Adam to them,
  with one pair of moment vectors and one pair of beta powers for every group (the groups share
  the learning rate, the betas and the step count, so this is each group's own Adam, element by
  element); the arithmetic is ``ApplyAdam``'s, operation for operation, so the parameters come
  out bit for bit as three ``tf.train.AdamOptimizer`` would leave them;
* moves the targets by ``tau`` towards the updated online parameters, also as one vector.

Ordering: every gradient, metric and flattened parameter is computed before the first assignment
(one barrier), because assigning a classic variable overwrites the buffer its earlier reads alias.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from trainers.tf_utils import tf

ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-8


def _flat(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    return tf.concat([tf.reshape(t, [-1]) for t in tensors], axis=0)


def _size(variable: tf.Variable) -> int:
    return int(np.prod(variable.shape.as_list()))


def _assign_pieces(variables: Sequence[tf.Variable], flat: tf.Tensor) -> List[tf.Operation]:
    """Assign ``flat``, cut in the variables' sizes and shapes, to ``variables``."""
    pieces = tf.split(flat, [_size(v) for v in variables])
    return [tf.assign(v, tf.reshape(p, v.shape)).op for v, p in zip(variables, pieces)]


def fused_sac_update(groups: Sequence[Tuple[tf.Tensor, Sequence[tf.Variable]]], learning_rate: tf.Tensor,
                     online: Sequence[tf.Variable], target: Sequence[tf.Variable], tau: float,
                     wait_for: Sequence[tf.Tensor] = ()) -> tf.Operation:
    """One op: Adam on each ``(loss, variables)`` group, then ``target <- tau online + (1 - tau) target``.

    ``online`` must be the variables of one group, in that group's order (the online critics), and
    ``target`` their targets in the same order. ``wait_for`` (e.g. the metrics fetched with the
    step) is computed from the parameters before the step as well.
    """
    variables: List[tf.Variable] = []
    gradients: List[tf.Tensor] = []
    for loss, group in groups:
        for variable, gradient in zip(group, tf.gradients(loss, list(group))):
            if gradient is None:
                raise ValueError(f"the SAC loss {loss.name} has no gradient for its variable {variable.name}; every "
                                 "variable of a group must take part in its loss. Remove it from the group.")
            variables.append(variable)
            gradients.append(gradient)
    start = next((k for k in range(len(variables)) if variables[k:k + len(online)] == list(online)), None)
    if start is None or len(target) != len(online):
        raise ValueError(f"the {len(online)} online critic variables must be one group's variables in order, with "
                         f"one target each (got {len(target)} targets). Pass the critics' group as built.")
    total = sum(_size(v) for v in variables)
    with tf.variable_scope("sac_adam"):
        m = tf.get_variable("m", [total], initializer=tf.zeros_initializer(), trainable=False)
        v = tf.get_variable("v", [total], initializer=tf.zeros_initializer(), trainable=False)
        beta1_power = tf.get_variable("beta1_power", [], initializer=tf.constant_initializer(ADAM_BETA1),
                                      trainable=False)
        beta2_power = tf.get_variable("beta2_power", [], initializer=tf.constant_initializer(ADAM_BETA2),
                                      trainable=False)
    # Everything that reads a parameter before the step, in one barrier ahead of every assignment.
    grad = _flat(gradients)
    params = _flat(variables)
    targets = _flat(target)
    barrier = tf.group(grad, params, targets, *wait_for, name="before_assignments")
    one = np.float32(1.0)
    lr_t = learning_rate * tf.sqrt(one - beta2_power) / (one - beta1_power)
    new_m = m + (grad - m) * (one - np.float32(ADAM_BETA1))
    new_v = v + (tf.square(grad) - v) * (one - np.float32(ADAM_BETA2))
    new_params = params - (new_m * lr_t) / (tf.sqrt(new_v) + np.float32(ADAM_EPSILON))
    new_online = new_params[sum(_size(x) for x in variables[:start]):][:sum(_size(x) for x in online)]
    new_targets = tau * new_online + (1.0 - tau) * targets
    with tf.control_dependencies([barrier, lr_t]):
        assignments = [tf.assign(m, new_m).op, tf.assign(v, new_v).op,
                       tf.assign(beta1_power, beta1_power * ADAM_BETA1).op,
                       tf.assign(beta2_power, beta2_power * ADAM_BETA2).op]
        assignments += _assign_pieces(variables, new_params) + _assign_pieces(target, new_targets)
    return tf.group(*assignments, name="train_and_soft_update")


__all__ = ["fused_sac_update", "ADAM_BETA1", "ADAM_BETA2", "ADAM_EPSILON"]
