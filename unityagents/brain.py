"""What a brain is: ``BrainParameters``, the fixed description of one behaviour.

It mirrors the API-2 Python package: ``BrainParameters(name, dict)`` takes one entry of the
AcademyParameters' ``brainParameters`` list. The modern (gRPC) protocol maps onto the same class
(``unityagents.wire.grpc_messages``): a behaviour becomes a brain, its discrete branches
``action_branches`` (a hybrid behaviour is a continuous brain with branches: ``is_hybrid``).
``BrainParameters.sensors`` lists the environment's sensors, one ``Sensor`` each, in the order it
reports them (an API-2 brain's list is its cameras, then its state), with where each vector
sensor's values sit when a trainer joins them into one state. Unity binds the ONNX input
``obs_k`` to the k-th of them, so the export reads this list; ``behavior_spec`` is the same list
as the step types see it (``unityagents.base_env``), whose ``obs`` hold one array per sensor.

The two protocols also differ in the scale of continuous actions (``ACTION_CONTRACTS``). A 2018
agent script clamps whatever float it gets, so API-2 brains receive the policy's sample as it is.
A modern Unity agent receives the ``continuous_actions`` output of the ``.onnx`` export, which is
``clamp(a, -3, 3) / 3`` of the Gaussian sample; over gRPC a trainer sends those same numbers, so
that a policy acts in Unity at the scale it was trained at. ``BrainParameters.environment_actions``
is the one place that maps a policy's actions to what its environment receives.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from unityagents.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

SPACE_TYPES = ("discrete", "continuous")
#: How an environment expects continuous actions: ``"raw"`` (API-2: the policy's sample, clamped
#: by the agent script) or ``"unit"`` (modern Unity: ``clamp(a, -CLIP, CLIP) / CLIP``, in [-1, 1],
#: exactly what the ONNX export's ``continuous_actions`` output holds).
ACTION_CONTRACTS = ("raw", "unit")
#: ML-Agents' clip for Gaussian (not tanh-squashed) policies: a sample of 3 is a full action of 1.
CONTINUOUS_ACTION_CLIP = 3.0


@dataclasses.dataclass(frozen=True)
class Sensor:
    """One observation of a brain, as its environment reports it.

    :param name: the sensor's name (Unity's ``ISensor.GetName()``; a made-up one for API-2).
    :param shape: rank 1 ``(n,)``, rank 2 ``(N, F)``, or a camera's channels-first ``(C, H, W)``
        whatever the wire layout: the shape of its ONNX input ``obs_k`` without the batch.
    :param camera: the camera's index in ``camera_resolutions`` (and among the trainers' camera
        inputs); -1 for a vector sensor.
    :param offset: a vector sensor's first float in the brain's state: a trainer joins the vector
        sensors' values in sensor order into one state, so offsets grow with the sensors.
    :param observation_type: 0 default, 1 goal signal (ML-Agents' ``ObservationType``).
    :param variable_length: a rank-2 ``(N_max, F)`` sensor whose first dimension varies (Unity's
        BufferSensor, dimension properties ``[VariableSize, None]``): up to ``N_max`` entities of
        ``F`` floats, padded with rows of zeros, which the encoder masks (``trainers/attention.py``).
        Its values sit in the state like a vector sensor's, row after row.
    """

    name: str
    shape: Tuple[int, ...]
    camera: int = -1
    offset: int = 0
    observation_type: int = 0
    variable_length: bool = False

    @property
    def is_camera(self) -> bool:
        return self.camera >= 0

    @property
    def size(self) -> int:
        """Floats per agent: a vector sensor's width in the state (a camera's pixel count)."""
        return math.prod(self.shape)  # read for every sensor of every message: not np.prod's ~10 us

    def to_dict(self) -> Dict[str, Any]:
        entry = {"name": self.name, "shape": list(self.shape), "camera": self.camera, "offset": self.offset,
                 "observationType": self.observation_type}
        if self.variable_length:
            entry["variableLength"] = True
        return entry

    @classmethod
    def from_dict(cls, entry: Dict[str, Any]) -> "Sensor":
        return cls(str(entry["name"]), tuple(int(d) for d in entry["shape"]), int(entry.get("camera", -1)),
                   int(entry.get("offset", 0)), int(entry.get("observationType", 0)),
                   bool(entry.get("variableLength", False)))


def camera_shape(camera: Dict[str, Any]) -> Tuple[int, int, int]:
    """A ``cameraResolutions`` entry as channels-first ``(C, H, W)``."""
    channels = int(camera.get("channels", 1 if camera.get("blackAndWhite") else 3))
    return channels, int(camera["height"]), int(camera["width"])


def default_sensors(state_width: int, state_size: int, cameras: Sequence[Dict[str, Any]]) -> List[Sensor]:
    """An API-2 brain's sensors: its cameras in order, then its state (when it has one)."""
    sensors = [Sensor(f"camera_{k}", camera_shape(c), k) for k, c in enumerate(cameras)]
    if state_size > 0:
        sensors.append(Sensor("state", (state_width,)))
    return sensors


