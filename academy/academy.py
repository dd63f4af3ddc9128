"""The Unity runtime of the API-2 era, in Python: scene contract, brains, agents and the Academy loop.

Unity keeps one ``Agent`` object per agent and one ``Brain`` per decision maker. Here a brain's agents
are rows of numpy arrays (``BrainRuntime``) so that a step over all agents costs a handful of array
operations, and the physics lives in a ``Scene`` subclass that works on whole arrays too.

The loop follows Unity's ``Academy.cs`` of ML-Agents 0.3 (API-2):

* a decision is taken every ``frame_to_skip + 1`` frames; skipped frames repeat the stored action;
* ``max_steps > 0`` makes the Academy globally done after that many frames, which sets every
  agent done;
* an agent is locally done when its scene says so or when its step counter exceeds the brain's
  ``max_step`` (so after ``max_step + 1`` steps, as in ``Agent.Step()``);
* for each brain in child order: done agents are reset **before** the state is sent, so a done
  agent's message carries its terminal reward and its first post-reset state; then done flags and
  rewards are cleared (``ResetDoneAndReward``). Every agent behaves as Unity's ``resetOnDone = true``
  (the default, and what every example scene used); agents that wait, done, for the next Academy
  reset are not modelled.

Deliberate deviation: with ``frame_to_skip = k > 0`` Unity sends the reset state only on the
(k+1)-th frame after a reset, stepping the agents with stale actions in between. Here the reset state
is sent at once, because those stale steps are an artefact of its recursive ``RunMdp``.
"""
from __future__ import annotations

import abc
import dataclasses
import logging
import math
import time
from typing import Callable, Protocol

import numpy as np

log = logging.getLogger("academy")

#: Values of Unity's ``StateType`` enum as serialised in ``actionSpaceType`` / ``stateSpaceType``.
SPACE_TYPES = {"discrete": 0, "continuous": 1}

#: Unity holds actions, memories and reset parameters in 32-bit floats: a larger magnitude is an infinity there.
FLOAT32_MAX = float(np.finfo(np.float32).max)

#: Brain types a brain can be switched to (Unity's Player brain is replaced by the scripted Heuristic).
BRAIN_TYPES = ("external", "heuristic", "internal")


@dataclasses.dataclass(frozen=True)
class Camera:
    """One visual observation per agent, as a ``cameraResolutions`` entry."""

    width: int
    height: int
    black_and_white: bool = False


@dataclasses.dataclass(frozen=True)
class VectorSensor:
    """A vector sensor a modern Unity agent would have (``--mlagents-port`` only; API-2 sends one state).

    Its ``size`` floats are the state's ``[start, start + size)`` (``from_state``), or, for a sensor
    that API-2 has no room for, ``Scene.sensor(brain, name)``. ``goal`` marks a goal signal
    (ML-Agents' ``ObservationType.GoalSignal``).
    """

    name: str
    size: int
    start: int = 0
    from_state: bool = True
    goal: bool = False


@dataclasses.dataclass(frozen=True)
class CameraSensor:
    """Camera ``camera`` of the brain's ``cameras``, under a sensor name (``--mlagents-port`` only)."""

    name: str
    camera: int = 0


def default_sensors(spec: "BrainSpec") -> tuple:
    """One ``CameraSensor_<k>`` per camera and one ``VectorSensor_size<n>`` over the whole state."""
    sensors: list = [CameraSensor(f"CameraSensor_{k}", k) for k in range(len(spec.cameras))]
    if spec.state_size:
        sensors.append(VectorSensor(f"VectorSensor_size{spec.state_size}", spec.state_size))
    return tuple(sensors)


