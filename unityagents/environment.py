"""``UnityEnvironment``: launch or connect to an environment, reset it, step it, close it.

Python is the server and the environment (a Unity build, or a built-in scene of ``academy``)
is the client, in either protocol:

* ``protocol="api2"`` (default): the raw-socket protocol of ML-Agents #166
  (its bytes are described in ``unityagents.wire.api2``);
* ``protocol="grpc"``: the modern ML-Agents protocol, communication API 1.5.0, which every
  Unity build since 2021 speaks (described in ``unityagents.wire.grpc`` and docs/getting-started.md's "Modern
  Unity builds" section).

This module has the process launched (``launcher``, by the rules of the chosen protocol), validates
what the caller gives ``reset``/``step`` (``decisions``), and keeps the brains' bookkeeping; it never
asks which protocol it speaks: the communicator (``unityagents.wire.base.Communicator``) owns the
bytes, answers what differs between protocols, and knows of the environment only its ``Peer``
(timeout, log, process). Both listen on
127.0.0.1 only, time out instead of hanging, poll the launched process while
they wait and reap it on every failure, and raise errors that say what was expected, what arrived
and what to do. This module knows nothing of learning and never imports TensorFlow.
"""
from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from unityagents.base_env import (
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    BehaviorSteps,
    DecisionSteps,
    ObservationSpec,
    TerminalSteps,
)
from unityagents.brain_info import BrainInfo, BrainInfos
from unityagents.curriculum import AnyResetParameter, Curriculum
from unityagents.decisions import ActionInput, Actions, DecisionChecker, checked_floats
from unityagents.editor import EDITOR_PORT, listening_message
from unityagents.editor import not_found as editor_not_found
from unityagents.editor import port_taken as editor_port_taken
from unityagents.exception import (
    UnityActionException,
    UnityEnvironmentException,
    UnityException,
    UnityTimeOutException,
    UnityWorkerInUseException,
    is_own_log,
)
from unityagents.launcher import choose_protocol, launch
from unityagents.scene_facts import SceneFacts
from unityagents.wire.base import COMMUNICATORS, Communicator, Peer, Stat, communicator_class

logger = logging.getLogger("unityagents")

PROTOCOLS = tuple(COMMUNICATORS)
#: The first port an environment listens on when ``base_port`` is not given (plus ``worker_id``).
BASE_ENVIRONMENT_PORT = 5005


def _only_ended(steps: Optional[BehaviorSteps]) -> int:
    """How many agents of a behaviour's steps ended their episode without asking for a decision."""
    if steps is None or not len(steps[1]):
        return 0
    deciding = steps[0]
    return sum(1 for a in steps[1] if a not in deciding)


