"""``trainers.flat_adam.FlatAdam`` against ``tf.train.AdamOptimizer``, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from trainers.flat_adam import OPTIMIZER_STATE, FlatAdam
from trainers.tf_utils import tf

SHAPES = {"net": [(3, 4), (4,), (4, 2), (2,)], "other": [(1,)]}


def seeded_variables(shapes, rng):
    """``{group: [one variable per shape]}``, named ``<group><k>``, initialised from ``rng``'s normal draws."""
    return {g: [tf.get_variable(f"{g}{k}", s, initializer=tf.constant_initializer(rng.standard_normal(s)))
                for k, s in enumerate(group_shapes)] for g, group_shapes in shapes.items()}


def build(flat: bool, clip_norm=None, epsilon=1e-5):
    """A small tanh net and a second group, both trained by one step; ``(sess, x, lr, step, variables)``."""
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        lr = tf.placeholder_with_default(0.05, [])
        variables = seeded_variables(SHAPES, rng)
        w1, b1, w2, b2 = variables["net"]
        net_loss = tf.reduce_mean(tf.square(tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2) + b2 - 1.0))
        other_loss = tf.reduce_sum(tf.exp(variables["other"][0]) * tf.reduce_mean(x))
        groups = [(net_loss, variables["net"]), (other_loss, variables["other"])]
        if flat:
            step = FlatAdam(groups, lr, epsilon=epsilon, clip_norm=clip_norm).apply(wait_for=[net_loss])
        else:
            gradients = [g for loss, group in groups for g in tf.gradients(loss, group)]
            if clip_norm is not None:  # one norm over both groups' gradients
                gradients, _ = tf.clip_by_global_norm(gradients, clip_norm)
            # Every gradient before the first ApplyAdam: otherwise the kernel of w2 may overwrite
            # w2 while the gradient of w1 (through w2) still reads it, and the step is a race.
            with tf.control_dependencies(gradients):
                gradients = [tf.identity(g) for g in gradients]
            pairs = list(zip(gradients, [v for _, group in groups for v in group]))
            step = tf.group(*[tf.train.AdamOptimizer(lr, epsilon=epsilon, name=f"adam{k}").apply_gradients(part)
                              for k, part in enumerate((pairs[:4], pairs[4:]))])
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    return sess, x, lr, step, [v for g in SHAPES for v in variables[g]]


def run_steps(clip_norm, steps=6):
    """Both optimizers over the same inputs, with a learning rate that changes every step."""
    rng = np.random.default_rng(1)
    runs = [build(True, clip_norm), build(False, clip_norm)]
    for step in range(steps):
        feed_x = (3.0 * rng.standard_normal((7, 3))).astype(np.float32)
        for sess, x, lr, op, _ in runs:
            sess.run(op, {x: feed_x, lr: 0.05 / (step + 1)})
    return [sess.run(variables) for sess, *_, variables in runs]


@pytest.mark.parametrize("clip_norm", [None, 0.5])
def test_flat_adam_equals_adam_optimizer_bit_for_bit(clip_norm):
    flat, reference = run_steps(clip_norm)
    for a, b in zip(flat, reference):
        np.testing.assert_array_equal(a, b)


def test_every_parameter_moves_and_clipping_changes_the_step():
    """The comparison above is not vacuous: each parameter moved, and the clip (0.5, below the
    gradients' norm here) changed the result."""
    sess, *_, variables = build(True)
    initial = sess.run(variables)
    unclipped, clipped = run_steps(None, steps=2)[0], run_steps(0.5, steps=2)[0]
    for before, after, other in zip(initial, unclipped, clipped):
        assert not np.allclose(before, after)
        assert not np.array_equal(after, other)


def test_state_is_four_variables_in_the_collection():
    with tf.Graph().as_default() as graph:
        a = tf.get_variable("a", [2, 3])
        b = tf.get_variable("b", [3])
        adam = FlatAdam([(tf.reduce_sum(a) + tf.reduce_sum(b), [a, b])], 0.1, name="opt")
        assert [v.op.name for v in graph.get_collection(OPTIMIZER_STATE)] == [
            "opt/m", "opt/v", "opt/beta1_power", "opt/beta2_power"]
        assert adam.m.shape.as_list() == [9]
        assert adam.updated([b]).shape.as_list() == [3]


def test_a_variable_outside_its_loss_is_refused_or_left_out():
    with tf.Graph().as_default():
        a = tf.get_variable("a", [2])
        unused = tf.get_variable("unused", [2])
        with pytest.raises(ValueError, match="no gradient for its variable unused"):
            FlatAdam([(tf.reduce_sum(a), [a, unused])], 0.1)
        adam = FlatAdam([(tf.reduce_sum(a), [a, unused])], 0.1, allow_unused=True, name="skipping")
        assert adam.variables == [a]
        with pytest.raises(ValueError, match="a run of the step's variables"):
            adam.updated([unused])
