"""The interface every trainer implements, and the bookkeeping they all share.

The controller drives each trainer with the same calls, once per environment step::

    actions, memories, values, outputs = trainer.take_action(all_info)
    new_info = processor.infos(env.step(*processor.decisions(...)))  # controller, not trainer
    trainer.add_experiences(all_info, new_info, outputs)
    trainer.process_experiences(new_info)
    if training and trainer.is_ready_update():
        trainer.update_model()
    trainer.write_summary(lesson)
    trainer.increment_step(n_agent_steps); trainer.update_last_reward()

and ``trainer.end_episode(agents)`` after an environment reset (``agents``: the keys of the agents
whose episodes it cut; None for all). With several environments (``--num-envs``) every agent is
keyed ``(environment, agent id)`` and each environment resets on its own, so a trainer must drop
the state of those agents only. A trainer never sees a socket: it gets
``BrainInfo`` objects (the agent processor's batches of the environment's steps) and the
``BrainParameters`` of the scene. It builds all its TensorFlow ops
in ``setup`` (inside ``tf.compat.v1.variable_scope(graph_scope)`` of the one shared graph), which
``__init__`` calls last; the controller finalizes the graph before the loop, so an op created
later fails loudly.

Steps are **agent steps**: one environment step of a brain with 12 agents adds 12. ``max_steps``
and ``summary_freq`` count the same unit.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import difflib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Deque, Dict, Hashable, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.summaries import TrainerSummaries
from unityagents.brain import BrainParameters, same_spaces_error
from unityagents.exception import UnityException

logger = logging.getLogger("unityagents")

#: Episode rewards each trainer keeps for curriculum criteria (Release 22's min_lesson_length counts episodes).
EPISODE_REWARDS_KEPT = 10000


class UnityTrainerException(UnityException):
    """A trainer was misconfigured or asked to do something it cannot do."""


class TrainerConfigError(UnityTrainerException):
    """The trainer configuration is invalid. The message names the file, brain and key."""


@dataclass(frozen=True)
class Param:
    """One hyperparameter a trainer accepts in ``trainer_configurations.yaml``.

    :param kind: ``int``, ``float``, ``bool``, ``str`` or ``list``. Floats accept ints and
        YAML-1.1 strings such as ``1.0e6``; ints accept integral floats (``1.0e6`` again).
    :param default: used when neither the brain's block nor ``default:`` sets the key; ``None``
        with ``required=True`` means the key must be given.
    :param check: ``(predicate, description)``; the description completes "must be ...".
    """

    kind: type
    default: Any = None
    required: bool = False
    doc: str = ""
    check: Optional[Tuple[Callable[[Any], bool], str]] = None


_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list",
               dict: "a block of key: value"}


def did_you_mean(key: Any, candidates) -> str:
    """`` Did you mean 'x'?`` for the closest of ``candidates``, or nothing when none is close."""
    close = difflib.get_close_matches(str(key), [str(c) for c in candidates], n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def coerce_value(where: str, value: Any, param: Param) -> Any:
    """``value`` checked against ``param`` and returned in the declared type; errors start with ``where``.

    The one coercion of every settings key, flat or nested. YAML 1.1 reads ``1.0e6`` (no sign in the
    exponent) as a string, so numeric strings are accepted for numbers; integral floats are accepted
    for integers; numbers must be finite.
    """
    kind = param.kind
    converted: Any = None
    if value is None and not param.required and param.default is None:
        return None
    if kind is bool:
        converted = value if isinstance(value, bool) else None
    elif kind in (int, float) and not isinstance(value, bool):
        number: Optional[float] = None
        if isinstance(value, (int, float)):
            number = value
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if number is not None:
            if not math.isfinite(number):
                raise TrainerConfigError(
                    f"{where}: expected a finite number, got {value!r}, which is {float(number)}. Give a finite "
                    f"value{f' ({param.doc})' if param.doc else ''}.")
            if kind is float:
                converted = float(number)
            elif float(number).is_integer():
                converted = int(number)
    elif kind is str:
        converted = value if isinstance(value, str) else None
    elif kind is list:
        converted = list(value) if isinstance(value, (list, tuple)) else None
    else:
        converted = value if isinstance(value, kind) else None
    if converted is None:
        raise TrainerConfigError(
            f"{where}: expected {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r} ({type(value).__name__}).")
    if param.check is not None:
        predicate, description = param.check
        if not predicate(converted):
            raise TrainerConfigError(f"{where}: must be {description}, got {value!r}.")
    return converted


def check_batch_fits(brain_name: str, params: Mapping[str, Any], consequence: str) -> None:
    """Refuse a ``batch_size`` larger than ``buffer_size``; ``consequence`` says why it cannot work."""
    if params["batch_size"] > params["buffer_size"]:
        raise TrainerConfigError(
            f"brain '{brain_name}', key 'batch_size': {params['batch_size']} is larger than buffer_size "
            f"{params['buffer_size']}, so {consequence}. Lower batch_size or raise buffer_size.")


def check_same_spaces(where: str, brains: Mapping[str, BrainParameters], brain_name: str, other: str,
                      why: str) -> None:
    """Refuse two brains whose state, action or camera spaces differ; ``why`` says why they must match."""
    difference = same_spaces_error(brains[brain_name], brains[other])
    if difference:
        raise TrainerConfigError(
            f"{where}: {why}, so both brains need the same state and action spaces and cameras, but they "
            f"differ ('{brain_name}' vs {other!r}): {difference}.")


def positive(x) -> bool:
    return x > 0


def non_negative(x) -> bool:
    return x >= 0


def unit_interval(x) -> bool:
    return 0.0 <= x <= 1.0


#: The kinds a settings view holds; blocks (``dict``) and lists stay in ``Trainer.hp`` only.
_SCALAR_KINDS = (int, float, bool, str)
_SETTINGS_TYPES: Dict[int, Tuple[Dict[str, Param], type]] = {}


def settings_type(params: Dict[str, Param], name: str = "TrainerSettings") -> type:
    """The frozen dataclass of the scalar keys of ``params`` (one field per key, its declared kind).

    Made once per declaration dictionary, so that every trainer of a type shares one class.
    """
    cached = _SETTINGS_TYPES.get(id(params))
    if cached is not None and cached[0] is params:
        return cached[1]
    fields = [(key, Optional[param.kind], dataclasses.field(default=None)) for key, param in params.items()
              if param.kind in _SCALAR_KINDS and key.isidentifier()]
    made = dataclasses.make_dataclass(name, fields, frozen=True)
    _SETTINGS_TYPES[id(params)] = (params, made)
    return made


def settings_view(params: Dict[str, Param], values: Mapping[str, Any], name: str = "TrainerSettings") -> Any:
    """``values`` (validated hyperparameters) as a ``settings_type(params)``: each scalar converted to
    its declared kind once (``1.0e6`` read as a string becomes ``1000000.0``); missing keys take their
    declared defaults; None stays None."""
    kinds = {f.name: params[f.name].kind for f in dataclasses.fields(settings_type(params, name))}
    converted = {}
    for key, kind in kinds.items():
        value = values.get(key, params[key].default)
        converted[key] = None if value is None else kind(float(value) if kind is int and isinstance(value, str)
                                                         else value)
    return settings_type(params, name)(**converted)


#: Keys every trainer understands. Subclasses extend this with ``{**Trainer.hyperparameters, ...}``.
COMMON_HYPERPARAMETERS: Dict[str, Param] = {
    "trainer": Param(str, None, doc="trainer type; defaults to ppo (or ghost/imitation from is_ghost/is_imitation)"),
    "is_ghost": Param(bool, False, doc="seed-compatible alias for trainer: ghost"),
    "is_imitation": Param(bool, False, doc="seed-compatible alias for trainer: imitation"),
    "max_steps": Param(float, 5.0e5, check=(positive, "> 0"), doc="agent steps to train for"),
    "summary_freq": Param(int, 10000, check=(positive, "> 0"), doc="agent steps between console/TensorBoard summaries"),
}


class Trainer(TrainerSummaries):
    """Base class of all trainers (built-in and plugins).

    :param sess: the run's one ``tf.compat.v1.Session``; ``sess.graph`` is the graph to build in.
    :param brains: every subscribed brain of the scene (``env.brains``), so that ghost and
        imitation trainers can look at the brain they copy or imitate.
    :param brain_name: the External brain this trainer drives.
    :param trainer_parameters: validated hyperparameters plus ``graph_scope`` and
        ``summary_path`` (added by the controller).
    :param training: False when ``learn.py`` runs without ``--train`` (inference only).
    :param seed: seeds the trainer's own NumPy generator.

    The constructor is the same for every trainer, so a subclass does not override it: it does
    its own set-up (graph, buffers, counters) in ``setup``, which ``__init__`` calls once the
    arguments above are stored as ``sess``, ``brains``, ``brain_name``, ``brain``,
    ``trainer_parameters``, ``hp`` (the declared hyperparameters), ``is_training`` and ``rng``.
    """

    trainer_type: ClassVar[str] = "base"
    #: False for trainers that only act for others (the ghost): they neither keep the run going
    #: nor count towards the curriculum's measure.
    is_learner: ClassVar[bool] = True
    hyperparameters: ClassVar[Dict[str, Param]] = COMMON_HYPERPARAMETERS
    #: True for a policy whose continuous actions are already in [-1, 1] (a tanh-squashed
    #: policy, or one that copies actions the environment executed): over the modern protocol
    #: they are sent as they are (clamped to [-1, 1]) instead of as ``clamp(a, -3, 3) / 3``.
    continuous_actions_bounded: ClassVar[bool] = False

    def __init__(
        self,
        sess,
        brains: Mapping[str, BrainParameters],
        brain_name: str,
        trainer_parameters: Dict[str, Any],
        training: bool,
        seed: int = 0,
    ):
        if hasattr(brains, "brains"):  # the seed passed the environment itself
            brains = brains.brains
        self.sess = sess
        self.brains = dict(brains)
        self.brain_name = brain_name
        self.brain: BrainParameters = self.brains[brain_name]
        self.trainer_parameters = trainer_parameters
        # The declared hyperparameters; keys a direct caller (test, script) left out take their
        # declared defaults, as the YAML would give them.
        self.hp: Dict[str, Any] = {key: trainer_parameters.get(key, param.default)
                                   for key, param in self.hyperparameters.items()}
        self.is_training = training
        self.rng = np.random.default_rng(seed)
        self.stats: Dict[str, List[float]] = {}
        #: The latest episodes' rewards (newest last) and how many episodes ended so far in this process.
        self.episode_rewards: Deque[float] = collections.deque(maxlen=EPISODE_REWARDS_KEPT)
        self.episodes_completed = 0
        self._environment_stats: Dict[str, Tuple[str, List[float]]] = {}
        self.step = 0
        self.last_reward = 0.0
        self._stats_reporter = None
        self._last_summary_step = 0
        self._start_time = time.time()
        self._start_step = 0
        self.setup()

    @property
    def settings(self) -> Any:
        """The declared scalar hyperparameters as a frozen dataclass (``self.settings.time_horizon``),
        each of its declared kind, built from ``hp`` on first use (once ``setup`` completed it).

        Nested blocks (``reward_signals``, ``behavioral_cloning``, ``self_play``) stay in ``hp``.
        """
        view = self.__dict__.get("_settings")
        if view is None:
            view = self._settings = settings_view(type(self).hyperparameters, self.hp, f"{type(self).__name__}Settings")
        return view

    def setup(self) -> None:
        """Build the trainer's graph and its own state; ``__init__`` calls it once, last.

        A subclass of a trainer that sets up something (every base and built-in trainer does)
        calls ``super().setup()`` first, so that what it builds on already exists.
        """

    @contextlib.contextmanager
    def build_scope(self) -> Iterator[None]:
        """Build ops here: the run's graph, under this brain's ``graph_scope`` (none when alone).

        Node names created inside are relative to the scope, which is what the export contract
        (``state``, ``batch_size``, ``action``, ...) and Unity's Internal brain expect.
        """
        from trainers.tf_utils import tf

        scope = self.graph_scope
        with self.sess.graph.as_default(), (tf.variable_scope(scope) if scope else contextlib.nullcontext()):
            yield

    # ----------------------------------------------------------------- configuration hooks
    @classmethod
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> None:
        """Cross-field checks of the hyperparameters (each already has its declared type).

        Raise ``TrainerConfigError("brain 'X', key 'k': ...")``; the file name is prefixed.
        """

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """Checks that need the scene (e.g. the brain a ghost copies must be External)."""

    # ----------------------------------------------------------------- seed surface: properties
    @property
    def parameters(self) -> Dict[str, Any]:
        """The trainer's hyperparameters."""
        return self.trainer_parameters

    @property
    def graph_scope(self) -> Optional[str]:
        """The scope the trainer's graph lives in ('' when alone); None if it exports nothing."""
        return self.trainer_parameters.get("graph_scope", "")

    @property
    def get_max_steps(self) -> float:
        return float(self.trainer_parameters["max_steps"])

    @property
    def get_step(self) -> int:
        return self.step

    @property
    def get_last_reward(self) -> float:
        return self.last_reward

    @property
    def should_still_train(self) -> bool:
        """Whether the controller's loop must keep running for this trainer."""
        return self.step < self.get_max_steps

    # ----------------------------------------------------------------- seed surface: methods
    def increment_step(self, n: int = 1) -> None:
        """Count ``n`` agent steps (the controller passes the number of agents that acted)."""
        self.step += int(n)

    def update_last_reward(self) -> None:
        """Remember the mean episode reward since the last summary (the curriculum's measure)."""
        rewards = self.stats.get("cumulative_reward")
        if rewards:
            self.last_reward = float(np.mean(rewards))

    def environment_actions(self, actions: np.ndarray) -> np.ndarray:
        """What the environment receives for the policy's ``actions``: the brain's contract applied.

        Every ``take_action`` returns its actions through here, so that over the modern protocol
        a Gaussian policy's sample reaches Unity as ``clamp(a, -3, 3) / 3``, the numbers its ONNX
        export produces (``BrainParameters.environment_actions``); API-2 actions pass unchanged.
        """
        return self.brain.environment_actions(actions, bounded=self.continuous_actions_bounded)

    def take_action(self, all_info: Dict[str, BrainInfo]):
        """Decide for the agents of ``all_info[self.brain_name]``.

        :return: ``(actions, memories or None, values or None, outputs)``; ``actions`` are what
            the environment receives (``environment_actions`` of the policy's decision), and
            ``outputs`` is handed back unchanged to ``add_experiences``.
        """
        raise UnityTrainerException(f"{type(self).__name__} does not implement take_action")

    def add_experiences(self, info: Dict[str, BrainInfo], next_info: Dict[str, BrainInfo], outputs) -> None:
        raise UnityTrainerException(f"{type(self).__name__} does not implement add_experiences")

    def process_experiences(self, info: Dict[str, BrainInfo]) -> None:
        raise UnityTrainerException(f"{type(self).__name__} does not implement process_experiences")

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """Called after an environment reset: the episodes of ``agents`` (None: of every agent)
        ended without a result, and their trajectories in progress are no longer continued."""

    def is_ready_update(self) -> bool:
        return False

    def reset_request(self) -> Optional[str]:
        """Why every environment must reset before the next step (self-play's team change), or None."""
        return None

    def update_model(self) -> None:
        raise UnityTrainerException(f"{type(self).__name__} does not implement update_model")

    def export_nodes(self) -> List[str]:
        """Output node names (relative to ``graph_scope``) to keep in the frozen graph."""
        return ["action"]

    # ----------------------------------------------------------------- state beyond TF variables
    def get_state(self) -> Dict[str, Any]:
        """Python-side state saved beside each checkpoint (weights live in TF variables)."""
        return {"step": self.step, "last_reward": self.last_reward}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.step = int(state.get("step", 0))
        self.last_reward = float(state.get("last_reward", 0.0))
        self._last_summary_step = self.step
        self._start_step = self.step
        self._start_time = time.time()

    # ----------------------------------------------------------------- summaries

    def __str__(self) -> str:
        params = "\n".join(f"\t{k}:\t{v}" for k, v in sorted(self.trainer_parameters.items()))
        scope = "exports nothing" if self.graph_scope is None else f"scope '{self.graph_scope}'"
        return f"{type(self).__name__} for brain {self.brain_name} ({scope}):\n{params}"