def _one_of(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """``value``, or the same argument under its mlagents_envs name; both given is an error."""
    if alias_value is None:
        return value
    if value:
        raise TypeError(f"{name} and {alias} are the same argument (the second is mlagents_envs' name); give one.")
    return alias_value


def _channels_first_spec(spec: BehaviorSpec, cameras: Sequence[bool]) -> BehaviorSpec:
    """``spec`` as mlagents_envs describes it: each camera's shape ``(C, H, W)`` and its dimension
    properties in that order; the other sensors and the actions as they are."""
    def one(o: ObservationSpec, camera: bool) -> ObservationSpec:
        if not camera:
            return o
        h, w, c = o.shape
        dims = o.dimension_property
        return dataclasses.replace(o, shape=(c, h, w), dimension_property=(dims[2], dims[0], dims[1]) if dims else ())
    return BehaviorSpec([one(o, camera) for o, camera in zip(spec.observation_specs, cameras)], spec.action_spec)


def _channels_first_steps(steps: BehaviorSteps, cameras: Sequence[bool]) -> BehaviorSteps:
    """``steps`` with each camera's ``obs`` ``[n, C, H, W]``: a view of the ``[n, H, W, C]`` arrays, no copy."""
    def obs(arrays: List[np.ndarray]) -> List[np.ndarray]:
        return [np.moveaxis(a, -1, 1) if camera else a for a, camera in zip(arrays, cameras)]
    decisions, terminals = steps
    return (dataclasses.replace(decisions, obs=obs(decisions.obs)),
            dataclasses.replace(terminals, obs=obs(terminals.obs)))


class UnityEnvironment(SceneFacts, BaseEnv):
    """A running environment: a Unity build or a built-in ``academy`` scene, over a local socket.

    It serves two doors (``docs/python-api.md``): the original API's (ML-Agents 0.3), where
    ``reset`` and ``step`` return ``{brain name: BrainInfo}`` and ``step`` takes plain arrays, and
    mlagents_envs 1.1's low-level API (``behavior_specs``, ``get_steps``, ``set_actions``,
    ``set_action_for_agent``, ``step()``), whose cameras are channels first as in mlagents_envs
    (``ObservationSpec.shape`` ``(C, H, W)``, ``obs`` ``[n, C, H, W]``).
    The environment set, the bridges and the trainers' tools speak the step types through
    ``reset_behaviors``/``step_behaviors`` (or their halves ``reset_send``/``step_send``/``receive``),
    whose cameras are channels last (``[n, H, W, C]``), the layout the trainers and the ONNX export's
    feeds read.

    :param file_name: a Unity build (``3DBall``, ``3DBall.x86_64``, ``builds/3DBall.app``) or
        the name of a built-in scene (``3DBall``, ``Basic``, ``GridWorld``, ...). A Unity build
        next to the working directory wins over a built-in scene of the same name. None: the Unity
        Editor (``unityagents.editor``): nothing is launched; the environment listens on the Editor's
        port, says so, and waits ``start_timeout`` seconds for the user to press Play (gRPC only).
    :param worker_id: added to ``base_port``, so that several environments can run at once (0 for the Editor).
    :param base_port: first port to listen on (127.0.0.1 only); None: 5005, or 5004 for the Editor.
    :param curriculum: path of a curriculum JSON file (see ``Curriculum``), or None.
    :param seed: passed as ``--seed`` to built-in scenes (API-2 Unity builds take no seed); the
        modern protocol also sends it in its initialisation message.
    :param timeout_wait: seconds to wait for any single answer of the environment.
    :param start_timeout: seconds to wait for the environment to start and connect.
    :param log_dir: where the environment's log goes (``log_folder`` is mlagents_envs' name for it).
        By default a private folder made for this
        environment alone (``tempfile.mkdtemp``, mode 0700), never a shared predictable one where
        another user could plant a symlink; it is kept after ``close`` so that the log can be
        read. With gRPC a Unity build writes ``<log_dir>/Player-<worker_id>.log`` (its ``-logFile``).
    :param env_args: extra command-line arguments for the launched build or scene (e.g.
        ``["--frame-time-ms", "5"]`` for a built-in scene that emulates a heavy engine);
        ``additional_args`` is mlagents_envs' name for it.
    :param protocol: ``"api2"`` (Unity builds of 2018, ML-Agents 0.3) or ``"grpc"`` (every
        ML-Agents build since Release 19, communication API 1.5.0); None chooses
        (``launcher.choose_protocol``): the modern protocol when side channels or ``num_areas``
        ask for it, else what a Unity build's data folder shows it speaks, else (a built-in
        scene, which speaks both) API-2.
    :param engine_config: gRPC only: the engine settings sent through the engine-configuration
        side channel (time scale 20 by default); see ``unityagents.wire.side_channels.EngineConfig``.
    :param no_graphics: gRPC only: launch the build with ``-nographics -batchmode``.
    :param side_channels: gRPC only: ``unityagents.side_channels.SideChannel`` instances (the user's own,
        whose ids must differ from each other and from the built-in channels', or an
        ``EngineConfigurationChannel``/``EnvironmentParametersChannel``).
    :param no_graphics_monitor: as ``no_graphics``, for every worker but worker 0 (mlagents_envs').
    :param num_areas: gRPC only: how many copies of its training area the scene should make.

    mlagents_envs' class constants are here under its names: ``API_VERSION`` (the modern
    protocol's communication version), ``DEFAULT_EDITOR_PORT``, ``BASE_ENVIRONMENT_PORT``.
    """

    API_VERSION = "1.5.0"
    DEFAULT_EDITOR_PORT = EDITOR_PORT
    BASE_ENVIRONMENT_PORT = BASE_ENVIRONMENT_PORT

    def __init__(
        self,
        file_name: Optional[str] = None,
        worker_id: int = 0,
        base_port: Optional[int] = None,
        curriculum: Optional[str] = None,
        seed: Optional[int] = None,
        timeout_wait: float = 30.0,
        start_timeout: float = 60.0,
        log_dir: Optional[str] = None,
        env_args: Sequence[str] = (),
        protocol: Optional[str] = None,
        engine_config: Optional[Any] = None,
        no_graphics: bool = False,
        side_channels: Optional[Sequence[Any]] = None,
        *,
        no_graphics_monitor: bool = False,
        additional_args: Optional[Sequence[str]] = None,
        log_folder: Optional[str] = None,
        num_areas: int = 1,
    ):
        if curriculum is not None and not isinstance(curriculum, (str, os.PathLike)):
            raise TypeError(
                f"curriculum (the 4th positional argument, as in the original UnityEnvironment API) must be a "
                f"path to a curriculum JSON file or None; got {type(curriculum).__name__} {curriculum!r}. Pass "
                "mlagents_envs' seed by keyword: UnityEnvironment(file_name, seed=...).")
        env_args = _one_of("env_args", env_args or (), "additional_args", additional_args)
        log_dir = _one_of("log_dir", log_dir, "log_folder", log_folder)
        side_channels = list(side_channels or ())
        if not isinstance(num_areas, int) or isinstance(num_areas, bool) or num_areas < 1:
            raise UnityEnvironmentException(f"num_areas must be a positive integer; got {num_areas!r}.")
        editor = file_name is None
        if editor:
            if protocol not in (None, "grpc"):
                raise UnityEnvironmentException(
                    f"The Unity Editor (file_name=None) speaks the modern protocol; protocol={protocol!r} needs a "
                    "build or a built-in scene. Leave protocol unset (or 'grpc') to train in the Editor.")
            if int(worker_id) != 0:
                raise UnityEnvironmentException(
                    f"The Unity Editor (file_name=None) is one environment: worker_id must be 0, got {worker_id!r}.")
            protocol = "grpc"
        protocol = choose_protocol(file_name, protocol, side_channels, num_areas)
        if num_areas != 1 and protocol != "grpc":
            raise UnityEnvironmentException(
                f"num_areas={num_areas} travels in the modern protocol's handshake; API-2 has no such field. "
                "Use protocol='grpc' (a modern build), or leave num_areas at 1.")
        communicator = communicator_class(protocol)
        atexit.register(self.close)
        self.protocol = protocol
        self._side_channels = tuple(side_channels)  # the script's channels (the PettingZoo wrappers list them)
        self._env_args = [str(a) for a in env_args]
        self._loaded = False
        self._closed = False
        self._communicator: Optional[Communicator] = None
        #: Whether the Academy's episode ended with the last answer (API-2); None before the first reset.
        self.global_done: Optional[bool] = None
        #: What the communicator knows of this environment (its process, its log, the answer timeout).
        self._peer = Peer(timeout_wait)
        self._n_deciding: Dict[str, int] = {}
        #: Each behaviour's steps at the last answer (``get_steps``), and the actions set for the next step.
        self._last_steps: Dict[str, BehaviorSteps] = {}
        self._set_actions: Dict[str, ActionTuple] = {}
        #: The low-level API's channels-first face of each brain's spec, and of its last steps (built when read).
        self._public_specs: Dict[str, BehaviorSpec] = {}
        self._public_steps: Dict[str, BehaviorSteps] = {}
        self._awaiting = False  # a reset or step was sent; receive() reads its answer
        default_port = EDITOR_PORT if editor else BASE_ENVIRONMENT_PORT
        self.port = (default_port if base_port is None else int(base_port)) + int(worker_id)
        self.worker_id = int(worker_id)
        extra = {"num_areas": num_areas} if num_areas != 1 else {}
        try:
            self._communicator = communicator(self._peer, self.port, self.worker_id, seed=seed,
                                              engine_config=engine_config, side_channels=side_channels, **extra)
        except UnityWorkerInUseException as e:
            raise (editor_port_taken(self.port, e) if editor else e) from None
        graphics_off = bool(no_graphics) or (bool(no_graphics_monitor) and int(worker_id) != 0)
        try:
            if editor:  # nothing to launch: the user presses Play
                logger.info("%s", listening_message(self.port))
                try:
                    self._communicator.connect(float(start_timeout), "the Unity Editor")
                except UnityTimeOutException:
                    raise editor_not_found(self.port, float(start_timeout)) from None
            else:
                self._peer.process, self._peer.log_path = launch(
                    file_name, protocol, self.port, self.worker_id, seed, log_dir, graphics_off, self._env_args)
                self._communicator.connect(float(start_timeout), file_name)
            hello = self._communicator.handshake()
            self.academy_name: str = hello.academy_name  # the Academy's name (API-2), the build's (gRPC)
            self._brains = hello.brains
            self._brain_names = list(hello.brains)
            self._external_brain_names = list(hello.external_brain_names)
            self._reset_parameters = dict(hello.reset_parameters)
            if hello.log_path and not is_own_log(self._peer.log_path):
                self._peer.log_path = hello.log_path  # only shown in messages, never read (exception.py)
            self._decisions = DecisionChecker(self._brains, self._external_brain_names, communicator.carries_memories)
            if hello.first_infos is not None:
                self._took(hello.first_infos)
            if num_areas != 1:  # a build without a TrainingAreaReplicator ignores it: say what arrived
                logger.info("Asked for %d training areas (num_areas); the environment has %s.", num_areas,
                            ", ".join(f"{len(d) + _only_ended((d, t))} agents of {b}"
                                      for b, (d, t) in (hello.first_infos or {}).items()) or "no agents yet")
            if not self._external_brain_names:
                logger.warning("No External Brains found in the Unity Environment. "
                               "You will not be able to pass actions to your agent(s).")
            self._curriculum = Curriculum(curriculum, self._reset_parameters if communicator.declares_reset_parameters
                                          else AnyResetParameter())
        except BaseException:
            self.close()
            raise
        self._loaded = True
        logger.info("'%s' started successfully!\n%s", self.academy_name, self)

    # ------------------------------------------------------------------------ start-up

    def _failed(self) -> None:
        """After an error of the communicator: the exchange cannot resume, so release everything.

        The process gets a short grace to quit on EXIT (and flush its log); a stuck one is killed.
        """
        self._close(grace=1.0)

    # ------------------------------------------------------------------------ properties
    @property
    def logfile_path(self) -> Optional[str]:
        return self._peer.log_path

    @property
    def behavior_specs(self) -> BehaviorMapping:
        """Each brain's sensors (in ``DecisionSteps.obs`` order, cameras ``(C, H, W)``) and actions, read-only."""
        return BehaviorMapping({name: self._public_spec(name) for name in self._brains})

    @property
    def academy_capabilities(self) -> Optional[Any]:
        """What a modern environment says it can do (its ``UnityRLCapabilitiesProto``); None for API-2."""
        return getattr(self._communicator, "academy_capabilities", None)

    def _cameras(self, behavior_name: str) -> List[bool]:
        return [s.is_camera for s in self._brains[behavior_name].sensors]

    def _public_spec(self, behavior_name: str) -> BehaviorSpec:
        spec = self._public_specs.get(behavior_name)
        if spec is None:
            spec = self._public_specs[behavior_name] = _channels_first_spec(
                self._brains[behavior_name].behavior_spec, self._cameras(behavior_name))
        return spec

    @property
    def reports_last_observation(self) -> bool:
        """Whether ``TerminalSteps.obs`` is an ended episode's last observation (not with API-2)."""
        return self._communicator.reports_last_observation

    @property
    def resets_by_itself(self) -> bool:
        """Whether the environment ends its Academy episodes itself (API-2's global done)."""
        return self._communicator.resets_by_itself

    @property
    def stats(self) -> Dict[str, List[Stat]]:
        """The custom stats the scene sent with the last ``reset``/``step`` answer.

        ``{key: [(value, aggregation), ...]}`` with aggregation one of ``"average"``,
        ``"most_recent"``, ``"sum"``, ``"histogram"`` (the modern protocol's stats side channel,
        Unity's ``StatsRecorder``); replaced at every ``receive()``. Stats belong to the whole
        environment, so they apply to each of its brains, as in ML-Agents. Always empty for API-2.
        """
        return self._communicator.stats if self._communicator is not None else {}

    def __str__(self) -> str:
        params = dict(self._reset_parameters)
        params.update(self._curriculum.get_config())
        lines = "\n\t\t".join(f"{k} -> {v}" for k, v in params.items())
        return (
            f"Unity Academy name: {self.academy_name}\n"
            f"        Number of Brains: {self.number_brains}\n"
            f"        Number of External Brains : {self.number_external_brains}\n"
            f"        Lesson number : {self._curriculum.get_lesson_number}\n"
            f"        Reset Parameters :\n\t\t{lines}\n"
            + "\n".join(str(self._brains[b]) for b in self._brain_names)
        )

    # ------------------------------------------------------------------------ reset / step
    def _require_loaded(self) -> None:
        if not self._loaded or self._closed:
            raise UnityEnvironmentException("No Unity environment is loaded.")

    def _require_idle(self) -> None:
        self._require_loaded()
        if self._awaiting:
            raise UnityEnvironmentException(
                "A reset or step was sent and its answer not yet received; call receive() first.")

    def reset_send(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None,
                   lesson: Optional[int] = None) -> None:
        """The first half of ``reset``: send it; the environment resets while the caller goes on.

        ``receive()`` returns the first steps. Splitting the exchange lets a set of
        environments reset (or step) all at once before collecting any of them. With gRPC the
        reset parameters travel in the environment-parameters side channel.
        """
        self._require_idle()
        if config is None:
            config = self._curriculum.get_config(lesson)
        elif config:
            logger.info("Academy reset with parameters: %s", ", ".join(f"{k} -> {v}" for k, v in config.items()))
        for k, v in config.items():
            if self._communicator.declares_reset_parameters and k not in self._reset_parameters:
                raise UnityEnvironmentException(
                    f"The reset parameter {k!r} is not a parameter of this environment. "
                    f"Its parameters are: {sorted(self._reset_parameters) or 'none'}.")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise UnityEnvironmentException(
                    f"The value for reset parameter {k!r} must be an integer or a float, got {v!r}.")
        try:
            self._communicator.send_reset(bool(train_mode), {k: float(v) for k, v in config.items()})
        except UnityException:
            self._failed()
            raise
        self._awaiting = True

    def reset(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None,
              lesson: Optional[int] = None) -> Mapping[str, BrainInfo]:
        """Reset the Academy and return the first ``BrainInfo`` of every brain (the original API's door).

        :param train_mode: the engine's training configuration (fast) or inference (slow).
        :param config: reset parameters to set; by default the curriculum's current lesson.
        :param lesson: take the reset parameters of this lesson instead of the current one.

        A low-level-API script ignores the result and reads ``get_steps(name)`` instead.
        """
        return self._as_infos(self.reset_behaviors(train_mode, config, lesson))

    def step(self, action: Any = None, memory: Any = None, value: Any = None) -> Mapping[str, BrainInfo]:
        """Send one decision per deciding agent and return the next ``BrainInfo`` of every brain.

        Two doors meet here:

        * the original API's: ``action`` (and, for API-2's recurrent brains, ``memory`` and ``value``) is a
          dict keyed by External brain name, or with exactly one External brain the bare value: a
          numpy array or list of ``action width`` floats per row of the brain's last ``BrainInfo``
          (continuous values, then one index per discrete branch; a discrete API-2 brain takes one
          index per agent), or an ``ActionTuple`` for its deciding agents. An External brain with
          deciding agents needs its action;
        * the low-level API's: ``step()`` with no arguments sends the actions given to
          ``set_actions``/``set_action_for_agent`` since the last step, and zeros (every branch's
          first action) for the behaviours that were given none.
        """
        if action is None and memory is None and value is None:
            actions: Dict[str, ActionTuple] = {}
            for b in self._external_brain_names:
                given = self._set_actions.get(b)
                actions[b] = given if given is not None else \
                    self._brains[b].behavior_spec.action_spec.empty_action(self._n_deciding.get(b, 0))
            return self._as_infos(self.step_behaviors(actions))
        if self._set_actions:
            raise UnityActionException(
                f"set_actions() was called for {sorted(self._set_actions)} and step() was given actions too; use "
                "one door per step: step() after set_actions(), or step(action) alone.")
        return self._as_infos(self.step_behaviors(*self._seed_decisions(action, memory, value)))

    def reset_behaviors(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None,
                        lesson: Optional[int] = None) -> Dict[str, BehaviorSteps]:
        """``reset`` in the step types: the first (``DecisionSteps``, ``TerminalSteps``) of every brain.

        What the environment set, the bridges and the trainers' tools drive; the arguments are ``reset``'s.
        """
        self.reset_send(train_mode, config, lesson)
        return self.receive()

    def step_behaviors(self, action: Actions = None, memory: ActionInput = None,
                       value: ActionInput = None) -> Dict[str, BehaviorSteps]:
        """``step`` in the step types: the next (``DecisionSteps``, ``TerminalSteps``) of every brain.

        Each argument is a dict keyed by External brain name, or (with exactly one External
        brain) the bare value. ``action`` is an ``ActionTuple`` per brain, one row per agent of
        its last ``DecisionSteps``. Memories and values (API-2 only, which carries them; one row
        per deciding agent) default to zeros; other protocols do not send them.
        """
        self.step_send(action, memory, value)
        return self.receive()

    # ------------------------------------------------------------------------ the original API's door
    def _as_infos(self, steps: Dict[str, BehaviorSteps]) -> BrainInfos:
        return BrainInfos(self._brains, steps, self._communicator.reports_last_observation)

    def _seed_decisions(self, action: Any, memory: Any, value: Any) -> Tuple[Dict[str, Any], ...]:
        """The original API's inputs as ``step_behaviors`` takes them: each brain's action rows (one
        per row of its last ``BrainInfo``, or per deciding agent) as an ``ActionTuple`` of its deciding
        agents; memories and values as given."""
        self._require_idle()
        if self.global_done is None:
            raise UnityActionException(
                "You cannot conduct step without first calling reset. Reset the environment with 'reset()'")
        by_brain = self._decisions.by_brain
        action, memory, value = by_brain(action, "action"), by_brain(memory, "memory"), by_brain(value, "value")
        actions: Dict[str, ActionTuple] = {}
        for b, given in action.items():
            if isinstance(given, ActionTuple):  # already in the step types: checked as step_behaviors checks it
                actions[b] = given
                continue
            params = self._brains[b]
            deciding = self._n_deciding.get(b, 0)
            rows = deciding + _only_ended(self._last_steps.get(b))
            width = params.action_width
            flat = checked_floats(given, None, "action", b, "")
            if flat.size not in (rows * width, deciding * width):
                raise UnityActionException(
                    f"There was a mismatch between the provided action and environment's expectation: brain {b!r} "
                    f"expects {deciding * width} floats ({deciding} deciding agents x action width {width}) but got "
                    f"{flat.size}. Give one row of {width} per agent of its last BrainInfo.")
            # a BrainInfo's rows are the deciding agents, then those that only ended their episode
            actions[b] = params.behavior_spec.action_spec.tuple_of(flat.reshape(-1, width)[:deciding])
        return actions, memory, value  # API-2 only, whose rows are its deciding agents; checked by step_send

    # ------------------------------------------------------------------------ the low-level API's door
    def get_steps(self, behavior_name: str) -> BehaviorSteps:
        """``(DecisionSteps, TerminalSteps)`` of ``behavior_name`` at the last ``reset`` or ``step``.

        A behaviour that reported nothing in that answer gets empty steps. Cameras are
        ``[n, C, H, W]``, as ``behavior_specs`` describes them.
        """
        steps = self._public_steps.get(behavior_name)
        if steps is None:
            internal = self._steps_of(behavior_name)
            steps = self._public_steps[behavior_name] = _channels_first_steps(internal, self._cameras(behavior_name))
        return steps

    def _steps_of(self, behavior_name: str) -> BehaviorSteps:
        """``behavior_name``'s last steps as the environment keeps them (cameras channels last)."""
        self._check_behavior(behavior_name)
        if self.global_done is None:
            raise UnityEnvironmentException(
                f"get_steps({behavior_name!r}) was called before the first reset(); call reset() first.")
        steps = self._last_steps.get(behavior_name)
        if steps is None:
            spec = self._brains[behavior_name].behavior_spec
            return DecisionSteps.empty(spec), TerminalSteps.empty(spec)
        return steps

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        """The actions of every agent of ``behavior_name``'s last ``DecisionSteps``, for the next ``step()``.

        ``action`` is an ``ActionTuple`` with one row per deciding agent, in ``DecisionSteps`` order:
        ``continuous`` ``[n, continuous_size]``, ``discrete`` ``[n, len(discrete_branches)]``.
        """
        self._check_external(behavior_name)
        n = len(self._steps_of(behavior_name)[0])
        self._set_actions[behavior_name] = self._brains[behavior_name].behavior_spec.action_spec.validate(
            action, n, behavior_name)

    def set_action_for_agent(self, behavior_name: str, agent_id: Any, action: ActionTuple) -> None:
        """The action of one agent of ``behavior_name``'s last ``DecisionSteps`` (an ``ActionTuple`` of one
        row), for the next ``step()``; the behaviour's other agents keep theirs (zeros if none was set)."""
        self._check_external(behavior_name)
        decisions = self._steps_of(behavior_name)[0]
        spec = self._brains[behavior_name].behavior_spec.action_spec
        row = decisions.agent_id_to_index.get(agent_id)
        if row is None:
            raise UnityActionException(
                f"agent_id {agent_id!r} did not request a decision at the last step of behaviour {behavior_name!r}: "
                f"its deciding agents are {list(decisions.agent_id_to_index)[:20]}. Set actions only for the "
                "agents of the last get_steps(...)[0].")
        spec.validate(action, 1, behavior_name)
        current = self._set_actions.get(behavior_name)
        if current is None:
            current = spec.empty_action(len(decisions))
        else:
            current = ActionTuple(current.continuous.copy(), current.discrete.copy())
        current.continuous[row] = action.continuous[0]
        current.discrete[row] = action.discrete[0]
        self._set_actions[behavior_name] = current

    def _check_behavior(self, behavior_name: str) -> None:
        if behavior_name not in self._brains:
            raise UnityActionException(
                f"The behaviour {behavior_name!r} does not correspond to an existing behaviour of this environment; "
                f"its behaviours are {sorted(self._brains)} (read them from behavior_specs).")

    def _check_external(self, behavior_name: str) -> None:
        self._check_behavior(behavior_name)
        if behavior_name not in self._external_brain_names:
            raise UnityActionException(
                f"The behaviour {behavior_name!r} is a broadcasting brain, whose actions its scene decides; only "
                f"External brains take actions: {self._external_brain_names}.")

    def step_send(self, action: Actions = None, memory: ActionInput = None,
                  value: ActionInput = None) -> None:
        """The first half of ``step``: check and send the decisions; ``receive()`` gets the result.

        Between the two the environment simulates, so a caller driving several environments
        sends to all of them before receiving from any.
        """
        self._require_idle()
        if self.global_done is None:
            raise UnityActionException(
                "You cannot conduct step without first calling reset. Reset the environment with 'reset()'")
        if self.global_done:
            raise UnityActionException("The episode is completed. Reset the environment with 'reset()'")
        by_brain = self._decisions.by_brain
        action, memory, value = by_brain(action, "action"), by_brain(memory, "memory"), by_brain(value, "value")
        actions, memories, values = self._decisions.check(action, memory, value, self._n_deciding)
        try:
            self._communicator.send_step(actions, memories, values)
        except UnityActionException:
            raise  # the caller's input: the exchange has not started
        except UnityException:
            self._failed()
            raise
        self._awaiting = True

    def receive(self) -> Dict[str, BehaviorSteps]:
        """The second half of ``reset_send`` / ``step_send``: the next steps of every brain."""
        self._require_loaded()
        if not self._awaiting:
            raise UnityEnvironmentException(
                "receive() was called with no reset or step in flight; call reset_send() or step_send() first.")
        self._awaiting = False
        try:
            infos, self.global_done = self._communicator.receive()
        except UnityException:
            self._failed()  # a malformed or missing answer leaves the stream out of step: reap it
            raise
        self._took(infos)
        return infos

    def _took(self, infos: Dict[str, BehaviorSteps]) -> None:
        """Remember each brain's deciding agents (what the next step's actions must cover), and take
        in behaviours that connected since the last answer."""
        for b in self._brains:
            if b not in self._brain_names:
                logger.info("Connected new brain: %s", b)
                self._brain_names.append(b)
                self._external_brain_names.append(b)
        for b, (decisions, _) in infos.items():
            self._n_deciding[b] = len(decisions)
        self._last_steps = infos
        self._public_steps = {}
        self._set_actions = {}

    # ------------------------------------------------------------------------ close
    def close(self) -> None:
        """Tell the environment to quit, release the port and reap the process. Safe to call twice."""
        self._close(grace=5.0)

    def _close(self, grace: float) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        connected = False
        if self._communicator is not None:
            connected = self._communicator.connected
            try:
                self._communicator.close()
            except Exception as e:  # closing must never mask the error that led here
                logger.warning("Closing the communicator failed: %s", e)
        if self._peer.process is not None and self._peer.process.poll() is None:
            try:  # a connected environment quits when told; one that never connected is killed
                self._peer.process.wait(timeout=grace if connected else 0.0)
            except subprocess.TimeoutExpired:
                self._peer.process.kill()
                self._peer.process.wait()
        self._loaded = False

    def __enter__(self) -> "UnityEnvironment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
