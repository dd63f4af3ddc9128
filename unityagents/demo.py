"""Reading ``.demo`` files, the recordings Unity's Demonstration Recorder writes.

A file is a sequence of protobuf messages, each preceded by its length as a varint (protobuf's
delimited encoding):

==========  ======================================================================
offset 0    ``DemonstrationMetaProto`` (API version, name, step and episode counts, mean reward)
offset 33   ``BrainParametersProto`` (the behaviour's name and action spec); Unity reserves the
            bytes before it for the meta header, which it rewrites when the recording closes
then        one ``AgentInfoActionPairProto`` per recorded agent step, terminal steps included
end         Unity appends an undelimited copy of the meta; readers stop after ``number_steps``
==========  ======================================================================

``load_demonstration(path, expected)`` reads one file or every ``*.demo`` of a folder (sorted by
name, so a folder always loads in the same order), checks each header, version and spec (against
the brain a trainer trains, when given), and returns the steps as arrays: one per sensor, the
actions, rewards, done flags and action masks. ``Demonstration.brain_inputs()`` lays the sensors
out as a trainer's batch does for the same behaviour over the modern protocol (vector sensors
concatenated into the state, cameras as ``[N, H, W, C]`` floats in 0..1), so a trainer can feed
them to the placeholders it acts with. Nothing here knows about trainers.
"""
from __future__ import annotations

import dataclasses
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.message import DecodeError

from unityagents.base_env import DecisionSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityException
from unityagents.wire.protos import communicator_objects_pb2 as pb

#: Where the BrainParametersProto starts: the 32 bytes Unity reserves for the meta header, plus one.
INITIAL_POS = 33
#: Meta ``api_version`` values the ML-Agents loader accepts (Unity's recorder writes 1).
SUPPORTED_DEMONSTRATION_VERSIONS = frozenset({0, 1})


class DemonstrationError(UnityException):
    """A ``.demo`` file (or folder) that cannot be used: the message names the file and the fix."""


@dataclasses.dataclass
class Demonstration:
    """The recorded steps of one behaviour, in file order (episodes are contiguous).

    ``observations``: one array per sensor in the recorded sensor order: vectors ``[N, size]``
    float32, cameras ``[N, H, W, C]`` float32 in 0..1 (decoded from PNG or float data whatever the
    wire layout). ``continuous_actions`` ``[N, n]`` float32 and ``discrete_actions`` ``[N, branches]``
    int32 (one of them has zero columns). ``rewards[i]`` and ``dones[i]`` are what agent step ``i``
    reported: the reward for the previous action, and whether step ``i`` ends its episode.
    ``action_masks`` ``[N, sum(branches)]`` float32, 1 = allowed (all ones when nothing was masked).
    """

    paths: List[str]
    metas: List["pb.DemonstrationMetaProto"]
    brain_name: str
    continuous_size: int
    branches: List[int]
    sensor_shapes: List[Tuple[int, ...]]
    sensor_visual: List[bool]
    observations: List[np.ndarray]
    continuous_actions: np.ndarray
    discrete_actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    max_step_reached: np.ndarray
    action_masks: np.ndarray

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def is_continuous(self) -> bool:
        return self.continuous_size > 0

    @property
    def actions(self) -> np.ndarray:
        """The expert actions as a trainer stores them: ``[N, n]`` floats, or ``[N, branches]`` ints."""
        return self.continuous_actions if self.is_continuous else self.discrete_actions

    @property
    def episode_rewards(self) -> List[float]:
        """The return of each complete recorded episode (rewards summed up to each done step)."""
        ends = np.flatnonzero(self.dones)
        starts = np.concatenate([[0], ends[:-1] + 1]) if ends.size else np.zeros(0, np.int64)
        return [float(self.rewards[s:e + 1].sum()) for s, e in zip(starts, ends)]

    def steps(self) -> DecisionSteps:
        """The recorded agent steps as one ``DecisionSteps`` (row ``i`` is step ``i``, its id ``i``): one
        array per sensor in the recorded order, the rewards, and the masks per branch (True = masked)."""
        masks = None
        if self.branches:
            masks = np.split(self.action_masks < 0.5, np.cumsum(self.branches)[:-1], axis=1)
        return DecisionSteps(list(self.observations), self.rewards.astype(np.float64), np.arange(len(self)), masks)

    def brain_inputs(self, brain: Optional[BrainParameters] = None) -> Tuple[np.ndarray, List[np.ndarray]]:
        """``(states, cameras)`` as a trainer's batch of this behaviour carries them.

        The vector sensors are concatenated in sensor order into ``[N, state]``; a brain whose state
        is discrete (an API-2 scene such as Basic, whose modern sensors send it one-hot) gets the
        index ``[N, 1]``. Cameras stay ``[N, H, W, C]``.
        """
        vectors = [o for o, visual in zip(self.observations, self.sensor_visual) if not visual]
        cameras = [o for o, visual in zip(self.observations, self.sensor_visual) if visual]
        n = len(self)
        states = np.concatenate(vectors, axis=1) if vectors else np.zeros((n, 0), np.float32)
        if brain is not None and brain.state_space_type == "discrete":
            states = np.argmax(states, axis=1).astype(np.int32)[:, None]
        return states, cameras