class BrainParameters:
    """The fixed description of a brain, as sent once in the AcademyParameters.

    :param brain_name: the brain's GameObject name.
    :param brain_param: one entry of ``brainParameters`` (keys ``stateSize``, ``actionSize``,
        ``memorySize``, ``cameraResolutions``, ``actionDescriptions``, ``actionSpaceType``,
        ``stateSpaceType``; the modern protocol adds ``actionBranches``, ``actionMasks``,
        ``continuousActionContract`` and ``sensors``, a list of ``Sensor.to_dict()``).
    """

    def __init__(self, brain_name: str, brain_param: Dict[str, Any]):
        self.brain_name = brain_name
        self.state_space_size = int(brain_param["stateSize"])
        self.camera_resolutions: List[Dict[str, Any]] = list(brain_param.get("cameraResolutions") or [])
        self.number_observations = len(self.camera_resolutions)
        self.action_space_size = int(brain_param["actionSize"])
        self.memory_space_size = int(brain_param.get("memorySize", 0) or 0)
        self.action_descriptions = list(brain_param.get("actionDescriptions") or [])
        self.action_space_type = SPACE_TYPES[int(brain_param.get("actionSpaceType", 0))]
        self.state_space_type = SPACE_TYPES[int(brain_param.get("stateSpaceType", 1))]
        #: Sizes of the discrete action branches: one action per branch per agent. API-2 discrete
        #: brains have one branch of ``actionSize``; continuous brains have none, unless hybrid
        #: (modern protocol: ``actionSize`` continuous actions and these branches).
        default_branches = [self.action_space_size] if self.action_space_type == "discrete" else []
        self.action_branches: List[int] = [int(b) for b in brain_param.get("actionBranches", default_branches)]
        #: The environment may mask discrete actions (modern protocol): trainers then honour
        #: ``DecisionSteps.action_mask``. API-2 has no masks.
        self.uses_action_masks = bool(brain_param.get("actionMasks", False))
        #: One of ``ACTION_CONTRACTS``: the scale at which this brain's environment takes
        #: continuous actions (set by the communicator of the protocol; API-2 is ``"raw"``).
        self.continuous_action_contract = str(brain_param.get("continuousActionContract", "raw"))
        if self.continuous_action_contract not in ACTION_CONTRACTS:
            raise ValueError(
                f"Brain {brain_name!r}: continuousActionContract {self.continuous_action_contract!r} is not one of "
                f"{ACTION_CONTRACTS}; use 'raw' for API-2 environments and 'unit' for the modern protocol.")
        defaults = default_sensors(self.state_width, self.state_space_size, self.camera_resolutions)
        given = brain_param.get("sensors")
        #: The environment's sensors in the order it reports them (see ``Sensor``).
        self.sensors: List[Sensor] = defaults if given is None else [
            s if isinstance(s, Sensor) else Sensor.from_dict(s) for s in given]
        self._check_sensors()

    def _check_sensors(self) -> None:
        """The sensors must tile the state and name every camera, in order: the export relies on it."""
        offset, camera = 0, 0
        for k, sensor in enumerate(self.sensors):
            if sensor.is_camera:
                ok = sensor.camera == camera and camera < self.number_observations
                if ok:
                    ok = sensor.shape == camera_shape(self.camera_resolutions[camera])
                camera += 1
            else:
                ok = sensor.offset == offset
                if sensor.variable_length and len(sensor.shape) != 2:
                    raise ValueError(
                        f"Brain {self.brain_name!r}: sensor {k} ({sensor.name!r}) is variable-length with shape "
                        f"{sensor.shape}; a variable-length sensor is rank 2, (max entities, floats per entity).")
                offset += sensor.size
            if not ok:
                where = f"camera {camera - 1}" if sensor.is_camera else f"the state from offset {offset - sensor.size}"
                raise ValueError(
                    f"Brain {self.brain_name!r}: sensor {k} ({sensor.name!r}, shape {sensor.shape}) does not fit the "
                    f"brain as {where}. Vector sensors are the state's parts in order; cameras are "
                    "cameraResolutions in order, at their resolution.")
        if offset != (self.state_width if self.state_space_size else 0) or camera != self.number_observations:
            raise ValueError(
                f"Brain {self.brain_name!r}: its sensors {[s.name for s in self.sensors]} cover {offset} state floats "
                f"and {camera} cameras; the brain has {self.state_width if self.state_space_size else 0} and "
                f"{self.number_observations}. Declare one sensor per part of the state and per camera.")

    @functools.cached_property
    def behavior_spec(self) -> BehaviorSpec:
        """The brain as the step types see it: one ``ObservationSpec`` per sensor, in sensor order
        (cameras channels last, as their ``obs`` arrays), and its continuous and discrete actions.

        Built once: the action check reads it at every step, and a brain's spaces and sensors are
        fixed when it is announced."""
        observations = []
        for s in self.sensors:
            if s.is_camera:
                c, h, w = s.shape
                observations.append(ObservationSpec((h, w, c), (DimensionProperty.TRANSLATIONAL_EQUIVARIANCE,) * 2
                                                    + (DimensionProperty.NONE,), ObservationType(s.observation_type),
                                                    s.name))
            else:
                dims = ((DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE) if s.variable_length
                        else (DimensionProperty.NONE,) * len(s.shape))
                observations.append(ObservationSpec(tuple(s.shape), dims, ObservationType(s.observation_type), s.name))
        continuous = self.action_space_size if self.action_space_type == "continuous" else 0
        return BehaviorSpec(observations, ActionSpec(continuous, tuple(self.action_branches)))

    def cameras_and_state(self, obs: Sequence[np.ndarray]) -> Tuple[List[np.ndarray], np.ndarray]:
        """Per-sensor ``obs`` (``DecisionSteps.obs``) as (the cameras in order, the state): the vector
        sensors joined in sensor order, each one's values at its ``offset``."""
        cameras, vectors = [], []
        for sensor, array in zip(self.sensors, obs):
            (cameras if sensor.is_camera else vectors).append(array)
        n = len(obs[0]) if len(obs) else 0
        if len(vectors) == 1 and vectors[0].ndim == 2:
            return cameras, vectors[0]
        if not vectors:
            return cameras, np.zeros((n, 0), np.float32)
        return cameras, np.concatenate([v.reshape(n, int(np.prod(v.shape[1:]))) for v in vectors], axis=1)

    @property
    def state_width(self) -> int:
        """Floats per agent in a state message: ``stateSize`` if continuous, 1 if discrete."""
        return self.state_space_size if self.state_space_type == "continuous" else 1

    @property
    def is_hybrid(self) -> bool:
        """Continuous actions and discrete branches in one behaviour (modern protocol only): the
        ``actionSize`` continuous actions come first in each action row, then one index per branch."""
        return self.action_space_type == "continuous" and bool(self.action_branches)

    @property
    def action_width(self) -> int:
        """Floats per agent in an action message: ``actionSize`` if continuous, one per branch
        (1 for API-2) if discrete, both (continuous first) if hybrid."""
        if self.action_space_type == "continuous":
            return self.action_space_size + len(self.action_branches)
        return len(self.action_branches)

    def environment_actions(self, actions: np.ndarray, bounded: bool = False) -> np.ndarray:
        """What the environment receives when the policy decided ``actions`` (``[N, action_width]``).

        Discrete actions and the ``"raw"`` contract pass unchanged. Under ``"unit"``, a Gaussian
        sample becomes ``clamp(a, -3, 3) / 3`` (the trainer keeps the unclipped sample for its
        log-probabilities); ``bounded`` says the policy's actions are already in [-1, 1] (a
        tanh-squashed policy, or one that copies actions the environment executed), so they are
        only clamped to that range, not divided.
        """
        if self.action_space_type != "continuous" or self.continuous_action_contract == "raw":
            return actions
        clip = 1.0 if bounded else CONTINUOUS_ACTION_CLIP
        if self.is_hybrid:  # only the continuous columns are scaled; the branch indices pass as they are
            out = np.array(actions, dtype=np.float32)
            n = self.action_space_size
            out[:, :n] = np.clip(out[:, :n], -clip, clip) / np.float32(clip)
            return out
        return np.clip(np.asarray(actions, dtype=np.float32), -clip, clip) / np.float32(clip)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON entry this object was made from (round trip for saving and tests)."""
        result = {
            "stateSize": self.state_space_size,
            "actionSize": self.action_space_size,
            "memorySize": self.memory_space_size,
            "cameraResolutions": self.camera_resolutions,
            "actionDescriptions": self.action_descriptions,
            "actionSpaceType": SPACE_TYPES.index(self.action_space_type),
            "stateSpaceType": SPACE_TYPES.index(self.state_space_type),
        }
        default_branches = [self.action_space_size] if self.action_space_type == "discrete" else []
        if self.action_branches != default_branches:  # only modern multi-branch brains differ
            result["actionBranches"] = list(self.action_branches)
        if self.uses_action_masks:
            result["actionMasks"] = True
        if self.continuous_action_contract != "raw":
            result["continuousActionContract"] = self.continuous_action_contract
        if self.sensors != default_sensors(self.state_width, self.state_space_size, self.camera_resolutions):
            result["sensors"] = [s.to_dict() for s in self.sensors]
        return result

    def __str__(self) -> str:
        return (
            f"Unity brain name: {self.brain_name}\n"
            f"        Number of observations (per agent): {self.number_observations}\n"
            f"        State space type: {self.state_space_type}\n"
            f"        State space size (per agent): {self.state_space_size}\n"
            f"        Action space type: {self.action_space_type}\n"
            f"        Action space size (per agent): {self.action_space_size}\n"
            f"        Memory space size (per agent): {self.memory_space_size}\n"
            f"        Action descriptions: {', '.join(self.action_descriptions)}"
        )


def same_spaces_error(a: BrainParameters, b: BrainParameters) -> Optional[str]:
    """A description of how the observation/action spaces of two brains differ, None if they match."""
    differences = [
        f"{what}: {x!r} vs {y!r}"
        for what, x, y in (
            ("state space type", a.state_space_type, b.state_space_type),
            ("state size", a.state_space_size, b.state_space_size),
            ("action space type", a.action_space_type, b.action_space_type),
            ("action size", a.action_space_size, b.action_space_size),
            ("cameras", a.camera_resolutions, b.camera_resolutions),
        )
        if x != y
    ]
    return "; ".join(differences) or None


def team_base(brain_name: str) -> str:
    """A modern behaviour's name without its ``?team=N`` suffix (``3DBall?team=0`` -> ``3DBall``)."""
    return brain_name.split("?team=", 1)[0]


def former_names(behavior: str) -> List[str]:
    """The names a built-in scene's behaviour had over the modern protocol before it carried the name of
    Unity's example (``3DBall`` -> ``["Ball3DBrain"]``, ``academy.UNITY_NAMES``): run configs written for
    those still apply to it."""
    try:
        import academy
    except ImportError:
        return []
    return [old for old, new in academy.UNITY_NAMES.items() if new == behavior]


def team_id(brain_name: str) -> int:
    """``N`` of ``Name?team=N`` (0 without the suffix), as Release 22 parses behaviour ids."""
    _, sep, rest = brain_name.partition("?team=")
    try:
        return int(rest) if sep else 0
    except ValueError:
        return 0
