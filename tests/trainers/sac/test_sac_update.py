"""The fused SAC step (``trainers.sac.update``) against the optimizers it stands for."""
from __future__ import annotations

import numpy as np
import pytest

from tests.trainers.test_flat_adam import seeded_variables
from trainers.sac.update import fused_sac_update
from trainers.tf_utils import tf

SHAPES = {"policy": [(3, 4), (4,)], "online": [(3, 2), (2,), (2, 1)], "alpha": [(1,)]}
TAU = 0.25


def build(fused: bool, seed: int = 0):
    """Three groups of variables with quadratic losses, the targets of the ``online`` group, and the step."""
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        lr = tf.placeholder_with_default(0.05, [])
        variables = seeded_variables(SHAPES, rng)
        target = seeded_variables({"target": SHAPES["online"]}, rng)["target"]
        w, b = variables["policy"]
        k1, b1, k2 = variables["online"]
        losses = {"policy": tf.reduce_mean(tf.square(tf.nn.relu(tf.matmul(x, w) + b))),
                  "online": tf.reduce_mean(tf.square(tf.matmul(tf.tanh(tf.matmul(x, k1) + b1), k2) - 1.0)),
                  "alpha": tf.reduce_sum(tf.exp(variables["alpha"][0]) * tf.reduce_mean(x))}
        groups = [(losses[g], variables[g]) for g in SHAPES]
        if fused:
            step = fused_sac_update(groups, lr, variables["online"], target, TAU, wait_for=[losses["policy"]])
        else:
            # Every gradient before the first ApplyAdam, which overwrites a parameter in place.
            gradients = [tf.gradients(loss, v) for loss, v in groups]
            with tf.control_dependencies([g for grads in gradients for g in grads]):
                gradients = [[tf.identity(g) for g in grads] for grads in gradients]
            applied = tf.group(*[tf.train.AdamOptimizer(lr).apply_gradients(list(zip(grads, v)))
                                 for grads, (_, v) in zip(gradients, groups)])
            with tf.control_dependencies([applied]):
                step = tf.group(*[tf.assign(t, TAU * o.read_value() + (1.0 - TAU) * t.read_value())
                                  for o, t in zip(variables["online"], target)])
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
    graph.finalize()
    return sess, x, lr, step, [v for g in SHAPES for v in variables[g]] + target


def test_fused_step_equals_one_adam_per_loss_then_the_soft_target_update():
    """Bit for bit, over steps whose learning rate changes (so Adam's bias correction and moments matter)."""
    runs = [build(fused=True), build(fused=False)]
    rng = np.random.default_rng(1)
    for step in range(5):
        feed_x = rng.standard_normal((7, 3)).astype(np.float32)
        for sess, x, lr, op, _ in runs:
            sess.run(op, {x: feed_x, lr: 0.05 / (step + 1)})
        (fused_sess, *_, fused_vars), (ref_sess, *_, ref_vars) = runs
        for a, b in zip(fused_sess.run(fused_vars), ref_sess.run(ref_vars)):
            np.testing.assert_array_equal(a, b)
    fresh_sess, *_, fresh_vars = build(fused=True)
    for before, after in zip(fresh_sess.run(fresh_vars), fused_sess.run(fused_vars)):
        assert not np.allclose(before, after)  # every parameter and target moved


def test_a_variable_outside_its_loss_is_refused():
    with tf.Graph().as_default():
        a = tf.get_variable("a", [2])
        unused = tf.get_variable("unused", [2])
        t = tf.get_variable("t", [2])
        with pytest.raises(ValueError, match="no gradient for its variable unused"):
            fused_sac_update([(tf.reduce_sum(a), [a, unused])], 0.1, [a], [t], TAU)


@pytest.mark.parametrize("spec", ["continuous", "branched"])
def test_acting_and_the_gradient_steps_never_go_through_session_run(spec):
    """Acting (every decision) and the gradient steps run on the session's compiled callables."""
    from tests.fake_env import FakeEnv, Loop
    from tests.trainers.sac.test_sac import BRANCHED, CONTINUOUS, make_sac

    trainer = make_sac(CONTINUOUS if spec == "continuous" else BRANCHED, normalize=True, batch_size=8,
                       buffer_init_steps=8)

    loop = Loop(FakeEnv(trainer.brain))
    loop.run(trainer, 4)  # 12 transitions: the first update copies the critics into the targets, once
    steps = trainer.gradient_step

    def refuse(*args, **kwargs):
        raise AssertionError("Session.run was called on the hot path")

    trainer.sess.run = refuse
    loop.run(trainer, 6)
    assert trainer.gradient_step > steps > 0
