"""The one self-play mechanism's TensorFlow side: an acting copy of a learner and its pool of snapshots.

Self-play needs, from whatever algorithm learns, exactly one thing: a second network of the same
policy, under another graph scope, that acts for the opponent's agents. The pool
(:class:`SnapshotPool`, built by :func:`pool_copying`) then copies weights between the two by their
names relative to each scope. Release 22's team self-play gets that network from the learner
(``snapshot_actor(scope, brain, rng)``, returning a ``trainers.trainer.snapshot_actor.SnapshotActor``),
so PPO, MA-POCA, SAC and a plugin trainer are wrapped alike; the seed's ghost rebuilds its PPO
brain's network itself. Both then drive the pool with the same bookkeeping (``trainers.ghost.self_play.SnapshotRing``).
"""
from __future__ import annotations

from typing import List, Sequence

from trainers.ghost.self_play import LATEST, SnapshotRing
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException

# A learner's way to act from a snapshot lives beside the trainer base; these names stay importable from here.
from trainers.trainer.snapshot_actor import SnapshotActor, acts_from_snapshots  # noqa: F401

#: Op types that hold a variable's value (v1 ref variables are what tf_utils configures).
_VARIABLE_OPS = ("VariableV2", "Variable", "VarHandleOp")


def variables_read_by(tensors: Sequence[tf.Tensor]) -> List[tf.Variable]:
    """The global variables whose values ``tensors`` depend on, in graph creation order.

    Walking the graph backwards from the acting outputs selects exactly the weights a policy
    acts with (policy layers, ``log_sigma``, LSTM, normaliser statistics), and leaves out what
    only training uses (value head, Adam slots), so snapshots hold nothing else.
    """
    graph = tensors[0].graph
    seen, stack, variable_ops = set(), [t.op for t in tensors], set()
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type in _VARIABLE_OPS:
            variable_ops.add(op.name)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    with graph.as_default():
        return [v for v in tf.global_variables() if v.op.name in variable_ops]


class SnapshotPool:
    """``max_num_models`` snapshots of a learner's acting weights, kept in TF variables.

    Why TF variables and not NumPy copies: the ``Saver`` then checkpoints the pool with
    everything else, so ``--load`` resumes self-play against the same past selves, and taking a
    snapshot never leaves the TensorFlow runtime.

    Why one variable per weight with a slot axis (``[max_num_models, *shape]``) rather than one
    variable per slot: the two assign ops take the slot as a fed index, so they are built once
    and their count does not grow with the pool size.

    :param acting: the variables of the acting network (the opponent's).
    :param sources: the learner's variables, ``sources[i]`` being copied into ``acting[i]``.
    :param names: ``names[i]`` names the pool variable of ``acting[i]`` (its name relative to
        the network's scope, so the checkpoint reads like the network).
    :param size: number of slots.
    :param name: variable scope of the pool's variables (inside the caller's scope).
    """

    def __init__(self, acting: Sequence[tf.Variable], sources: Sequence[tf.Variable], names: Sequence[str],
                 size: int, name: str = "snapshot_pool"):
        self.size = size
        with tf.variable_scope(name):
            self.slot = tf.placeholder(tf.int32, [], name="slot")
            self.variables = []
            snapshot_ops, load_ops = [], []
            for target, source, relative in zip(acting, sources, names):
                shape = [size] + target.shape.as_list()
                pool = tf.get_variable(relative, shape, target.dtype.base_dtype,
                                       initializer=tf.zeros_initializer(), trainable=False)
                self.variables.append(pool)
                snapshot_ops.append(tf.scatter_update(pool, self.slot, source))
                load_ops.append(tf.assign(target, tf.gather(pool, self.slot)))
            self.snapshot_op = tf.group(*snapshot_ops, name="snapshot")
            self.load_op = tf.group(*load_ops, name="load")

    def snapshot(self, sess, slot: int) -> None:
        """Copy the learner's current weights into ``slot``."""
        sess.run(self.snapshot_op, {self.slot: slot})

    def load(self, sess, slot: int) -> None:
        """Make the acting network play with the weights stored in ``slot``."""
        sess.run(self.load_op, {self.slot: slot})

    def take(self, sess, ring: SnapshotRing, *step: int) -> int:
        """Copy the learner's weights into the ring's next slot (``ring.record_snapshot(*step)``); return it."""
        slot = ring.record_snapshot(*step)
        self.snapshot(sess, slot)
        return slot

    def play(self, sess, ring: SnapshotRing, slot: int) -> int:
        """Make the acting network play ``slot``; ``LATEST`` copies the learner's weights into the slot past the
        ring first."""
        if slot == LATEST:
            self.snapshot(sess, ring.size)
            slot_loaded = ring.size
        else:
            slot_loaded = slot
        self.load(sess, slot_loaded)
        ring.current_opponent = slot
        return slot

    def swap(self, sess, ring: SnapshotRing) -> int:
        """Draw the next opponent (``ring.choose_opponent()``) and play it."""
        return self.play(sess, ring, ring.choose_opponent())


def pool_copying(outputs: Sequence[tf.Tensor], scope: str, source_scope: str, size: int,
                 owner: str) -> SnapshotPool:
    """The pool between the acting network built under ``scope`` (the caller's variable scope) and the
    learner's under ``source_scope``: the variables ``outputs`` read, each matched with the learner's of the
    same name relative to its scope.

    :param owner: names the copy in the error when the learner lacks a variable, e.g. ``"The ghost 'G'"``.
    """
    acting = variables_read_by(outputs)
    names = [relative_name(v.op.name, scope) for v in acting]
    by_name = {v.op.name: v for v in tf.global_variables()}
    sources: List[tf.Variable] = []
    for target, relative in zip(acting, names):
        name = f"{source_scope}/{relative}" if source_scope else relative
        source = by_name.get(name)
        if source is None or source.shape != target.shape:
            found = "is missing" if source is None else f"has shape {source.shape}, not {target.shape}"
            raise UnityTrainerException(
                f"{owner} rebuilt the learner's network but the learner's variable '{name}' {found}. The copy must be "
                "built after the learner, from the learner's own settings (the controller does both).")
        sources.append(source)
    return SnapshotPool(acting, sources, names, size)


def relative_name(name: str, scope: str) -> str:
    """``name`` without its leading ``scope/`` (unchanged when ``scope`` is empty)."""
    return name[len(scope) + 1:] if scope and name.startswith(scope + "/") else name