def demo_files(path: str) -> List[str]:
    """``path`` itself if it is a ``.demo`` file; every ``*.demo`` directly in it if a folder."""
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith(".demo") and os.path.isfile(os.path.join(path, f)))
        if not files:
            raise DemonstrationError(
                f"the folder {path!r} holds no .demo file. Record one (python -m academy <Scene> --record-demo "
                "FILE.demo, or Unity's Demonstration Recorder) or point demo_path at a .demo file.")
        return files
    if not os.path.isfile(path):
        raise DemonstrationError(f"demonstration {path!r} does not exist: expected a .demo file or a folder of them.")
    if not path.endswith(".demo"):
        raise DemonstrationError(f"demonstration {path!r} is not a .demo file (the name must end in .demo).")
    return [path]


def _delimited(data: bytes, offset: int, path: str, what: str) -> Tuple[bytes, int]:
    """The message bytes that start at ``offset`` (after their varint length), and the next offset."""
    try:
        size, start = _DecodeVarint32(data, offset)
    except (IndexError, DecodeError):
        raise DemonstrationError(
            f"{path}: the file ends inside the length of the {what} at byte {offset} ({len(data)} bytes in all): "
            "it is truncated. Record it again, and let the recording close (end play mode) before copying it."
        ) from None
    end = start + size
    if end > len(data):
        raise DemonstrationError(
            f"{path}: the {what} at byte {offset} claims {size} bytes but only {len(data) - start} remain: the file is "
            "truncated. Record it again, and let the recording close (end play mode) before copying it.")
    return data[start:end], end


def _parse(message_cls, raw: bytes, path: str, what: str, offset: int):
    message = message_cls()
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        raise DemonstrationError(f"{path}: the {what} at byte {offset} is not a valid {message_cls.__name__} "
                                 f"({exc}); the file is damaged or not a .demo file.") from None
    return message


