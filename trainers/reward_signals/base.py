"""What every reward signal shares: the base class, its own input placeholders, its settings' coercion.

A signal is a module of this package with one ``RewardSignal`` subclass that declares its name,
its TensorBoard title and its keys (``parameters``), plus one line in the package's registry
(``trainers.reward_signals.SIGNALS``). The coercion here is the one every nested settings block
(``reward_signals``, ``behavioral_cloning``) uses, so their errors read alike.
"""
from __future__ import annotations

import abc
import difflib
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence

import numpy as np

from trainers.encoders import encode, observation_placeholders, state_placeholder, state_vector
from trainers.models import dense
from trainers.tf_utils import tf
from trainers.trainer import Param, TrainerConfigError, non_negative, unit_interval
from unityagents.brain import BrainParameters

_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def strength_param(default: float, doc: str) -> Param:
    return Param(float, default, check=(non_negative, ">= 0"), doc=doc)


#: Every signal's discount factor.
GAMMA = Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor of its returns")


def did_you_mean(key: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(key), list(candidates), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def coerce_setting(where: str, value: Any, param: Param) -> Any:
    """``value`` in the declared type (YAML 1.1 strings such as ``1.0e-4`` are numbers), checked."""
    converted: Any = None
    if param.kind is bool and isinstance(value, bool):
        converted = value
    elif param.kind is str and isinstance(value, str) and value:
        converted = value
    elif param.kind in (int, float) and not isinstance(value, bool):
        number: Optional[float] = None
        if isinstance(value, (int, float)):
            number = value
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if number is not None and np.isfinite(number):
            if param.kind is float:
                converted = float(number)
            elif float(number).is_integer():
                converted = int(number)
    if converted is None:
        raise TrainerConfigError(
            f"{where}: expected {_KIND_NAMES.get(param.kind, param.kind.__name__)}, got {value!r} "
            f"({type(value).__name__}).")
    if param.check is None:
        return converted
    predicate, description = param.check
    if not predicate(converted):
        raise TrainerConfigError(f"{where}: must be {description}, got {value!r}.")
    return converted



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
