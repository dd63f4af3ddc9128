"""Restoring a checkpoint whose Adam kept slots per variable into a graph trained by ``FlatAdam``."""
from __future__ import annotations

import json
import logging
import os
from types import SimpleNamespace

import numpy as np
import pytest

from runner.saver import RunSaver
from runner.timers import Timers
from trainers.flat_adam import FlatAdam
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException


def net(extra: bool = False):
    """Two weights and a loss (plus a third weight the old checkpoint lacks, with ``extra``)."""
    x = tf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    w = tf.get_variable("w", [3, 2], initializer=tf.random_normal_initializer(seed=1))
    b = tf.get_variable("b", [2], initializer=tf.random_normal_initializer(seed=2))
    variables = [w, b] + ([tf.get_variable("c", [2])] if extra else [])
    return tf.reduce_sum(tf.square(tf.matmul(x, w) + b - sum(variables[2:], 0.0))), variables


def old_checkpoint(folder: str) -> dict:
    """A checkpoint trained 3 steps by ``tf.train.AdamOptimizer`` (``w/Adam``, ..., ``beta1_power``); its values."""
    os.makedirs(folder)
    with tf.Graph().as_default():
        loss, variables = net()
        step = tf.train.AdamOptimizer(0.1).minimize(loss, var_list=variables)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(step)
            prefix = os.path.join(folder, "model-3.cptk")
            tf.train.Saver().save(sess, prefix)
            values = {v.op.name: sess.run(v) for v in tf.global_variables()}
    with open(prefix + ".state.json", "w") as f:
        json.dump({"global_step": 3, "trainers": {}}, f)
    assert "w/Adam" in values and "beta1_power" in values
    return values


def flat_run(folder: str, extra: bool = False):
    graph = tf.Graph()
    with graph.as_default():
        loss, variables = net(extra)
        adam = FlatAdam([(loss, variables)], 0.1)
        sess = tf.Session(graph=graph)
        files = RunSaver(sess, SimpleNamespace(checkpoint_dir=folder), "env", 5, Timers(), 0)
        sess.run(tf.global_variables_initializer())
        sess.run(adam.apply())  # moves the weights and the moments away from what a restore must give
    return sess, variables, adam, files


@pytest.mark.parametrize("how", ["load", "initialize_from"])
def test_old_adam_slots_restore_the_weights_and_start_adam_afresh(tmp_path, caplog, how):
    folder = str(tmp_path / "run")
    saved = old_checkpoint(folder)
    sess, variables, adam, files = flat_run(folder)
    with caplog.at_level(logging.WARNING, logger="unityagents"), sess.graph.as_default():
        if how == "load":
            assert files.restore({}, None, 0) == 3
        else:
            files.initialize_from(folder)
    for v in variables:
        np.testing.assert_array_equal(sess.run(v), saved[v.op.name])
    m, v, beta1_power, beta2_power = sess.run([adam.m, adam.v, adam.beta1_power, adam.beta2_power])
    assert not m.any() and not v.any()
    assert (beta1_power, beta2_power) == (np.float32(0.9), np.float32(0.999))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "moments start afresh" in warnings[0], warnings


def test_a_checkpoint_that_lacks_a_weight_as_well_is_still_refused(tmp_path):
    folder = str(tmp_path / "run")
    old_checkpoint(folder)
    sess, variables, adam, files = flat_run(folder, extra=True)
    before = sess.run(variables[0])
    with pytest.raises(UnityTrainerException, match="does not match this configuration"), sess.graph.as_default():
        files.restore({}, None, 0)
    np.testing.assert_array_equal(sess.run(variables[0]), before)  # nothing was restored
