"""The scene contract: what a built-in scene declares (spaces, sensors, brains) and implements.

A Unity build's brains and agents are described to the trainer by ``BrainSpec`` (the API-2
``brainParameters`` and, over the modern protocol, the agents' sensors); a ``Scene`` subclass holds
the physics of every agent of every brain as whole numpy arrays, so that the Academy loop
(``academy.academy``) can step all agents with a handful of array operations.
"""
from __future__ import annotations

import abc
import dataclasses
import functools

import numpy as np

#: Values of Unity's ``StateType`` enum as serialised in ``actionSpaceType`` / ``stateSpaceType``.
SPACE_TYPES = {"discrete": 0, "continuous": 1}


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
        return self._sorted_sensors

    @functools.cached_property
    def _sorted_sensors(self) -> tuple:
        """``modern_sensors``, sorted once: the spec is frozen, and the wire reads it every step."""
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
    behavior_names: dict[str, str] = {}
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

