"""Reward signals: the extrinsic reward and intrinsic ones (curiosity, RND) for on-policy trainers.

Why: on a sparse-reward task (``Pyramids``: nothing pays until the gold brick) a policy trained on
the environment's reward alone almost never sees the goal. An intrinsic reward for reaching states
the agent cannot yet predict makes it explore until it does. Configured as ML-Agents users know it::

    PyramidsBrain:
        reward_signals:
            extrinsic: {strength: 1.0, gamma: 0.99}
            rnd: {strength: 0.01, gamma: 0.99, encoding_size: 64, learning_rate: 1.0e-4}

Each signal has its own value head (``PPOModel.values[name]``) and its own GAE (its own
``gamma``); its rewards enter GAE multiplied by its ``strength``, and the policy's advantage is
the sum of the signals' advantages. Without a ``reward_signals`` block a trainer behaves exactly as
before: one extrinsic signal with the flat ``gamma``. A block lists every signal used: leaving
``extrinsic`` out trains on the intrinsic reward alone (as in ML-Agents).

* **Curiosity** (Pathak et al. 2017, "Curiosity-driven exploration by self-supervised
  prediction"): an encoder ``phi`` of the brain's inputs (the state and the cameras, through the
  shared ``trainers.encoders``), an inverse model that predicts the action from ``phi(s), phi(s')``
  (which shapes ``phi`` to keep what the agent controls) and a forward model that predicts
  ``phi(s')`` from ``phi(s)`` and the action. The reward is the forward model's error. Transitions
  that ended an episode have no next state in API-2 (the state sent with ``done`` is already the
  next episode's first), so they get no curiosity reward and are not trained on.
* **RND** (Burda et al. 2018, "Exploration by random network distillation"): a fixed, randomly
  initialised target network and a predictor trained to match it, both over the state normalised
  by running statistics of its own (and the cameras). The reward is the prediction error of
  ``s``, divided by a running standard deviation of those errors, so its scale does not depend on
  the inputs' scale and falls as states become familiar.

Both train on the same minibatches as the policy (their update ops run in the same
``session.run``), every op is built once in the trainer's ``__init__``, their variables (the fixed
target included) are checkpointed with the rest, and nothing of them reaches the exported graph
(the exporter keeps only what the output nodes need).
"""
from __future__ import annotations

import abc
import difflib
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from trainers.encoders import encode, observation_placeholders, state_placeholder, state_vector
from trainers.models import RunningNormalizer, dense, new_trainable_variables
from trainers.tf_utils import tf
from trainers.trainer import Param, TrainerConfigError, non_negative, positive, unit_interval
from unityagents.brain import BrainParameters

# ---------------------------------------------------------------------------------- settings
#: The keys of each signal, with their types, defaults and checks (docs/configuration.md lists them).
SIGNAL_PARAMETERS: Dict[str, Dict[str, Param]] = {
    "extrinsic": {
        "strength": Param(float, 1.0, check=(non_negative, ">= 0"), doc="factor of the environment's reward"),
        "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor of its returns"),
    },
    "curiosity": {
        "strength": Param(float, 0.02, check=(non_negative, ">= 0"), doc="factor of the forward model's error"),
        "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor of its returns"),
        "encoding_size": Param(int, 64, check=(positive, "> 0"), doc="width of the encoding phi(s)"),
        "learning_rate": Param(float, 3.0e-4, check=(positive, "> 0"), doc="Adam learning rate of its models"),
    },
    "rnd": {
        "strength": Param(float, 0.01, check=(non_negative, ">= 0"), doc="factor of the normalised prediction error"),
        "gamma": Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc="discount factor of its returns"),
        "encoding_size": Param(int, 64, check=(positive, "> 0"), doc="output width of the target and predictor"),
        "learning_rate": Param(float, 1.0e-4, check=(positive, "> 0"), doc="Adam learning rate of the predictor"),
    },
}

