"""The interface every trainer implements, and the bookkeeping they all share.

The controller drives each trainer with the same calls, once per environment step::

    actions, memories, values, outputs = trainer.take_action(all_info)
    new_info = processor.infos(env.step(*processor.decisions(...)))  # controller, not trainer
    trainer.process_experience(collector.collect(all_info, new_info, outputs))
    if training and trainer.is_ready_update():
        trainer.update_model()
    trainer.write_summary(lesson)
    trainer.increment_step(n_agent_steps); trainer.update_last_reward()

where ``all_info`` and ``new_info`` hold the trainer's own brain's batch and those of the brains
it links (the brain a ghost copies, the teacher an imitator learns from), nothing else, and
``collector`` is the trainer's ``ExperienceCollector`` (``runner.collector``, built from the one
thing the trainer declares for it, its ``collection``: links, trajectory horizon, step fields): it
pairs the rows and hands the trainer an ``Experience`` of transitions, ended trajectories and
ended episodes. Two calls are only for trainers that define them: ``prepare_update()`` (a
``threaded`` trainer's update split so that its work runs beside acting; ``OnPolicyTrainer``'s)
and ``reset_request()`` (a reason to reset every environment after the step, or None; team
self-play's). After an environment reset the controller calls ``trainer.end_episode(agents)``
(``agents``: the keys of the agents whose episodes it cut; None for all). With several
environments (``--num-envs``) every agent is keyed ``(environment, agent id)`` and each
environment resets on its own, so a trainer must drop the state of those agents only. A trainer
never sees a socket: it gets ``BrainInfo`` batches to act on, ``Experience`` to learn from and
the ``BrainParameters`` of the scene. It builds all its TensorFlow ops in ``setup`` (inside
``tf.compat.v1.variable_scope(graph_scope)`` of the one shared graph), which ``__init__`` calls
last; the controller finalizes the graph before the loop, so an op created later fails loudly.

Steps are **agent steps**: one environment step of a brain with 12 agents adds 12. ``max_steps``
and ``summary_freq`` count the same unit.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
import types
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Deque, Dict, Hashable, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from trainers.settings.schema import (  # noqa: F401 (the trainers' and plugins' names for them)
    CheckedSettings,
    Param,
    TrainerConfigError,
    UnityTrainerException,
    brain_key,
    coerce_value,
    did_you_mean,
    nested,
    non_negative,
    positive,
    positive_fraction,
    settings_type,
    settings_view,
    unit_interval,
)
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.summaries import TrainerSummaries
from trainers.trainer.trajectory import Collection, Episode, Experience
from unityagents.brain import BrainParameters, same_spaces_error

logger = logging.getLogger("unityagents")

#: Episode rewards each trainer keeps for curriculum criteria (Release 22's min_lesson_length counts episodes).
EPISODE_REWARDS_KEPT = 10000


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


#: Keys every trainer understands. Subclasses extend this with ``{**Trainer.hyperparameters, ...}``.
COMMON_HYPERPARAMETERS: Dict[str, Param] = {
    "trainer": Param(str, None, doc="trainer type; defaults to ppo (or ghost/imitation from is_ghost/is_imitation)"),
    "is_ghost": Param(bool, False, doc="seed-compatible alias for trainer: ghost"),
    "is_imitation": Param(bool, False, doc="seed-compatible alias for trainer: imitation"),
    "max_steps": Param(float, 5.0e5, check=(positive, "> 0"), doc="agent steps to train for"),
    "summary_freq": Param(int, 10000, check=(positive, "> 0"), doc="agent steps between console/TensorBoard summaries"),
    "time_horizon": Param(int, 64, check=(positive, "> 0"),
                          doc="agent steps after which an agent's unfinished trajectory is handed to its trainer "
                              "(Release 22's key of every trainer): trainers that learn from trajectories cut it "
                              "there and bootstrap; those that learn from single transitions store each one as it "
                              "arrives"),
    "threaded": Param(bool, False, doc="update beside acting: on-policy trainers on a background thread while they "
                                       "keep acting with the weights they have (experience gathered meanwhile is one "
                                       "update old; runs are not bit-reproducible), others while the environments "
                                       "simulate the step just sent (the update sees data one step older)"),
    "init_path": Param(str, None, doc="start this brain's weights from another run's checkpoint (a run folder, its "
                                      "checkpoints/ folder or a model-<step>.cptk), step counters at 0"),
}


# Keys that mean the same in every trainer (and plugin) that has them: one declaration each, so
# they are checked alike everywhere; each trainer gives its own default and says what they tune.
#: Release 22's ``network_settings.deterministic``: act with the mean / most probable action.
DETERMINISTIC_PARAM = Param(bool, False, doc="act with the policy's mean (continuous) and most probable action "
                                             "(discrete), while training too, instead of sampling")


def learning_rate_param(default: float, doc: str) -> Param:
    """A ``learning_rate``: a positive float."""
    return Param(float, default, check=(positive, "> 0"), doc=doc)


def discount_param(doc: str = "discount factor") -> Param:
    """A ``gamma``: the discount factor of a return, in [0, 1], 0.99 unless given."""
    return Param(float, 0.99, check=(unit_interval, "in [0, 1]"), doc=doc)


def max_grad_norm_param(default: float) -> Param:
    """A ``max_grad_norm``: the global norm an update's gradients are clipped to."""
    return Param(float, default, check=(positive, "> 0"), doc="global norm the gradients are clipped to")


