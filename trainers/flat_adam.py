"""Adam over every parameter of an update as one flat vector: a handful of ops instead of one per variable.

At the sizes these trainers run on CPU (3DBall: batch 128-256, hidden 64-128) a gradient step is
a few hundred small ops, and the executor's cost per op, not the arithmetic, is most of it. A
fused ``ApplyAdam`` kernel per variable costs about 20 us each there, whereas the update of all
variables together, laid end to end in one vector, is a handful of element-wise ops. So
``FlatAdam``

* computes each group's gradients (each loss against its own variables) from the parameters
  before the step, and optionally scales them all by ``clip_norm / max(global norm, clip_norm)``
  (``tf.clip_by_global_norm``, with the norm summed over the variables in the same order);
* applies one Adam to the concatenated gradients and parameters, with one pair of moment vectors
  and one pair of beta powers for all groups. The groups share the learning rate, the betas, the
  epsilon and the step count, so this is each group's own Adam, element by element; the arithmetic
  is ``ApplyAdam``'s, operation for operation, so the parameters come out bit for bit as one
  ``tf.train.AdamOptimizer`` per group would leave them (``tests/trainers/test_flat_adam.py``).

Ordering: every gradient, every flattened parameter and every tensor of ``wait_for`` (the metrics
fetched with the step, anything else that reads a parameter) is computed before the first
assignment, behind one barrier, because assigning a classic (ref) variable overwrites the buffer
its earlier reads alias.

Checkpoints: the optimizer state is four variables under ``name`` (``m``, ``v``, ``beta1_power``,
``beta2_power``) instead of two slots per variable, and they are listed in the graph collection
``OPTIMIZER_STATE``, so a restore can tell the optimizer's state from the weights
(``runner.saver``: a checkpoint with per-variable ``Adam`` slots restores its weights and starts
the optimizer afresh).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from trainers.tf_utils import tf

ADAM_BETA1, ADAM_BETA2 = 0.9, 0.999
#: ``tf.train.AdamOptimizer``'s default epsilon (PPO and POCA pass 1e-5).
ADAM_EPSILON = 1e-8
#: The graph collection of every ``FlatAdam``'s state variables.
OPTIMIZER_STATE = "flat_adam_state"


def flatten(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """``tensors`` reshaped to vectors and laid end to end."""
    return tf.concat([tf.reshape(t, [-1]) for t in tensors], axis=0)


def _size(variable: tf.Variable) -> int:
    return int(np.prod(variable.shape.as_list()))


class FlatAdam:
    """One Adam step over ``groups`` of ``(loss, variables)``, as one flat vector (see the module docstring).

    :param learning_rate: a scalar (tensor or float) shared by every group.
    :param epsilon: Adam's epsilon.
    :param clip_norm: if given, every gradient is scaled by ``clip_norm / max(norm, clip_norm)``,
        ``norm`` the global norm of all groups' gradients (``gradient_norm``).
    :param allow_unused: a variable its loss does not depend on is left out of the step (as
        ``AdamOptimizer`` does) when True, and refused with ``ValueError`` when False.
    :param name: the variable scope of the optimizer's state (under the current scope); each
        ``FlatAdam`` of a graph needs its own.
    :param gradients: ``f(loss, variables)`` -> one gradient (or None) per variable;
        ``tf.gradients`` unless a model computes some part another way
        (``trainers.models.loop_gradients``).

    ``updated(variables)`` is the flat vector of some variables' values after the step (e.g. to
    move target networks towards them); ``apply()`` builds the op that assigns everything.
    """

    def __init__(self, groups: Sequence[Tuple[tf.Tensor, Sequence[tf.Variable]]], learning_rate,
                 epsilon: float = ADAM_EPSILON, clip_norm: Optional[float] = None, allow_unused: bool = False,
                 name: str = "adam", gradients: Optional[Callable[..., List[Optional[tf.Tensor]]]] = None):
        self.variables: List[tf.Variable] = []
        gradient_of = gradients if gradients is not None else tf.gradients
        gradients = []
        for loss, group in groups:
            for variable, gradient in zip(group, gradient_of(loss, list(group))):
                if gradient is None:
                    if allow_unused:
                        continue
                    raise ValueError(
                        f"the loss {loss.name} has no gradient for its variable {variable.name}; every variable "
                        "given to FlatAdam must take part in its loss. Remove it from the group, or pass "
                        "allow_unused=True to leave such variables out of the step.")
                self.variables.append(variable)
                gradients.append(gradient)
        if not self.variables:
            raise ValueError(f"FlatAdam {name!r}: no variable has a gradient, so there is nothing to train. "
                             "Pass the variables the losses are computed from.")
        self.sizes = [_size(v) for v in self.variables]
        self.gradient = flatten(gradients)
        self.gradient_norm: Optional[tf.Tensor] = None
        if clip_norm is not None:
            # The norm over the variables' gradients one by one, as tf.clip_by_global_norm sums it;
            # scaling the concatenation by the same scalar is the same multiplication element by element.
            self.gradient_norm = tf.linalg.global_norm(gradients)
            (self.gradient,), _ = tf.clip_by_global_norm([self.gradient], clip_norm, use_norm=self.gradient_norm)
        total = sum(self.sizes)
        with tf.variable_scope(name):
            zeros = tf.zeros_initializer()
            self.m = tf.get_variable("m", [total], initializer=zeros, trainable=False)
            self.v = tf.get_variable("v", [total], initializer=zeros, trainable=False)
            self.beta1_power = tf.get_variable("beta1_power", [], initializer=tf.constant_initializer(ADAM_BETA1),
                                               trainable=False)
            self.beta2_power = tf.get_variable("beta2_power", [], initializer=tf.constant_initializer(ADAM_BETA2),
                                               trainable=False)
        for state in (self.m, self.v, self.beta1_power, self.beta2_power):
            tf.add_to_collection(OPTIMIZER_STATE, state)
        self.parameters = flatten(self.variables)
        # ApplyAdam's arithmetic, operation for operation, in float32.
        one = np.float32(1.0)
        self._lr_t = learning_rate * tf.sqrt(one - self.beta2_power) / (one - self.beta1_power)
        self.new_m = self.m + (self.gradient - self.m) * (one - np.float32(ADAM_BETA1))
        self.new_v = self.v + (tf.square(self.gradient) - self.v) * (one - np.float32(ADAM_BETA2))
        self.new_parameters = self.parameters - (self.new_m * self._lr_t) / (tf.sqrt(self.new_v)
                                                                             + np.float32(epsilon))

    def updated(self, variables: Sequence[tf.Variable]) -> tf.Tensor:
        """The values of ``variables`` after the step, flat: they must be a run of the step's variables, in order."""
        variables = list(variables)
        start = next((k for k in range(len(self.variables)) if self.variables[k:k + len(variables)] == variables),
                     None)
        if start is None or not variables:
            raise ValueError(f"updated() takes a run of the step's variables in their order (the variables of one "
                             f"group as passed); got {[v.op.name for v in variables]}.")
        begin = sum(self.sizes[:start])
        return self.new_parameters[begin:begin + sum(self.sizes[start:start + len(variables)])]

    def apply(self, wait_for: Sequence[tf.Tensor] = (),
              assign: Sequence[Tuple[Sequence[tf.Variable], tf.Tensor]] = (), name: Optional[str] = None
              ) -> tf.Operation:
        """The op of the step: the moments, the beta powers and the parameters assigned, after one barrier.

        :param wait_for: tensors and ops computed from the parameters before the step as well (the
            metrics fetched with it, any read of a variable the step assigns).
        :param assign: further ``(variables, flat value)`` pairs assigned after the same barrier
            (e.g. targets moved towards ``updated(online)``, with the targets' reads in ``wait_for``).
        """
        barrier = tf.group(self.gradient, self.parameters, *wait_for, name="before_assignments")
        with tf.control_dependencies([barrier, self._lr_t]):
            ops = [tf.assign(self.m, self.new_m).op, tf.assign(self.v, self.new_v).op,
                   tf.assign(self.beta1_power, self.beta1_power * ADAM_BETA1).op,
                   tf.assign(self.beta2_power, self.beta2_power * ADAM_BETA2).op]
            ops += _assign_pieces(self.variables, self.new_parameters)
            for variables, value in assign:
                ops += _assign_pieces(list(variables), value)
        return tf.group(*ops, name=name)


def _assign_pieces(variables: Sequence[tf.Variable], flat: tf.Tensor) -> List[tf.Operation]:
    """Assign ``flat``, cut in the variables' sizes and shapes, to ``variables``."""
    pieces = tf.split(flat, [_size(v) for v in variables])
    return [tf.assign(v, tf.reshape(p, v.shape)).op for v, p in zip(variables, pieces)]


__all__ = ["ADAM_BETA1", "ADAM_BETA2", "ADAM_EPSILON", "FlatAdam", "OPTIMIZER_STATE", "flatten"]