def read_demo_file(path: str) -> Tuple["pb.DemonstrationMetaProto", "pb.BrainParametersProto",
                                       List["pb.AgentInfoActionPairProto"]]:
    """The meta, brain parameters and ``number_steps`` step pairs of one ``.demo`` file, checked for
    truncation and version (not for spec: see ``load_demonstration``)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise DemonstrationError(f"{path}: the file is empty; expected a .demo recording (a meta header, brain "
                                 "parameters and the recorded steps). Record it again.")
    raw, _ = _delimited(data, 0, path, "meta header")
    meta = _parse(pb.DemonstrationMetaProto, raw, path, "meta header", 0)
    if meta.api_version not in SUPPORTED_DEMONSTRATION_VERSIONS:
        raise DemonstrationError(
            f"{path}: demonstration API version {meta.api_version} is not supported; this reader reads versions "
            f"{sorted(SUPPORTED_DEMONSTRATION_VERSIONS)} (Unity's recorder writes 1). Record it again with a "
            "matching ML-Agents package.")
    if meta.number_steps <= 0:
        raise DemonstrationError(f"{path}: the header records {meta.number_steps} steps; a demonstration needs at "
                                 "least one. Record it again for longer.")
    if len(data) <= INITIAL_POS:
        raise DemonstrationError(f"{path}: the file ends at byte {len(data)}, before its brain parameters at byte "
                                 f"{INITIAL_POS}: it is truncated. Record it again.")
    raw, offset = _delimited(data, INITIAL_POS, path, "brain parameters")
    brain = _parse(pb.BrainParametersProto, raw, path, "brain parameters", INITIAL_POS)
    pairs = []
    for k in range(meta.number_steps):
        if offset >= len(data):
            raise DemonstrationError(
                f"{path}: the header promises {meta.number_steps} steps but the file ends after {k}: it is "
                "truncated. Record it again, and let the recording close before copying it.")
        raw, end = _delimited(data, offset, path, f"step {k}")
        pairs.append(_parse(pb.AgentInfoActionPairProto, raw, path, f"step {k}", offset))
        offset = end
    return meta, brain, pairs


def _action_spec(brain: "pb.BrainParametersProto") -> Tuple[int, List[int]]:
    spec = brain.action_spec
    if spec.num_continuous_actions or spec.num_discrete_actions:
        return int(spec.num_continuous_actions), [int(b) for b in spec.discrete_branch_sizes]
    if brain.vector_action_space_type_deprecated == pb.continuous:  # recordings before action_spec
        return int(brain.vector_action_size_deprecated[0]) if brain.vector_action_size_deprecated else 0, []
    return 0, [int(b) for b in brain.vector_action_size_deprecated]


def _spec_text(continuous: int, branches: Sequence[int], shapes: Sequence[Tuple[int, ...]]) -> str:
    actions = f"{continuous} continuous actions" if continuous else f"discrete branches {list(branches)}"
    return f"{actions}, observations {[tuple(s) for s in shapes]}"


def _hwc(shape: Tuple[int, ...], channels_first: bool) -> Tuple[int, int, int]:
    return (shape[1], shape[2], shape[0]) if channels_first else shape  # type: ignore[return-value]


def _decode_observation(obs: "pb.ObservationProto", shape: Tuple[int, ...], visual: bool,
                        channels_first: bool, path: str, step: int, k: int) -> np.ndarray:
    if obs.compression_type == pb.NONE:
        values = np.asarray(obs.float_data.data, np.float32)
        if values.size != int(np.prod(shape)):
            raise DemonstrationError(f"{path}: step {step}, sensor {k} holds {values.size} values for shape {shape}; "
                                     "the file is damaged.")
        if visual:
            values = values.reshape(shape)
            return values.transpose(1, 2, 0) if channels_first else values
        return values
    from unityagents.wire.validate import decode_png_observation

    try:
        return decode_png_observation(obs.compressed_data, _hwc(shape, channels_first),
                                      list(obs.compressed_channel_mapping))
    except Exception as exc:  # Pillow raises several types for bad images
        raise DemonstrationError(f"{path}: step {step}, sensor {k} is not a readable PNG of shape {shape} "
                                 f"({type(exc).__name__}: {exc}).") from None


def check_spec(path: str, continuous: int, branches: Sequence[int], shapes: Sequence[Tuple[int, ...]],
               brain: BrainParameters, channels_first: bool = True) -> None:
    """DemonstrationError unless the recorded actions and sensors fit the brain a trainer trains."""
    vector = sum(int(np.prod(s)) for s in shapes if len(s) != 3)
    cameras = [_hwc(s, channels_first) for s in shapes if len(s) == 3]
    if brain.action_space_type == "continuous":
        actions_ok = continuous == brain.action_space_size and not branches
        wanted = f"{brain.action_space_size} continuous actions"
    else:
        actions_ok = not continuous and list(branches) == list(brain.action_branches)
        wanted = f"discrete branches {list(brain.action_branches)}"
    state = brain.state_space_size
    states_ok = vector == state if state else vector == 0
    wanted_cameras = [(int(c["height"]), int(c["width"]), int(c.get("channels", 1 if c.get("blackAndWhite") else 3)))
                      for c in brain.camera_resolutions]
    if not (actions_ok and states_ok and [tuple(c) for c in cameras] == wanted_cameras):
        raise DemonstrationError(
            f"{path}: recorded for another behaviour spec: it has {_spec_text(continuous, branches, shapes)} "
            f"({vector} vector values, cameras [H,W,C] {cameras}); brain {brain.brain_name!r} has {wanted}, "
            f"a state of {state} values and cameras {wanted_cameras}. Record the demonstration from this "
            "behaviour, or train the behaviour it was recorded from.")


def load_demonstration(path: str, expected: Optional[BrainParameters] = None,
                       channels_first: bool = True) -> Demonstration:
    """Every step of the ``.demo`` file (or folder of them) at ``path``, as arrays.

    Every file must have a supported version, be complete, and have the first file's spec; with
    ``expected`` each must also fit that brain (``check_spec``). ``channels_first``: cameras were
    recorded as ``[C, H, W]`` (C# package 3.x, the default) or ``[H, W, C]`` (2.x).
    """
    files = demo_files(path)
    metas, pairs_all = [], []
    first: Optional[Tuple[str, int, List[int], List[Tuple[int, ...]]]] = None
    brain_name = ""
    for file in files:
        meta, brain, pairs = read_demo_file(file)
        continuous, branches = _action_spec(brain)
        shapes = [tuple(int(d) for d in o.shape) for o in pairs[0].agent_info.observations]
        if first is None:
            first, brain_name = (file, continuous, branches, shapes), brain.brain_name
        elif (continuous, branches, shapes) != first[1:]:
            raise DemonstrationError(
                f"{file}: recorded for another behaviour spec than {first[0]}: "
                f"{_spec_text(continuous, branches, shapes)} against {_spec_text(*first[1:])}. Keep one "
                "behaviour's recordings per folder.")
        if expected is not None:
            check_spec(file, continuous, branches, shapes, expected, channels_first)
        metas.append(meta)
        pairs_all.extend((file, k, p) for k, p in enumerate(pairs))
    assert first is not None
    _, continuous, branches, shapes = first
    visual = [len(s) == 3 for s in shapes]
    n = len(pairs_all)
    observations = [np.zeros((n,) + (_hwc(s, channels_first) if v else (int(np.prod(s)),)), np.float32)
                    for s, v in zip(shapes, visual)]
    cont = np.zeros((n, continuous), np.float32)
    disc = np.zeros((n, len(branches)), np.int32)
    masks = np.ones((n, int(sum(branches))), np.float32)
    rewards, dones, interrupted = np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool)
    for i, (file, k, pair) in enumerate(pairs_all):
        info, action = pair.agent_info, pair.action_info
        if len(info.observations) != len(shapes) or any(
                tuple(o.shape) != s for o, s in zip(info.observations, shapes)):
            raise DemonstrationError(
                f"{file}: step {k} has observations {[tuple(o.shape) for o in info.observations]}, the first step "
                f"{shapes}; every step of a behaviour must have the same sensors. The file is damaged.")
        for j, (obs, shape) in enumerate(zip(info.observations, shapes)):
            observations[j][i] = _decode_observation(obs, shape, visual[j], channels_first, file, k, j)
        values_c, values_d = list(action.continuous_actions), list(action.discrete_actions)
        if not values_c and not values_d:  # recordings before continuous/discrete_actions
            deprecated = list(action.vector_actions_deprecated)
            values_c, values_d = (deprecated, []) if continuous else ([], [int(v) for v in deprecated])
        if len(values_c) != continuous or len(values_d) != len(branches) or any(
                not 0 <= a < b for a, b in zip(values_d, branches)):
            raise DemonstrationError(
                f"{file}: step {k} holds actions {values_c or values_d}; the spec has "
                f"{_spec_text(continuous, branches, shapes)}. The file is damaged.")
        cont[i], disc[i] = values_c, values_d
        if info.action_mask and len(info.action_mask) == masks.shape[1]:
            masks[i] = 1.0 - np.asarray(info.action_mask, np.float32)  # on the wire, True = masked
        rewards[i], dones[i], interrupted[i] = info.reward, info.done, info.max_step_reached
    return Demonstration(paths=files, metas=metas, brain_name=brain_name, continuous_size=continuous,
                         branches=list(branches), sensor_shapes=list(shapes), sensor_visual=visual,
                         observations=observations, continuous_actions=cont, discrete_actions=disc,
                         rewards=rewards, dones=dones, max_step_reached=interrupted, action_masks=masks)


__all__ = ["Demonstration", "DemonstrationError", "INITIAL_POS", "SUPPORTED_DEMONSTRATION_VERSIONS",
           "check_spec", "demo_files", "load_demonstration", "read_demo_file"]