@dataclasses.dataclass(frozen=True)
class BrainSpec:
    """What a scene declares about one brain: its spaces, its agents and its default type.

    ``max_step`` uses Unity's meaning: an agent is done when its step counter exceeds it, i.e. after
    ``max_step + 1`` decisions (0 = never).
    """

    name: str
    n_agents: int
    state_size: int
    action_size: int
    state_space: str = "continuous"
    action_space: str = "continuous"
    memory_size: int = 0
    cameras: tuple[Camera, ...] = ()
    action_descriptions: tuple[str, ...] = ()
    max_step: int = 0
    brain_type: str = "external"
    #: Modern protocol only (``--mlagents-port``): agents ask for a decision every this many
    #: Academy steps and repeat their action in between (Unity's ``DecisionRequester``).
    decision_period: int = 1
    #: Modern protocol only: discrete branches next to the ``action_size`` continuous actions of a
    #: continuous brain (a hybrid action spec). An action row is the continuous values, then one
    #: index per branch.
    discrete_branches: tuple[int, ...] = ()
    #: Modern protocol only: the agent's sensors (``VectorSensor``/``CameraSensor``), in any order;
    #: empty means one camera sensor per camera and one vector sensor over the whole state.
    sensors: tuple = ()

    def modern_sensors(self) -> tuple:
        """The sensors as a modern Unity agent reports them: sorted by name (``SensorUtils.SortSensors``)."""
        return tuple(sorted(self.sensors or default_sensors(self), key=lambda s: s.name))

    def _check_sensors(self) -> None:
        """State-backed vector sensors tile the state exactly; each camera is one sensor; names unique."""
        if not self.sensors:
            return
        names = [s.name for s in self.sensors]
        parts = sorted((s.start, s.start + s.size) for s in self.sensors
                       if isinstance(s, VectorSensor) and s.from_state)
        cameras = sorted(s.camera for s in self.sensors if isinstance(s, CameraSensor))
        edges = [0] + [e for part in parts for e in part] + [self.state_size]
        tiled = all(edges[i] == edges[i + 1] for i in range(0, len(edges), 2))
        if (len(set(names)) != len(names) or not tiled or cameras != list(range(len(self.cameras)))
                or (parts and self.state_space != "continuous")):
            raise ValueError(f"brain {self.name}: sensors {names} must be uniquely named, cover the continuous "
                             f"state of {self.state_size} floats with state-backed vector sensors exactly once "
                             f"(found {parts}), and name each of the {len(self.cameras)} cameras once "
                             f"(found {cameras})")

    def __post_init__(self) -> None:
        self._check_sensors()
        for field in ("state_space", "action_space"):
            if getattr(self, field) not in SPACE_TYPES:
                raise ValueError(f"brain {self.name}: {field} must be one of {sorted(SPACE_TYPES)}, "
                                 f"got {getattr(self, field)!r}")
        if self.discrete_branches and self.action_space != "continuous":
            raise ValueError(f"brain {self.name}: discrete_branches make a hybrid action spec, which needs "
                             f"action_space 'continuous' (its continuous part), got {self.action_space!r}")
        if self.brain_type not in ("external", "heuristic"):
            raise ValueError(f"brain {self.name}: a scene's default brain_type is 'external' or "
                             f"'heuristic', got {self.brain_type!r}")

    @property
    def state_width(self) -> int:
        """Floats per agent in the state message: ``state_size``, or 1 (the index) when discrete."""
        return self.state_size if self.state_space == "continuous" else 1

    @property
    def action_width(self) -> int:
        """Floats per agent in an action: ``action_size``, or 1 (the index) when discrete, plus one per
        discrete branch of a hybrid spec."""
        return self.action_size + len(self.discrete_branches) if self.action_space == "continuous" else 1

    def parameters_json(self) -> dict:
        """The ``brainParameters`` entry of AcademyParameters (C# ``BrainParameters`` field order)."""
        entry = {
            "stateSize": self.state_size,
            "actionSize": self.action_size,
            "memorySize": self.memory_size,
            "cameraResolutions": [{"width": c.width, "height": c.height, "blackAndWhite": c.black_and_white}
                                  for c in self.cameras],
            "actionDescriptions": list(self.action_descriptions),
            "actionSpaceType": SPACE_TYPES[self.action_space],
            "stateSpaceType": SPACE_TYPES[self.state_space],
        }
        if self.discrete_branches:  # not API-2 (``Academy.academy_parameters`` refuses it): unityagents' key
            entry["actionBranches"] = list(self.discrete_branches)
        return entry