def network_params(hidden_units: int, of: str) -> Dict[str, Param]:
    """``hidden_units`` and ``num_layers`` (2 unless given) of the MLPs that ``of`` names in their docs."""
    return {
        "hidden_units": Param(int, hidden_units, check=(positive, "> 0"), doc=f"units per hidden layer of {of}"),
        "num_layers": Param(int, 2, check=(non_negative, ">= 0"), doc=f"hidden layers of {of}"),
    }


#: The seed's keys for what the run gives a trainer, when a direct caller (a test, the seed's scripts)
#: passes them among the hyperparameters; the runner passes a ``TrainerContext`` instead.
CONTEXT_KEYS = ("graph_scope", "summary_path", "original_brain_parameters")


@dataclass(frozen=True)
class TrainerContext:
    """What the run gives a trainer beside its settings, never part of the user's block.

    :param graph_scope: the variable scope of the trainer's graph ('' when it trains alone).
    :param summary_path: the folder of its summaries; None writes no files.
    :param copied: the settings of the brain whose policy it plays (a ghost's learner), or None.
    :param copied_scope: the graph scope of that brain.
    """

    graph_scope: str = ""
    summary_path: Optional[str] = None
    copied: Optional[Mapping[str, Any]] = None
    copied_scope: str = ""

    @classmethod
    def of(cls, parameters: Mapping[str, Any]) -> "TrainerContext":
        """The context a direct caller gives the seed's way, as ``CONTEXT_KEYS`` among the hyperparameters."""
        original = parameters.get("original_brain_parameters")
        if isinstance(original, Mapping):
            return cls(parameters.get("graph_scope", ""), parameters.get("summary_path"),
                       {k: v for k, v in original.items() if k != "graph_scope"}, original.get("graph_scope", ""))
        return cls(parameters.get("graph_scope", ""), parameters.get("summary_path"), original)

    def seed_keys(self) -> Dict[str, Any]:
        """The same, as the seed's keys (what the seed's ``Trainer.parameters`` showed beside the settings)."""
        keys: Dict[str, Any] = {"graph_scope": self.graph_scope, "summary_path": self.summary_path}
        if self.copied is not None:
            keys["original_brain_parameters"] = (dict(self.copied, graph_scope=self.copied_scope)
                                                 if isinstance(self.copied, Mapping) else self.copied)
        return keys


#: Per-trainer collector declarations that ``Trainer.collection`` replaced; a subclass defining one
#: is refused when it is defined, so that it is not silently ignored.
_MOVED_TO_COLLECTION = ("linked_brains", "trajectory_horizon")
#: Former public names of helpers only trainers use (and of the saved state) -> their names now; the
#: former names keep working, with a ``DeprecationWarning``.
_RENAMED_HELPERS = {"record_episodes": "_record_episodes", "environment_actions": "_environment_actions",
                    "get_state": "_saved_state", "set_state": "_restore_state"}


