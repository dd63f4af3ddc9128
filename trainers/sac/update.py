"""SAC's gradient step as one op: the flat Adam of ``trainers.flat_adam`` plus the soft target update.

At 3DBall's size (batch 128, hidden 64) a gradient step is a few hundred small ops, and the
executor's cost per op, not the arithmetic, is most of it; one Adam over all parameters laid end
to end (``FlatAdam``) and one blend of all targets as one vector take about half the CPU of an
``ApplyAdam`` per variable and a soft update per target (``bench/sac_step.py``). The parameters
come out bit for bit as one ``tf.train.AdamOptimizer`` per loss would leave them.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

from trainers.flat_adam import FlatAdam, flatten
from trainers.tf_utils import tf


def fused_sac_update(groups: Sequence[Tuple[tf.Tensor, Sequence[tf.Variable]]], learning_rate: tf.Tensor,
                     online: Sequence[tf.Variable], target: Sequence[tf.Variable], tau: float,
                     wait_for: Sequence[tf.Tensor] = (), gradients: Optional[Callable] = None) -> tf.Operation:
    """One op: Adam on each ``(loss, variables)`` group, then ``target <- tau online + (1 - tau) target``.

    ``online`` must be the variables of one group, in that group's order (the online critics), and
    ``target`` their targets in the same order. ``wait_for`` (e.g. the metrics fetched with the
    step) is computed from the parameters before the step as well, and so are the targets' reads.
    The optimizer's state lives under ``sac_adam/``. ``gradients`` is ``FlatAdam``'s (recurrent:
    ``trainers.models.loop_gradients``).
    """
    if len(target) != len(online):
        raise ValueError(f"the {len(online)} online critic variables need one target each, got {len(target)} "
                         "targets. Pass the critics' group as built and its targets in the same order.")
    adam = FlatAdam(groups, learning_rate, name="sac_adam", gradients=gradients)
    targets = flatten(target)
    new_targets = tau * adam.updated(online) + (1.0 - tau) * targets
    return adam.apply(wait_for=[targets, *wait_for], assign=[(target, new_targets)], name="train_and_soft_update")


__all__ = ["fused_sac_update"]