#: The ``reward_signals`` hyperparameter, for trainers that support reward signals (PPO).
REWARD_SIGNALS_PARAM = Param(
    dict, None,
    doc="nested block {signal: {key: value}} with signals extrinsic, curiosity, rnd (see below); "
        "absent: the extrinsic reward alone, with the flat gamma")

#: How each signal is named in TensorBoard tags (``Policy/<title> Reward``): ML-Agents' names.
SIGNAL_TITLES = {"extrinsic": "Extrinsic", "curiosity": "Curiosity", "rnd": "Rnd"}

_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _did_you_mean(key: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(key), list(candidates), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _coerce(where: str, value: Any, param: Param) -> Any:
    """``value`` in the declared type (YAML 1.1 strings such as ``1.0e-4`` are numbers), checked."""
    converted: Any = None
    if param.kind in (int, float) and not isinstance(value, bool):
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
    predicate, description = param.check
    if not predicate(converted):
        raise TrainerConfigError(f"{where}: must be {description}, got {value!r}.")
    return converted


def validate_reward_signals(brain_name: str, value: Any) -> Optional[Dict[str, Dict[str, Any]]]:
    """The ``reward_signals`` block checked and completed with defaults, or None when absent.

    Errors are ``TrainerConfigError``s naming the brain and the dotted key
    (``reward_signals.rnd.strenght``), with a "did you mean" for near misses, as for flat keys.
    """
    if value is None:
        return None
    where = f"brain '{brain_name}', key 'reward_signals'"
    if not isinstance(value, dict):
        raise TrainerConfigError(
            f"{where}: expected a block of signal: {{key: value}} (signals: {', '.join(SIGNAL_PARAMETERS)}), "
            f"got {value!r} ({type(value).__name__}).")
    if not value:
        raise TrainerConfigError(
            f"{where}: the block is empty, so nothing would reward the agent. List at least one signal "
            f"({', '.join(SIGNAL_PARAMETERS)}), or remove the key to train on the extrinsic reward alone.")
    settings: Dict[str, Dict[str, Any]] = {}
    for name, block in value.items():
        if name not in SIGNAL_PARAMETERS:
            raise TrainerConfigError(
                f"{where}: unknown reward signal {name!r}.{_did_you_mean(name, SIGNAL_PARAMETERS)} "
                f"The signals are: {', '.join(SIGNAL_PARAMETERS)}.")
        declared = SIGNAL_PARAMETERS[name]
        if block is None:
            block = {}
        if not isinstance(block, dict):
            raise TrainerConfigError(
                f"brain '{brain_name}', key 'reward_signals.{name}': expected a block of key: value "
                f"({', '.join(declared)}), got {block!r} ({type(block).__name__}).")
        resolved = {}
        for key, setting in block.items():
            if key not in declared:
                raise TrainerConfigError(
                    f"brain '{brain_name}', key 'reward_signals.{name}.{key}': unknown key of the {name} signal."
                    f"{_did_you_mean(key, declared)} Its keys are: {', '.join(sorted(declared))}.")
            resolved[key] = _coerce(f"brain '{brain_name}', key 'reward_signals.{name}.{key}'", setting, declared[key])
        settings[name] = {key: resolved.get(key, param.default) for key, param in declared.items()}
    # The extrinsic signal comes first: its value head is the exported value_estimate.
    return dict(sorted(settings.items(), key=lambda item: item[0] != "extrinsic"))


def signal_settings(params: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The signals a trainer uses: the validated block, or the extrinsic reward with the flat ``gamma``."""
    block = params.get("reward_signals")
    if block:
        return dict(block)
    return {"extrinsic": {"strength": 1.0, "gamma": float(params.get("gamma", 0.99))}}


# ---------------------------------------------------------------------------------- signals
class RewardSignal(abc.ABC):
    """One reward signal. Built once (in the trainer's build scope); evaluated per trajectory.

    :param fields: the trajectory fields ``evaluate`` and ``update_feed`` read.
    :param update_op: trains the signal's networks on a minibatch (None: nothing to train).
    :param metrics: scalar tensors computed with ``update_op``, averaged into the summaries.
    """

    name = "signal"
    needs_next_inputs = False

    def __init__(self, settings: Mapping[str, Any]):
        self.strength = float(settings["strength"])
        self.gamma = float(settings["gamma"])
        self.update_op: Optional[tf.Operation] = None
        self.metrics: Dict[str, tf.Tensor] = {}

    @property
    def title(self) -> str:
        return SIGNAL_TITLES.get(self.name, self.name)

    @abc.abstractmethod
    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        """The signal's reward for each step of a trajectory, before ``strength``."""

    def update_feed(self, fields: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        """The feed of ``update_op`` for a minibatch given as ``{field: [n, ...]}``."""
        return {}


class ExtrinsicSignal(RewardSignal):
    """The environment's reward, as it arrived."""

    name = "extrinsic"

    def evaluate(self, sess, fields: Mapping[str, np.ndarray], training: bool) -> np.ndarray:
        return np.asarray(fields["rewards"], dtype=np.float64)


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


def _encoder(vector: Optional[tf.Tensor], observations: List[tf.Tensor], size: int, name: str,
             reuse: bool = False, layers: int = 2) -> tf.Tensor:
    """``layers`` dense ELU layers of ``size`` over the shared encoding of the inputs."""
    with tf.variable_scope(name, reuse=reuse):
        x = encode(vector, observations, size)
        for i in range(layers):
            x = dense(x, size, f"dense_{i}", tf.nn.elu)
        return x


class CuriositySignal(RewardSignal):
    """Intrinsic curiosity module: inverse and forward models over a learned encoding.

    Public tensors: ``encoding`` / ``next_encoding``, ``inverse_prediction`` (action logits for
    discrete actions, the action itself for continuous ones), ``forward_error`` (``[N]``, the raw
    reward), ``inverse_loss``, ``forward_loss``, ``actions`` and ``valid`` (placeholders), and
    ``update_op``.
    """

    name = "curiosity"
    needs_next_inputs = True

    def __init__(self, brain: BrainParameters, settings: Mapping[str, Any]):
        super().__init__(settings)
        size = int(settings["encoding_size"])
        self.is_continuous = brain.action_space_type == "continuous"
        n_actions = brain.action_space_size
        with tf.variable_scope("curiosity"):
            before = tf.trainable_variables()
            self.inputs = SignalInputs(brain, with_next=True)
            i = self.inputs
            self.encoding = _encoder(i.vector(i.state), i.observations, size, "encoder")
            self.next_encoding = _encoder(i.vector(i.next_state), i.next_observations, size, "encoder", reuse=True)
            if self.is_continuous:
                self.actions = tf.placeholder(tf.float32, [None, n_actions], name="actions")
                action_input = self.actions
            else:
                self.actions = tf.placeholder(tf.int32, [None], name="actions")
                action_input = tf.one_hot(self.actions, n_actions)
            # 1 for transitions with a real next state (0 where the episode ended); ones unless fed.
            self.valid = tf.placeholder_with_default(tf.ones(tf.shape(self.encoding)[:1]), [None], name="valid")
            count = tf.maximum(tf.reduce_sum(self.valid), 1.0)

            hidden = dense(tf.concat([self.encoding, self.next_encoding], axis=1), 256, "inverse_hidden", tf.nn.elu)
            self.inverse_prediction = dense(hidden, n_actions, "inverse_head", gain=1.0)
            if self.is_continuous:
                inverse_error = tf.reduce_sum(tf.square(self.inverse_prediction - self.actions), axis=1)
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

            self.learning_rate = tf.placeholder_with_default(float(settings["learning_rate"]), [], name="learning_rate")
            loss = 0.2 * self.forward_loss + 0.8 * self.inverse_loss
            variables = new_trainable_variables(before)
            self.update_op = tf.train.AdamOptimizer(self.learning_rate).minimize(loss, var_list=variables)
        self.metrics = {"Losses/Curiosity Forward Loss": self.forward_loss,
                        "Losses/Curiosity Inverse Loss": self.inverse_loss}

    def _feed(self, fields: Mapping[str, np.ndarray]) -> Dict[tf.Tensor, Any]:
        feed = self.inputs.feed(fields, with_next=True)
        feed[self.actions] = fields["actions"]
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


class RNDSignal(RewardSignal):
    """Random network distillation: the predictor's error on a fixed random target network.

    Public tensors: ``raw_error`` (``[N]``, the squared prediction error), ``reward`` (``[N]``, the
    error over the running std of errors), ``update_statistics`` (folds the fed states and their
    errors into the running statistics), ``loss``, ``update_op``.
    """

    name = "rnd"

    def __init__(self, brain: BrainParameters, settings: Mapping[str, Any]):
        super().__init__(settings)
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
            target = tf.stop_gradient(_encoder(vector, i.observations, size, "target", layers=1))
            before = tf.trainable_variables()
            predictor = _encoder(vector, i.observations, size, "predictor", layers=2)
            predicted = dense(predictor, size, "predictor_head", gain=1.0)
            variables = new_trainable_variables(before)
            self.raw_error = tf.reduce_sum(tf.square(predicted - target), axis=1)
            errors = RunningNormalizer(self.raw_error[:, None], name="error_statistics")
            updates.append(errors.update)
            self.reward = self.raw_error / tf.sqrt(errors.variance[0] + 1e-8)
            self.update_statistics = tf.group(*updates, name="update_statistics")
            self.loss = tf.reduce_mean(self.raw_error)
            self.learning_rate = tf.placeholder_with_default(float(settings["learning_rate"]), [], name="learning_rate")
            self.update_op = tf.train.AdamOptimizer(self.learning_rate).minimize(self.loss, var_list=variables)
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


def create_reward_signals(brain: BrainParameters, settings: Mapping[str, Mapping[str, Any]]) -> Dict[str, RewardSignal]:
    """Build the signals of ``settings`` (from ``signal_settings``) in the current graph and scope."""
    signals: Dict[str, RewardSignal] = {}
    for name, values in settings.items():
        if name == "extrinsic":
            signals[name] = ExtrinsicSignal(values)
        elif name == "curiosity":
            signals[name] = CuriositySignal(brain, values)
        elif name == "rnd":
            signals[name] = RNDSignal(brain, values)
        else:  # validate_reward_signals refuses these first; a direct caller may not have
            raise TrainerConfigError(
                f"Unknown reward signal {name!r}; the signals are: {', '.join(SIGNAL_PARAMETERS)}.")
    return signals


# ---------------------------------------------------------------------------------- returns
def signal_gae(
    rewards: Mapping[str, np.ndarray],
    values: Mapping[str, np.ndarray],
    value_next: Mapping[str, float],
    gammas: Mapping[str, float],
    lambd: float,
) -> Dict[str, Dict[str, np.ndarray]]:
    """Per signal: GAE advantages and TD(lambda) returns of one trajectory (its own gamma).

    :param rewards: per signal, the rewards that enter GAE (already multiplied by ``strength``).
    :return: ``{signal: {"advantages": [T], "returns": [T]}}``; the policy's advantage is the sum
        of the signals' advantages.
    """
    from trainers.bases import get_gae  # bases imports this module

    out: Dict[str, Dict[str, np.ndarray]] = {}
    for name, reward in rewards.items():
        v = np.asarray(values[name], dtype=np.float64)
        advantages = get_gae(reward, v, float(value_next[name]), gamma=float(gammas[name]), lambd=lambd)
        out[name] = {"advantages": advantages, "returns": advantages + v}
    return out


__all__ = [
    "CuriositySignal",
    "ExtrinsicSignal",
    "REWARD_SIGNALS_PARAM",
    "RNDSignal",
    "RewardSignal",
    "SIGNAL_PARAMETERS",
    "SIGNAL_TITLES",
    "create_reward_signals",
    "signal_gae",
    "signal_settings",
    "validate_reward_signals",
]