class Scene(abc.ABC):
    """Base class of a built-in scene: vectorised physics for every agent of every brain.

    Subclasses set the class attributes and implement the abstract methods below (and ``render``
    when a brain has cameras). All arrays are indexed
    by the agent's row within its brain. ``self.params`` holds the current reset parameters (floats);
    the Academy updates it before ``academy_reset``. Use ``self.rng`` for every random draw so that a
    scene is deterministic for a given seed.
    """

    academy_name: str = "Academy"
    brains: tuple[BrainSpec, ...] = ()
    default_reset_parameters: dict[str, float] = {}
    #: Optional ``name -> (low, high)``: reset parameters outside are refused before the scene sees
    #: them (e.g. a grid size that would not fit in memory). Any finite value passes otherwise.
    reset_parameter_ranges: dict[str, tuple[float, float]] = {}
    max_steps: int = 0
    frame_to_skip: int = 0
    #: Modern protocol only: the behaviour name (``Name?team=N``) each brain goes out under; a
    #: brain not listed is ``<brain>?team=0``. Two-team scenes list one name with two team ids,
    #: as a Unity build with two teams of one behaviour reports them.
    behaviour_names: dict[str, str] = {}
    #: Set by the modern protocol's server before the first reset: scenes whose modern Unity
    #: example differs from the API-2 one (Tennis' rewards) read it.
    modern_protocol: bool = False

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.params: dict[str, float] = dict(self.default_reset_parameters)

    def academy_reset(self) -> None:  # noqa: B027 (an optional hook: scenes override it or not)
        """``AcademyReset()``: called on every Academy reset, before the agents are reset."""

    @abc.abstractmethod
    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        """``AgentReset()`` for the agents of ``brain`` at rows ``index`` (an int array)."""

    @abc.abstractmethod
    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Advance one frame with ``actions[brain]`` of shape ``[n_agents, action_width]``.

        Returns, per brain, this frame's reward (float ``[n]``, added to the agent's reward) and the
        scene's done flags (bool ``[n]``). Rows of agents that are already done are ignored.
        """

    @abc.abstractmethod
    def states(self, brain: str) -> np.ndarray:
        """The state vectors, float ``[n_agents, state_width]`` (the index as a float if discrete)."""

    def group_ids(self, brain: str) -> np.ndarray | None:
        """Each agent's multi-agent group (int ``[n_agents]``, 0 = none), or None: no groups.

        Sent only over the modern protocol (``AgentInfoProto.group_id``). A scene with groups may
        return ``(reward, done, group_reward)`` from ``step``: the group reward goes out as
        ``group_reward`` there, and is added to the agents' own reward over API-2, which has no groups.
        """
        return None

    def asleep(self, brain: str) -> np.ndarray | None:
        """Agents out of play until their group's next episode (bool ``[n_agents]``), or None.

        Over the modern protocol they ask for no decision (as a deactivated Unity agent), so a
        member that left its group early stays out while its mates play on. The scene must not
        report them done again, and ignores their actions.
        """
        return None

    def take_stats(self) -> list[tuple[str, float]]:
        """Custom stats recorded since the last call (e.g. a group's episode reward), drained here.
        Sent on the modern protocol's stats channel; ignored by API-2."""
        return []

    def action_mask(self, brain: str) -> np.ndarray | None:
        """Discrete actions each agent may not take now: bool ``[n_agents, action_size]``, True =
        disabled, or None (all allowed). Sent only over the modern protocol; API-2 has no masks."""
        return None

    def sensor(self, brain: str, name: str) -> np.ndarray:
        """The values ``[n_agents, size]`` of a ``VectorSensor(from_state=False)`` of ``brain``."""
        raise TypeError(f"scene {type(self).__name__} declares the sensor {name!r} of brain {brain} outside its "
                        "state, so it must implement sensor()")

    def render(self, brain: str, camera: int) -> np.ndarray:
        """Camera ``camera`` of every agent, uint8 RGB ``[n_agents, height, width, 3]``, top row first."""
        raise TypeError(f"scene {type(self).__name__} declares no camera, so it cannot render one; "
                        "a scene with cameras must implement render()")

    @abc.abstractmethod
    def heuristic(self, brain: str) -> np.ndarray:
        """The scripted decision for every agent, ``[n_agents, action_width]``; may read hidden state."""


def modern_observations(scene: Scene, spec: BrainSpec, rows: np.ndarray | None = None,
                        sensors: tuple | None = None) -> list[np.ndarray]:
    """What a modern Unity agent's sensors read, in ``spec.modern_sensors()`` order (or that of
    ``sensors``), for ``rows`` (all if None).

    A camera gives uint8 RGB ``[n, H, W, 3]``; a vector sensor float32 ``[n, size]`` (a discrete
    state, which the modern protocol does not have, is its one-hot vector).
    """
    states = None
    out = []
    for sensor in spec.modern_sensors() if sensors is None else sensors:
        if isinstance(sensor, CameraSensor):
            values = np.asarray(scene.render(spec.name, sensor.camera))
        elif not sensor.from_state:
            values = np.asarray(scene.sensor(spec.name, sensor.name), np.float32).reshape(-1, sensor.size)
        else:
            if states is None:
                states = np.asarray(scene.states(spec.name), np.float32)
                if spec.state_space == "discrete":
                    index = states[:, 0].astype(np.int64)
                    states = np.zeros((len(index), spec.state_size), np.float32)
                    states[np.arange(len(index)), index] = 1.0
            values = states[:, sensor.start:sensor.start + sensor.size]
        out.append(values if rows is None else values[rows])
    return out


class Policy(Protocol):
    """A non-scene decision maker (the Internal brain): states, observations, memories → actions."""

    def decide(self, states: np.ndarray, observations: list[np.ndarray],
               memories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ...


class Communicator(Protocol):
    """The Unity end of the wire as the Academy uses it (``communicator.ExternalCommunicator``)."""

    def send_academy_parameters(self, parameters: dict) -> None: ...

    def get_command(self) -> str: ...

    def get_reset_config(self) -> tuple[bool, dict]: ...

    def get_actions(self) -> dict: ...

    def send_brain_info(self, message: dict, frames: list[np.ndarray]) -> None: ...

    def send_done(self, done: bool) -> None: ...


@dataclasses.dataclass
class BrainConfig:
    """How a brain is run: ``kind`` in BRAIN_TYPES, its Internal ``policy``, and ``broadcast``."""

    kind: str
    policy: Policy | None = None
    broadcast: bool = True


class BrainRuntime:
    """The per-agent fields Unity keeps on each ``Agent``, as arrays over one brain's agents."""

    def __init__(self, spec: BrainSpec, index: int, config: BrainConfig) -> None:
        n = spec.n_agents
        self.spec = spec
        self.name = spec.name
        self.config = config
        # Unity sends GetInstanceID()s: stable, arbitrary and usually negative. Mimic that so a client
        # that assumes ids 0..n-1 fails here, not on a real build.
        self.ids = [-(10_000 * (index + 1) + 2 * k) for k in range(n)]
        self.reward = np.zeros(n)
        #: The group reward since the last message (scenes with groups; see ``Scene.group_ids``).
        self.group_reward = np.zeros(n)
        self.done = np.zeros(n, dtype=bool)
        self.steps = np.zeros(n, dtype=np.int64)
        self.action = np.zeros((n, spec.action_width))
        # Unity's inference keeps as many memory floats per agent as the model file says (an ONNX
        # policy's own memory_size); a .bytes policy and Python use the brain's memorySize.
        own = getattr(config.policy, "memory_size", 0) if config.kind == "internal" else 0
        self.memory = np.zeros((n, own if isinstance(own, int) and own > 0 else spec.memory_size))
        self.value = np.zeros(n)
        self.episode_reward = np.zeros(n)
        self.finished: list[float] = []

    @property
    def subscribed(self) -> bool:
        """Whether this brain talks to Python: External brains always, the others when broadcasting."""
        return self.config.kind == "external" or self.config.broadcast


class TrainerMessageError(ValueError):
    """A message from the trainer that parses but does not fit the scene: the run ends (exit 3).

    Checked here rather than in a communicator so that every protocol (API-2, gRPC) gets the same
    checks: a Unity build would index past its arrays, or run its physics on NaN, and stall or
    poison the trainer.
    """


class ActionError(TrainerMessageError):
    """The action message does not fit a brain: missing, not a list of numbers, wrong size, non-finite."""


class ResetParameterError(TrainerMessageError):
    """A reset parameter that is not a finite number in the scene's range, or that the scene cannot use."""


class Academy:
    """Runs a scene the way Unity's ``Academy`` runs its brains and agents."""

    def __init__(self, scene: Scene, configs: dict[str, BrainConfig] | None = None,
                 train_mode: bool = False, frame_time_ms: float = 0.0) -> None:
        configs = dict(configs or {})
        unknown = set(configs) - {b.name for b in scene.brains}
        if unknown:
            raise ValueError(f"unknown brain(s) {sorted(unknown)} for scene {type(scene).__name__}; "
                             f"its brains are {[b.name for b in scene.brains]}")
        self.scene = scene
        self.brains = [BrainRuntime(spec, i, configs.get(spec.name, BrainConfig(spec.brain_type)))
                       for i, spec in enumerate(scene.brains)]
        self.train_mode = train_mode
        if not (frame_time_ms >= 0.0 and math.isfinite(frame_time_ms)):
            raise ValueError(f"frame_time_ms must be a finite number >= 0, got {frame_time_ms!r}")
        #: Emulated engine cost: seconds slept per decision, as a heavy Unity build waits on its frames.
        self.frame_time = frame_time_ms / 1000.0
        self.record_episodes = False
        self.current_step = 0
        self.episode_count = 0
        self.done = False

    @property
    def subscribed(self) -> list[BrainRuntime]:
        """The brains in ``brainNames`` order (child order, External + broadcasting)."""
        return [b for b in self.brains if b.subscribed]

    def academy_parameters(self, log_path: str = "") -> dict:
        """The handshake message, keys in C# ``AcademyParameters`` order."""
        subscribed = self.subscribed
        hybrid = [b.name for b in subscribed if b.spec.discrete_branches]
        if hybrid:
            raise ValueError(f"brains {hybrid} of {type(self.scene).__name__} have hybrid actions (continuous and "
                             "discrete branches), which the API-2 protocol cannot describe; serve the scene over the "
                             "modern protocol (--mlagents-port) and train it with --protocol grpc.")
        return {
            "AcademyName": self.scene.academy_name,
            "apiNumber": "API-2",
            "logPath": log_path,
            "resetParameters": {k: float(v) for k, v in self.scene.default_reset_parameters.items()},
            "brainNames": [b.name for b in subscribed],
            "brainParameters": [b.spec.parameters_json() for b in subscribed],
            "externalBrainNames": [b.name for b in subscribed if b.config.kind == "external"],
        }

    # --- reset ------------------------------------------------------------------------------------

    def reset(self, train_mode: bool | None = None, parameters: dict | None = None) -> None:
        """``Academy.Reset()``: merge reset parameters, reset the scene and every agent.

        An unknown parameter name or a value that is not a number is logged and ignored (as Unity
        does); NaN, an infinity or a value outside the scene's range raises ResetParameterError
        before anything changes, and so does a scene that cannot be reset with the new values.
        """
        if train_mode is not None:
            self.train_mode = bool(train_mode)
        updates = self._checked_reset_parameters(parameters)
        previous = dict(self.scene.params)
        self.scene.params.update(updates)
        self.current_step = 0
        self.episode_count += 1
        self.done = False
        try:
            self.scene.academy_reset()
            for brain in self.brains:
                self._reset_agents(brain, np.arange(brain.spec.n_agents))
        except (ValueError, ArithmeticError, MemoryError) as exc:
            self.scene.params.clear()
            self.scene.params.update(previous)
            raise ResetParameterError(f"{self.scene.academy_name} cannot reset with the reset parameters "
                                      f"{_clip(repr(updates))}: {exc}. Send values the scene can use.") from None
        for brain in self.brains:
            brain.reward[:] = 0.0
            brain.group_reward[:] = 0.0
            brain.done[:] = False
            brain.episode_reward[:] = 0.0

    def _checked_reset_parameters(self, parameters: object) -> dict[str, float]:
        if parameters is None:
            return {}
        if not isinstance(parameters, dict):
            raise ResetParameterError(f"the reset parameters must be an object of name -> number, got "
                                      f"{_describe(parameters)}")
        updates = {}
        for key, value in parameters.items():
            if key not in self.scene.params:
                log.error("reset parameter %s is not a parameter of %s (known: %s); ignored",
                          _clip(repr(key)), self.scene.academy_name, sorted(self.scene.params))
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                log.error("reset parameter %r must be a number, got %s; ignored", key, _describe(value))
                continue
            number = _finite(value)
            if number is None:  # a number, but NaN or infinite (in Unity's float32): it would poison the physics
                raise ResetParameterError(f"reset parameter {key!r} must be a finite number, got {value!r}; "
                                          f"send a finite value (its default is "
                                          f"{self.scene.default_reset_parameters.get(key)!r})")
            low, high = self.scene.reset_parameter_ranges.get(key, (-math.inf, math.inf))
            if not low <= number <= high:
                raise ResetParameterError(f"reset parameter {key!r} must be in [{low:g}, {high:g}] for "
                                          f"{self.scene.academy_name}, got {number!r}")
            updates[key] = number
        return updates

    def _reset_agents(self, brain: BrainRuntime, index: np.ndarray) -> None:
        """``Agent.Reset()``: zero memory and step counter, then the scene's ``AgentReset``."""
        brain.memory[index] = 0.0
        brain.steps[index] = 0
        self.scene.reset_agents(brain.name, index)

    # --- one decision -----------------------------------------------------------------------------

    def set_external_actions(self, message: dict) -> None:
        """Store Python's ``{"action", "memory", "value"}`` for every External brain.

        Raises ActionError, before anything is stored, when a brain's action is missing, when a
        field is not a list of finite numbers of the brain's size, or when a discrete action is not
        one of the brain's actions: a Unity build would index past its arrays or run its physics on
        NaN, and stall or poison the trainer.
        """
        if not isinstance(message, dict):
            raise ActionError('the action message must be an object {"action": {brain: [numbers]}, '
                              f'"memory": {{...}}, "value": {{...}}}}, got {_describe(message)}')
        fields = {}
        for field in ("action", "memory", "value"):
            part = message.get(field)
            if part is None:
                part = {}
            if not isinstance(part, dict):
                raise ActionError(f'"{field}" of the action message must be an object of brain name -> list of '
                                  f"numbers, got {_describe(part)}")
            fields[field] = part
        staged = []
        for brain in self.brains:
            if brain.config.kind != "external":
                continue
            n, spec = brain.spec.n_agents, brain.spec
            actions = fields["action"].get(brain.name)
            if actions is None:
                raise ActionError(f"the action message has no action for External brain {brain.name!r}; "
                                  f"it must hold {n * spec.action_width} floats under \"action\"")
            choices = spec.action_size if spec.action_space == "discrete" else None
            staged.append((brain.action, _sized(actions, (n, spec.action_width), brain.name, "action", choices)))
            memory = fields["memory"].get(brain.name)
            if memory is not None and spec.memory_size:
                staged.append((brain.memory, _sized(memory, (n, spec.memory_size), brain.name, "memory")))
            value = fields["value"].get(brain.name)
            if value is not None:
                staged.append((brain.value, _sized(value, (n,), brain.name, "value")))
        for target, array in staged:
            target[:] = array

    def decide(self, external_by_heuristic: bool = False) -> None:
        """``DecideAction()`` of the non-External brains (and of External ones when stand-alone)."""
        for brain in self.brains:
            kind = brain.config.kind
            if kind == "heuristic" or (kind == "external" and external_by_heuristic):
                brain.action[:] = self.scene.heuristic(brain.name)
            elif kind == "internal":
                policy = brain.config.policy
                if getattr(policy, "reads_sensors", False):  # an .onnx: one input per sensor, as modern Unity
                    values = modern_observations(self.scene, brain.spec, sensors=policy.sensors)
                    actions, memory = policy.decide_sensors(values, brain.memory)
                else:
                    observations = [self.scene.render(brain.name, i) for i in range(len(brain.spec.cameras))]
                    actions, memory = policy.decide(self.scene.states(brain.name), observations, brain.memory)
                brain.action[:] = np.asarray(actions, dtype=float).reshape(brain.action.shape)
                if brain.memory.shape[1]:
                    brain.memory[:] = np.asarray(memory, dtype=float).reshape(brain.memory.shape)

    def advance(self) -> None:
        """Run the frames of one decision with the stored actions (``AcademyStep`` + ``AgentStep``)."""
        scene = self.scene
        actions = {b.name: b.action for b in self.brains}
        if self.frame_time:
            time.sleep(self.frame_time)  # a sleep, not CPU work: an engine waiting on its frame
        for _ in range(scene.frame_to_skip + 1):
            self.current_step += 1
            if scene.max_steps > 0 and self.current_step >= scene.max_steps:
                self.done = True
            results = scene.step(actions)
            for brain in self.brains:
                reward, done, *group = results[brain.name]
                active = ~brain.done
                brain.reward[active] += reward[active]
                if group:
                    brain.group_reward[active] += group[0][active]
                brain.steps[active] += 1
                max_step = brain.spec.max_step
                if max_step > 0:
                    done = done | (brain.steps > max_step)
                brain.done |= active & done
            if self.done:
                break

    def finish_step(self, emit: Callable[[BrainRuntime], None] | None = None) -> bool:
        """``Academy.Step()`` after the frames: per brain, done → reset → send → clear; returns done.

        ``emit`` is called for each subscribed brain after its done agents were reset and before its
        rewards and done flags are cleared: that is when Unity serialises the state message.
        """
        for brain in self.brains:
            if self.done:
                brain.done[:] = True
            brain.episode_reward += brain.reward + brain.group_reward
            done_rows = np.flatnonzero(brain.done)
            if done_rows.size:
                if self.record_episodes:
                    brain.finished.extend(brain.episode_reward[done_rows].tolist())
                brain.episode_reward[done_rows] = 0.0
                self._reset_agents(brain, done_rows)
            if emit is not None and brain.subscribed:
                emit(brain)
            brain.reward[:] = 0.0
            brain.group_reward[:] = 0.0
            brain.done[:] = False
        return self.done

    def state_message(self, brain: BrainRuntime) -> dict:
        """The per-brain state message (C# ``StepMessage`` field order).

        States go out with 6 decimals: about the precision of Unity's float32 values, and half the
        JSON work of full float64 reprs, which dominate the cost of a step.
        """
        return {
            "brain_name": brain.name,
            "agents": brain.ids,
            "states": np.round(self.scene.states(brain.name), 6).ravel().tolist(),
            "rewards": (brain.reward + brain.group_reward).tolist(),  # API-2 has no group reward
            "actions": brain.action.ravel().tolist(),
            "memories": brain.memory.ravel().tolist(),
            "dones": brain.done.tolist(),
        }

    # --- connected to a trainer -------------------------------------------------------------------

    def serve(self, comm: Communicator, log_path: str = "") -> str:
        """Handshake, then answer RESET and STEP until another command; returns that command.

        Raises the communicator's errors (connection lost, protocol violation) and ActionError.
        """
        comm.send_academy_parameters(self.academy_parameters(log_path))
        while True:
            command = comm.get_command()
            if command == "RESET":
                self.reset(*comm.get_reset_config())
            elif command == "STEP":
                self.set_external_actions(comm.get_actions())
                self.decide()
                self.advance()
            else:
                return command

            def emit(brain: BrainRuntime) -> None:
                frames = [self.scene.render(brain.name, i) for i in range(len(brain.spec.cameras))]
                comm.send_brain_info(self.state_message(brain), frames)

            comm.send_done(self.finish_step(emit))

    # --- stand-alone ------------------------------------------------------------------------------

    def run_episodes(self, episodes: int) -> dict[str, float]:
        """Run with no trainer until every brain finished ``episodes`` agent episodes.

        External brains act with the scene heuristic. Returns the mean reward of each brain's first
        ``episodes`` finished episodes (in completion order, so the result is deterministic).
        """
        self.record_episodes = True
        self.reset()
        for brain in self.brains:
            brain.finished.clear()
        while any(len(b.finished) < episodes for b in self.brains):
            self.decide(external_by_heuristic=True)
            self.advance()
            if self.finish_step():
                self.reset()
        return {b.name: float(np.mean(b.finished[:episodes])) for b in self.brains}


def _sized(values: object, shape: tuple[int, ...], brain: str, field: str,
           choices: int | None = None) -> np.ndarray:
    """``values`` as a float array of ``shape``, or an ActionError saying what was expected.

    ``values`` must be a list of finite numbers (or a list of per-agent lists); with ``choices``
    (a discrete action) each must be a whole number in ``[0, choices)``.
    """
    expected = int(np.prod(shape))
    wanted = f"{expected} floats ({' x '.join(map(str, shape))} for its agents)"
    if not isinstance(values, list):
        raise ActionError(f"brain {brain!r}: {field} must be a list of {wanted}, got {_describe(values)}")
    try:
        array = np.array(values)
    except (ValueError, TypeError, OverflowError):
        raise ActionError(f"brain {brain!r}: {field} must be a flat list of {wanted}, got a ragged or mixed "
                          f"list {_describe(values)}") from None
    if array.size and array.dtype.kind not in "iuf":
        raise ActionError(f"brain {brain!r}: {field} must hold numbers only, got {_describe(values)}")
    if array.ndim > 2:
        raise ActionError(f"brain {brain!r}: {field} is nested {array.ndim} levels deep; send a flat list of {wanted}")
    if array.size != expected:
        raise ActionError(f"brain {brain!r}: {field} has {array.size} floats, expected {wanted}")
    array = array.astype(float)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~(np.abs(array) <= FLOAT32_MAX))
    if bad.size:
        raise ActionError(f"brain {brain!r}: {field} must be finite as a 32-bit float, got "
                          f"{float(array.ravel()[bad[0]])} at index {bad[0]} ({bad.size} such values); the "
                          "trainer's policy has diverged")
    if choices is not None:
        wrong = np.flatnonzero((array != np.floor(array)) | (array < 0) | (array >= choices))
        if wrong.size:
            raise ActionError(f"brain {brain!r}: a discrete action must be a whole number in [0, {choices}), "
                              f"got {float(array.ravel()[wrong[0]])!r} at index {wrong[0]}")
    return array.reshape(shape)


def _finite(value: object) -> float | None:
    """``value`` as a finite float, or None when it is not a finite number (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if abs(number) <= FLOAT32_MAX else None  # False for NaN too


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def _describe(value: object) -> str:
    """A short description of what arrived, for error messages: its type and a clipped repr."""
    try:
        text = repr(value)
    except RecursionError:
        text = "<too deeply nested to print>"
    return f"{type(value).__name__} {_clip(text, 80)}"
