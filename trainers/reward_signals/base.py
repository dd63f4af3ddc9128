"""What every reward signal shares: the base class, its own input placeholders, the common keys.

A signal is a module of this package with one ``RewardSignal`` subclass that declares its name,
its TensorBoard title and its keys (``parameters``), plus one line in the package's registry
(``trainers.reward_signals.SIGNALS``). Their keys are coerced by ``trainers.settings.schema.coerce_value``,
as every other settings key is, so all errors read alike.
"""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Dict, List, Mapping, Optional

import numpy as np

from trainers.encoders import encode, observation_placeholders, state_placeholder, state_vector
from trainers.flat_adam import FlatAdam
from trainers.models import dense
from trainers.tf_utils import tf
from trainers.trainer.base import Param, discount_param, non_negative, positive
from unityagents.brain import BrainParameters


def strength_param(default: float, doc: str) -> Param:
    return Param(float, default, check=(non_negative, ">= 0"), doc=doc)


#: Every signal's discount factor.
GAMMA = discount_param("discount factor of its returns")


def layers_param(doc: str) -> Param:
    """The depth of a learned signal's network (Release 22's ``network_settings.num_layers``)."""
    return Param(int, 2, check=(positive, "> 0"), doc=doc)


class RewardSignal(abc.ABC):
    """One reward signal. Built once (in the trainer's build scope); evaluated per trajectory.

    :param fields: the trajectory fields ``evaluate`` and ``update_feed`` read.
    :param update_op: trains the signal's networks on a minibatch (None: nothing to train).
    :param metrics: scalar tensors computed with ``update_op``, averaged into the summaries.
    """

    #: The signal's key in a ``reward_signals`` block, its name in TensorBoard tags, its keys.
    name: ClassVar[str] = "signal"
    title: ClassVar[str] = "Signal"
    parameters: ClassVar[Dict[str, Param]] = {}
    needs_next_inputs = False

    def __init__(self, brain: BrainParameters, settings: Mapping[str, Any]):
        #: The settings with the declared defaults of any key not given (validated blocks give all).
        self.settings = {**{key: p.default for key, p in self.parameters.items()}, **settings}
        self.strength = float(settings["strength"])
        self.gamma = float(settings["gamma"])
        self.update_op: Optional[tf.Operation] = None
        self.metrics: Dict[str, tf.Tensor] = {}

    @abc.abstractmethod
    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        """The signal's reward for each step of a trajectory, before ``strength``."""

    def update_feed(self, fields: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        """The feed of ``update_op`` for a minibatch given as ``{field: [n, ...]}``."""
        return {}

    def adam_step(self, loss: tf.Tensor, variables: List[tf.Variable]) -> tf.Operation:
        """One Adam step on ``loss`` over the signal's own ``variables``, for a learned signal's ``update_op``.

        One Adam over the variables as one flat vector (``trainers.flat_adam``; bit for bit
        ``tf.train.AdamOptimizer``'s step), applied once the gradients and ``loss`` (every signal's
        metrics are parts of it) are computed. Sets ``learning_rate``: a placeholder that defaults
        to the ``learning_rate`` setting.
        """
        self.learning_rate = tf.placeholder_with_default(float(self.settings["learning_rate"]), [],
                                                         name="learning_rate")
        adam = FlatAdam([(loss, variables)], self.learning_rate, allow_unused=True, name="adam")
        return adam.apply(wait_for=[loss])


class SignalInputs:
    """A signal's own placeholders for the brain's raw inputs (and next inputs), under its scope.

    Own placeholders, not the policy's: the policy may be fed its normalised state in updates,
    and the signal must see what the environment sent. Their names (``rnd/state``, ...) are not
    the export contract's, and nothing exported depends on them.
    """

    def __init__(self, brain: BrainParameters, with_next: bool):
        self.brain = brain
        self.state = state_placeholder(brain, "state") if brain.state_space_size > 0 else None
        self.observations = observation_placeholders(brain, "observation")
        self.next_state = state_placeholder(brain, "next_state") if with_next and self.state is not None else None
        self.next_observations = observation_placeholders(brain, "next_observation") if with_next else []

    def vector(self, state: Optional[tf.Tensor]) -> Optional[tf.Tensor]:
        return None if state is None else state_vector(self.brain, state)

    def feed(self, fields: Mapping[str, np.ndarray], with_next: bool) -> Dict[tf.Tensor, Any]:
        feed: Dict[tf.Tensor, Any] = {}
        if self.state is not None:
            feed[self.state] = fields["signal_state"]
            if with_next:
                feed[self.next_state] = fields["signal_next_state"]
        for k, placeholder in enumerate(self.observations):
            feed[placeholder] = fields[f"signal_obs{k}"]
        if with_next:
            for k, placeholder in enumerate(self.next_observations):
                feed[placeholder] = fields[f"signal_next_obs{k}"]
        return feed


def signal_encoder(vector: Optional[tf.Tensor], observations: List[tf.Tensor], size: int, name: str,
             reuse: bool = False, layers: int = 2) -> tf.Tensor:
    """``layers`` dense ELU layers of ``size`` over the shared encoding of the inputs."""
    with tf.variable_scope(name, reuse=reuse):
        x = encode(vector, observations, size)
        for i in range(layers):
            x = dense(x, size, f"dense_{i}", tf.nn.elu)
        return x