class Trainer(TrainerSummaries):
    """Base class of all trainers (built-in and plugins).

    :param sess: the run's one ``tf.compat.v1.Session``; ``sess.graph`` is the graph to build in.
    :param brains: every subscribed brain of the scene (``env.brains``), so that ghost and
        imitation trainers can look at the brain they copy or imitate.
    :param brain_name: the External brain this trainer drives.
    :param trainer_parameters: the brain's validated settings (its block, every declared key); a
        direct caller may leave keys out (they take their declared defaults) and may give the seed's
        ``graph_scope``, ``summary_path`` and ``original_brain_parameters`` among them.
    :param training: False when ``learn.py`` runs without ``--train`` (inference only).
    :param seed: seeds the trainer's own NumPy generator.
    :param context: what the run gives the trainer beside its settings (``TrainerContext``); None
        reads it from the seed's keys of ``trainer_parameters``.

    The constructor is the same for every trainer, so a subclass does not override it: it does
    its own set-up (graph, buffers, counters) in ``setup``, which ``__init__`` calls once the
    arguments above are stored as ``sess``, ``brains``, ``brain_name``, ``brain``, ``is_training``
    and ``rng``. The trainer reads its settings one way, ``settings``; ``parameters`` is the seed's
    read-only view of them.
    """

    trainer_type: ClassVar[str] = "base"
    #: False for trainers that only act for others (the ghost): they neither keep the run going
    #: nor count towards the curriculum's measure.
    is_learner: ClassVar[bool] = True
    hyperparameters: ClassVar[Dict[str, Param]] = COMMON_HYPERPARAMETERS

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        moved = [name for name in _MOVED_TO_COLLECTION if name in vars(cls)]
        if "step_fields" in vars(cls) and cls.collection is Trainer.collection:
            moved.append("step_fields")
        if moved:
            raise TypeError(
                f"{cls.__qualname__} defines {', '.join(moved)}, which the collector does not read: declare "
                "them in one `collection` property returning trainers.trainer.trajectory.Collection(linked_brains=..., "
                "horizon=..., step_fields=...) (docs/plugins.md, \"What the collector keeps\").")
        for old, new in _RENAMED_HELPERS.items():  # a subclass written against the former names still counts
            if old in vars(cls) and new not in vars(cls):
                warnings.warn(f"{cls.__qualname__}.{old} overrides a helper now named {new}; rename it.",
                              DeprecationWarning, stacklevel=2)
                setattr(cls, new, vars(cls)[old])

    def __init__(
        self,
        sess,
        brains: Mapping[str, BrainParameters],
        brain_name: str,
        trainer_parameters: Dict[str, Any],
        training: bool,
        seed: int = 0,
        context: Optional[TrainerContext] = None,
    ):
        if hasattr(brains, "brains"):  # the seed passed the environment itself
            brains = brains.brains
        self.sess = sess
        self.brains = dict(brains)
        self.brain_name = brain_name
        self.brain: BrainParameters = self.brains[brain_name]
        self._context = context if context is not None else TrainerContext.of(trainer_parameters)
        # The declared settings; keys a direct caller (test, script) left out take their declared
        # defaults, as the YAML would give them, and the nested blocks it passes are checked and
        # completed by their declarations, as a reader does for the runner.
        if isinstance(trainer_parameters, CheckedSettings) and trainer_parameters.declared is self.hyperparameters:
            self._values: Mapping[str, Any] = trainer_parameters  # a reader's, with its typed form
            self._settings = trainer_parameters.typed
        else:
            self._values = {key: trainer_parameters.get(key, param.default)
                            for key, param in self.hyperparameters.items()}
        if context is None and not isinstance(self._values, CheckedSettings):
            where = brain_key(f"brain '{brain_name}'")
            for key, param in self.hyperparameters.items():
                if param.block is not None and self._values[key] is not None:
                    self._values[key] = param.block(nested(where, key), self._values[key])
        self.is_training = training
        self.rng = np.random.default_rng(seed)
        self.stats: Dict[str, List[float]] = {}
        self._stats_lock = threading.Lock()
        #: The latest episodes' rewards (newest last) and how many episodes ended so far in this process.
        self.episode_rewards: Deque[float] = collections.deque(maxlen=EPISODE_REWARDS_KEPT)
        self.episodes_completed = 0
        #: The scene's own stats since the last summary: key -> (aggregation, values) (``add_stat``).
        self._scene_stats: Dict[str, Tuple[str, List[float]]] = {}
        self.step = 0
        self.last_reward = 0.0
        #: The list of episode rewards ``last_reward`` was last taken from, and its length then.
        self._rewards_seen: Tuple[Optional[List[float]], int] = (None, 0)
        self._stats_reporter = None
        self._last_summary_step = 0
        self._start_time = time.time()
        self._start_step = 0
        self.setup()

    @property
    def settings(self) -> Any:
        """The declared settings as a frozen dataclass (``self.settings.time_horizon``), each scalar
        of its declared kind and each nested block (``reward_signals``, ``behavioral_cloning``,
        ``self_play``) as its own frozen dataclass; made on first use.
        """
        view = self.__dict__.get("_settings")
        if view is None:
            view = self._settings = settings_view(type(self).hyperparameters, self._values,
                                                  f"{type(self).__name__}Settings", self.brain_name)
        return view

    def __getattr__(self, name: str) -> Any:
        if name in ("hp", "trainer_parameters"):
            raise AttributeError(f"{type(self).__name__}.{name} is gone: read self.settings.<key> (a frozen "
                                 "dataclass of the declared settings), or the read-only mapping self.parameters.")
        if name in _RENAMED_HELPERS:
            warnings.warn(f"Trainer.{name} is now {_RENAMED_HELPERS[name]} (or the `state` property).",
                          DeprecationWarning, stacklevel=2)
            return getattr(self, _RENAMED_HELPERS[name])
        if name == "should_still_train":
            warnings.warn("Trainer.should_still_train is now runner.controller.still_trains(trainer).",
                          DeprecationWarning, stacklevel=2)
            return self.is_learner and self.get_step < self.get_max_steps
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
    def check_parameters(cls, brain_name: str, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """Cross-field checks of the settings (each already has its declared type); return the checked
        block as a new dict (nested blocks completed), leaving ``params`` as it is. A hook that
        returns None keeps the block it was given.

        Raise ``TrainerConfigError("brain 'X', key 'k': ...")``; the file name is prefixed.
        """
        return dict(params)

    @classmethod
    def check_environment(cls, brain_name: str, params: Dict[str, Any],
                          brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        """Checks that need the scene (e.g. the brain a ghost copies must be External)."""

    # ----------------------------------------------------------------- seed surface: properties
    @property
    def parameters(self) -> Mapping[str, Any]:
        """The seed's view of the settings: a read-only mapping of every declared key, with the
        run's ``graph_scope`` and ``summary_path`` beside them, as the seed showed them."""
        return types.MappingProxyType({**self._values, **self._context.seed_keys()})

    @property
    def graph_scope(self) -> Optional[str]:
        """The scope the trainer's graph lives in ('' when alone); None if it exports nothing."""
        return self._context.graph_scope

    @property
    def collection(self) -> Collection:
        """What the collector keeps for this trainer: the other brains it reads, where its
        trajectories are cut, the fields added to each step (``trainers.trainer.trajectory.Collection``).

        The default reads no other brain and keeps no trajectory: the trainer learns from each
        step's transitions. What a trainer may read of the scene is declared here, not found by
        indexing other brains by name.
        """
        return Collection()

    @property
    def get_max_steps(self) -> float:
        return float(self.settings.max_steps)

    @property
    def get_step(self) -> int:
        return self.step

    @property
    def get_last_reward(self) -> float:
        return self.last_reward

    # ----------------------------------------------------------------- seed surface: methods
    def increment_step(self, n: int = 1) -> None:
        """Count ``n`` agent steps (the controller passes the number of agents that acted)."""
        self.step += int(n)

    def update_last_reward(self) -> None:
        """Remember the mean episode reward since the last summary (the curriculum's measure).

        Called every step; the mean is taken again only when the list of episode rewards is another
        one or longer (a summary replaces it, ``add_stat`` only appends), so a step that ended no
        episode costs no pass over the period's rewards.
        """
        rewards = self.stats.get("cumulative_reward")
        if rewards and (rewards is not self._rewards_seen[0] or len(rewards) != self._rewards_seen[1]):
            self._rewards_seen = (rewards, len(rewards))
            self.last_reward = float(np.mean(rewards))

    def _environment_actions(self, actions: np.ndarray) -> np.ndarray:
        """What the environment receives for the policy's ``actions``: the brain's contract applied.

        Every ``take_action`` returns its actions through here, so that over the modern protocol
        a Gaussian policy's sample reaches Unity as ``clamp(a, -3, 3) / 3``, the numbers its ONNX
        export produces (``BrainParameters.environment_actions``); API-2 actions pass unchanged.
        A trainer whose continuous actions are already in [-1, 1] (a tanh-squashed policy, or one
        that copies actions the environment executed) declares ``continuous_actions_bounded = True``
        (False where it declares nothing): they are then only clamped to [-1, 1].
        """
        return self.brain.environment_actions(actions, bounded=getattr(self, "continuous_actions_bounded", False))

    def take_action(self, all_info: Dict[str, BrainInfo]):
        """Decide for the agents of ``all_info[self.brain_name]``.

        :return: ``(actions, memories or None, values or None, outputs)``; ``actions`` are what
            the environment receives (``_environment_actions`` of the policy's decision), and
            ``outputs`` reaches the collector, which stores its ``fields`` with each step.
        """
        raise UnityTrainerException(f"{type(self).__name__} does not implement take_action")

    def process_experience(self, experience: Experience) -> None:
        """Learn from what one step gave this trainer (``trainers.trainer.trajectory.Experience``)."""
        raise UnityTrainerException(f"{type(self).__name__} does not implement process_experience")

    def _record_episodes(self, episodes: Iterable[Episode]) -> None:
        """``cumulative_reward`` and ``episode_length`` of each ended episode: the console line's and
        the curriculum's measure."""
        for episode in episodes:
            self.add_stat("cumulative_reward", episode.reward)
            self.add_stat("episode_length", episode.length)

    def end_episode(self, agents: Optional[Iterable[Hashable]] = None) -> None:
        """Called after an environment reset: the episodes of ``agents`` (None: of every agent)
        ended without a result, and their trajectories in progress are no longer continued."""

    def is_ready_update(self) -> bool:
        return False

    def experience_can_wait(self, steps: int, deciding: int, bootstraps: bool) -> bool:
        """Whether this step's experience may reach the trainer after the next step is acted on and sent.

        The controller then hands it over while the environments simulate the next step, where the
        trainer's thread would otherwise wait on them. Only for a trainer whose next action comes
        out the same either way: handing the experience over, counting ``deciding`` agent steps
        (``increment_step``) and writing a summary must not change what ``act`` reads, and acting
        must not change what the experience's processing reads (its bootstrap values included).

        :param steps: the most agent steps this step's experience can hand to the trainer (the
            steps its collector holds in trajectories in progress, plus this step's transitions).
        :param deciding: the agents that acted this step (``increment_step``'s count).
        :param bootstraps: whether the experience may end a trajectory that needs a bootstrap value.

        False here: a trainer says yes only where it knows both sides (``OnPolicyTrainer``).
        """
        return False

    def _count_stays_short(self, deciding: int) -> bool:
        """Whether counting ``deciding`` more agent steps leaves the count short of ``max_steps`` and of
        the next summary (``experience_can_wait``'s rule for the count and the summaries)."""
        step, freq = self.step + deciding, int(self.settings.summary_freq)
        return step < self.get_max_steps and step // freq <= self._last_summary_step // freq

    def update_model(self) -> None:
        raise UnityTrainerException(f"{type(self).__name__} does not implement update_model")

    def export_nodes(self) -> List[str]:
        """Output node names (relative to ``graph_scope``) to keep in the frozen graph."""
        return ["action"]

    # ----------------------------------------------------------------- state beyond TF variables
    @property
    def state(self) -> Dict[str, Any]:
        """Python-side state saved beside each checkpoint (weights live in TF variables); assigning
        a saved state restores it. A trainer with more state extends ``_saved_state`` and
        ``_restore_state``."""
        return self._saved_state()

    @state.setter
    def state(self, saved: Dict[str, Any]) -> None:
        self._restore_state(saved)

    def _saved_state(self) -> Dict[str, Any]:
        return {"step": self.step, "last_reward": self.last_reward}

    def _restore_state(self, state: Dict[str, Any]) -> None:
        self.step = int(state.get("step", 0))
        self.last_reward = float(state.get("last_reward", 0.0))
        self._last_summary_step = self.step
        self._start_step = self.step
        self._start_time = time.time()

    # ----------------------------------------------------------------- summaries

    def __str__(self) -> str:
        params = "\n".join(f"\t{k}:\t{v}" for k, v in sorted(self.parameters.items()))
        scope = "exports nothing" if self.graph_scope is None else f"scope '{self.graph_scope}'"
        return f"{type(self).__name__} for brain {self.brain_name} ({scope}):\n{params}"
