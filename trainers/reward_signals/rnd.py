"""Random network distillation (Burda et al. 2018): the error of a predictor of a fixed random network.

The package's docstring says when it helps and how it trains.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping

import numpy as np

from trainers.models import RunningNormalizer, dense, new_trainable_variables
from trainers.reward_signals.base import GAMMA, RewardSignal, SignalInputs, layers_param, signal_encoder, strength_param
from trainers.tf_utils import tf
from trainers.trainer.base import Param, learning_rate_param, positive
from unityagents.brain import BrainParameters


class RNDSignal(RewardSignal):
    """Random network distillation: the predictor's error on a fixed random target network.

    Public tensors: ``raw_error`` (``[N]``, the squared prediction error), ``reward`` (``[N]``, the
    error over the running std of errors), ``update_statistics`` (folds the fed states and their
    errors into the running statistics), ``loss``, ``update_op``.
    """

    name = "rnd"
    title = "Rnd"
    parameters: ClassVar[Dict[str, Param]] = {
        "strength": strength_param(0.01, "factor of the normalised prediction error"),
        "gamma": GAMMA,
        "encoding_size": Param(int, 64, check=(positive, "> 0"), doc="output width of the target and predictor"),
        "learning_rate": learning_rate_param(1.0e-4, "Adam learning rate of the predictor"),
        "num_layers": layers_param("hidden layers of the predictor; the fixed target has one fewer (at least one)"),
    }
    #: Release 22's run config weighs every signal 1.0 unless told.
    release22_defaults = {"strength": 1.0}

    def __init__(self, brain: BrainParameters, settings: Mapping[str, Any]):
        super().__init__(brain, settings)
        size = int(settings["encoding_size"])
        with tf.variable_scope("rnd"):
            self.inputs = SignalInputs(brain, with_next=False)
            i = self.inputs
            vector = i.vector(i.state)
            updates = []
            if vector is not None and brain.state_space_type == "continuous":
                # Normalised and clipped as in Burda et al.: the target's output then varies with
                # every input dimension instead of being dominated by the largest one.
                normalizer = RunningNormalizer(vector, name="state_normalizer", clip=5.0)
                vector = normalizer.normalized
                updates.append(normalizer.update)
            # The target: random and fixed (not in any optimiser's list; saved by the Saver).
            layers = int(self.settings["num_layers"])
            target = tf.stop_gradient(signal_encoder(vector, i.observations, size, "target",
                                                     layers=max(layers - 1, 1)))
            before = tf.trainable_variables()
            predictor = signal_encoder(vector, i.observations, size, "predictor", layers=layers)
            predicted = dense(predictor, size, "predictor_head", gain=1.0)
            variables = new_trainable_variables(before)
            self.raw_error = tf.reduce_sum(tf.square(predicted - target), axis=1)
            # The reward reads the error statistics before this step's errors are folded in, in the
            # same session.run (the normalizer orders its update after ``scaled``).
            errors = RunningNormalizer(self.raw_error[:, None], name="error_statistics", with_scaled=True)
            updates.append(errors.update)
            self.reward = errors.scaled[:, 0]
            self.update_statistics = tf.group(*updates, name="update_statistics")
            self.loss = tf.reduce_mean(self.raw_error)
            self.update_op = self.adam_step(self.loss, variables)
        self.metrics = {"Losses/RND Loss": self.loss}

    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        """The normalised error per step; while training, the statistics then take these states in."""
        feed = self.inputs.feed(fields, with_next=False)
        if not training:
            return sess.run(self.reward, feed)
        reward, _ = sess.run([self.reward, self.update_statistics], feed)
        return reward

    def update_feed(self, fields: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        return self.inputs.feed(fields, with_next=False)
