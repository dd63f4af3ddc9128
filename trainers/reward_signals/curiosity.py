"""Curiosity (Pathak et al. 2017): the forward model's error over an encoding shaped by an inverse model.

The package's docstring says when it helps and how it trains.
"""
from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping

import numpy as np

from trainers.models import dense, new_trainable_variables
from trainers.reward_signals.base import GAMMA, RewardSignal, SignalInputs, layers_param, signal_encoder, strength_param
from trainers.tf_utils import tf
from trainers.trainer.base import Param, learning_rate_param, positive
from unityagents.brain import BrainParameters


class CuriositySignal(RewardSignal):
    """Intrinsic curiosity module: inverse and forward models over a learned encoding.

    Public tensors: ``encoding`` / ``next_encoding``, ``inverse_prediction`` (action logits for
    discrete actions, branch after branch, whose cross-entropies add up; the action itself for
    continuous ones), ``forward_error`` (``[N]``, the raw
    reward), ``inverse_loss``, ``forward_loss``, ``actions`` and ``valid`` (placeholders), and
    ``update_op``.
    """

    name = "curiosity"
    title = "Curiosity"
    parameters: ClassVar[Dict[str, Param]] = {
        "strength": strength_param(0.02, "factor of the forward model's error"),
        "gamma": GAMMA,
        "encoding_size": Param(int, 64, check=(positive, "> 0"), doc="width of the encoding phi(s)"),
        "learning_rate": learning_rate_param(3.0e-4, "Adam learning rate of its models"),
        "num_layers": layers_param("hidden layers of the encoding phi(s)"),
    }
    #: Release 22's run config weighs every signal 1.0 unless told.
    release22_defaults = {"strength": 1.0}
    needs_next_inputs = True

    def __init__(self, brain: BrainParameters, settings: Mapping[str, Any]):
        super().__init__(brain, settings)
        size = int(settings["encoding_size"])
        self.is_continuous = brain.action_space_type == "continuous"
        n_actions = brain.action_space_size
        with tf.variable_scope("curiosity"):
            before = tf.trainable_variables()
            self.inputs = SignalInputs(brain, with_next=True)
            i = self.inputs
            layers = int(self.settings["num_layers"])
            self.encoding = signal_encoder(i.vector(i.state), i.observations, size, "encoder", layers=layers)
            self.next_encoding = signal_encoder(i.vector(i.next_state), i.next_observations, size, "encoder",
                                                reuse=True, layers=layers)
            #: Discrete branches beyond one: an action per branch, one-hot per branch, as Release 22 encodes them.
            self.branches = [] if self.is_continuous else [int(b) for b in brain.action_branches]
            branched = len(self.branches) > 1
            if self.is_continuous:
                self.actions = tf.placeholder(tf.float32, [None, n_actions], name="actions")
                action_input = self.actions
            elif branched:
                self.actions = tf.placeholder(tf.int32, [None, len(self.branches)], name="actions")
                action_input = tf.concat([tf.one_hot(self.actions[:, k], size) for k, size in enumerate(self.branches)],
                                         axis=1)
            else:
                self.actions = tf.placeholder(tf.int32, [None], name="actions")
                action_input = tf.one_hot(self.actions, n_actions)
            # 1 for transitions with a real next state (0 where the episode ended); ones unless fed.
            self.valid = tf.placeholder_with_default(tf.ones(tf.shape(self.encoding)[:1]), [None], name="valid")
            count = tf.maximum(tf.reduce_sum(self.valid), 1.0)

            hidden = dense(tf.concat([self.encoding, self.next_encoding], axis=1), 256, "inverse_hidden", tf.nn.elu)
            self.inverse_prediction = dense(hidden, sum(self.branches) if branched else n_actions, "inverse_head",
                                            gain=1.0)
            if self.is_continuous:
                inverse_error = tf.reduce_sum(tf.square(self.inverse_prediction - self.actions), axis=1)
            elif branched:  # each branch's cross-entropy, summed
                inverse_error = tf.add_n([
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.actions[:, k], logits=logits)
                    for k, logits in enumerate(tf.split(self.inverse_prediction, self.branches, axis=1))])
            else:
                inverse_error = tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=self.actions, logits=self.inverse_prediction)
            self.inverse_loss = tf.reduce_sum(inverse_error * self.valid) / count

            # The forward model does not train the encoder (Pathak et al.): otherwise the easiest
            # way to predict phi(s') would be an encoding that forgets everything.
            forward_in = tf.concat([tf.stop_gradient(self.encoding), action_input], axis=1)
            hidden = dense(forward_in, 256, "forward_hidden", tf.nn.elu)
            predicted = dense(hidden, size, "forward_head", gain=1.0)
            self.forward_error = 0.5 * tf.reduce_sum(tf.square(predicted - tf.stop_gradient(self.next_encoding)),
                                                     axis=1)
            self.forward_loss = tf.reduce_sum(self.forward_error * self.valid) / count

            loss = 0.2 * self.forward_loss + 0.8 * self.inverse_loss
            self.update_op = self.adam_step(loss, new_trainable_variables(before))
        self.metrics = {"Losses/Curiosity Forward Loss": self.forward_loss,
                        "Losses/Curiosity Inverse Loss": self.inverse_loss}

    def _feed(self, fields: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        feed = self.inputs.feed(fields, with_next=True)
        actions = fields["actions"]
        if len(self.branches) > 1:
            actions = np.asarray(actions).reshape(-1, len(self.branches))
        feed[self.actions] = actions
        valid = 1.0 - np.asarray(fields["signal_done"], dtype=np.float32)
        if "masks" in fields:  # a recurrent trainer's left padding is no transition either
            valid = valid * np.asarray(fields["masks"], dtype=np.float32)
        feed[self.valid] = valid
        return feed

    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        error = sess.run(self.forward_error, self._feed(fields))
        return error * (1.0 - np.asarray(fields["signal_done"], dtype=np.float64))

    def update_feed(self, fields: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        return self._feed(fields)
