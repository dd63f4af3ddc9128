"""Checks of everything a modern (gRPC) environment sends, made before any of it is used.

A modern build is code we did not write: third-party sensors, side-channel plugins, a scene
whose agents were disabled. Every field of a ``UnityOutputProto`` is checked here against the
protocol (and against the behaviour's spec, once it is known), so a wrong message ends as a
``UnityMessageException`` that names the behaviour, the agent, the field, what was expected and
what arrived. That exception is a ``UnityCommunicationException``, so ``EnvironmentSet`` restarts
the environment under its ``RestartPolicy`` like any other environment fault, and nothing of the
message reaches a trainer.

The rules, with ML-Agents' own handling where it is more lenient:

* the envelope: status 200 and a ``unity_output.rl_output`` (Unity always sends one; a message
  without it would otherwise read as "no agent this step", forever);
* a behaviour is announced once, with its first agents; an announcement that changes its
  action spec or observation shapes mid-run is refused (ML-Agents keeps the first one silently);
  agent infos of a behaviour that was never announced are refused (ML-Agents drops them);
* per agent: ids unique within a message unless one of the two infos is done; observation
  count, shapes, compression type and data length equal to the spec; PNG sizes read from their
  headers before decoding; action masks of exactly the sum of the branch sizes, or absent
  (ML-Agents silently allows every action on a wrong length); rewards, group rewards and
  observations finite;
* side-channel frames and stats messages parsed with every length checked; a stat that is not
  finite is dropped with a warning (a scene's statistic is no reason to stop its training).
"""
from __future__ import annotations

import io
import logging
import math
import struct
import uuid
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from unityagents.exception import UnityMessageException, UnityObservationException
from unityagents.wire.base import (
    MAX_AGENTS,
    MAX_BRAIN_SIZE,
    MAX_CAMERA_SIDE,
    PNG_SIGNATURE,
    STATS_AGGREGATIONS,
    png_size,
)
from unityagents.wire.protos import communicator_objects_pb2 as pb

logger = logging.getLogger("unityagents")

#: Channels a camera may have (a stack of 21 RGB frames).
MAX_CHANNELS = 64
#: Behaviours one environment may announce.
MAX_BEHAVIOURS = 1024
#: Discrete branches one behaviour may declare.
MAX_BRANCHES = 1024
_STATUS_OK = 200

Spec = Tuple[int, Tuple[int, ...], Tuple[Tuple[int, ...], ...]]  # continuous, branches, observation shapes


def bad(text: str, log_path: Optional[str], *, brain: Optional[str] = None, agent: Any = None,
        field: Optional[str] = None, expected: Any = None, received: Any = None,
        kind: type = UnityMessageException) -> UnityMessageException:
    """The exception for one wrong field: ``Behaviour 'X', agent 3, field f: <text> (expected ..., received ...)``."""
    where = ", ".join(p for p in (f"behaviour {brain!r}" if brain is not None else "",
                                  f"agent {agent}" if agent is not None else "",
                                  f"field {field}" if field else "") if p)
    shown = str(received)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    message = (f"The environment sent a wrong message ({where}): {text} Expected {expected}; received {shown}. "
               "This is a bug of the scene or of a plugin of the build (a sensor, a side channel); the "
               "environment is treated as failed.")
    return kind(message, log_path, brain=brain, agent=agent, field=field, expected=None if expected is None
                else str(expected), received=shown)


# ------------------------------------------------------------------------------- envelope
def check_status(message: "pb.UnityMessageProto", what: str, log_path: Optional[str]) -> None:
    """Status 400 is Unity closing; any other status but 200 is a message no Unity sends."""
    status = message.header.status
    if status == _STATUS_OK:
        return
    if status == 400:
        from unityagents.exception import UnityCommunicatorStoppedException

        raise UnityCommunicatorStoppedException(
            f"The environment closed the connection (status 400 where {what} with status 200 was expected): "
            "it is quitting, or its Editor left play mode.", log_path)
    raise bad(f"the message has status {status} where {what} was expected.", log_path,
              field="header.status", expected="200 (or 400 when Unity quits)", received=status)


def rl_output_of(message: "pb.UnityMessageProto", log_path: Optional[str]) -> "pb.UnityRLOutputProto":
    """The ``rl_output`` of an answer to a reset or step; refused when absent."""
    if not message.HasField("unity_output"):
        raise bad("the answer to a reset or step has no output: no agent could ever be heard again.", log_path,
                  field="unity_output", expected="unity_output.rl_output with the agents' infos",
                  received="a message with only a header")
    if not message.unity_output.HasField("rl_output"):
        raise bad("the output has no rl_output.", log_path, field="unity_output.rl_output",
                  expected="unity_output.rl_output with the agents' infos", received="an output without it")
    rl = message.unity_output.rl_output
    if len(rl.agentInfos) > MAX_BEHAVIOURS:
        raise bad("too many behaviours.", log_path, field="rl_output.agentInfos",
                  expected=f"at most {MAX_BEHAVIOURS} behaviours", received=f"{len(rl.agentInfos)} behaviours")
    return rl


# ------------------------------------------------------------------------------- specs
def action_sizes(name: str, params: "pb.BrainParametersProto", log_path: Optional[str]) -> Tuple[int, List[int]]:
    """(continuous actions, discrete branch sizes) of an announcement, within the caps."""
    spec = params.action_spec
    if spec.num_continuous_actions == 0 and spec.num_discrete_actions == 0:  # the pre-hybrid fields
        sizes = list(params.vector_action_size_deprecated)
        if params.vector_action_space_type_deprecated == pb.continuous:
            if len(sizes) != 1:
                raise bad("a continuous behaviour declares its size in the deprecated field.", log_path, brain=name,
                          field="vector_action_size_deprecated", expected="one size", received=sizes[:8])
            continuous, branches = int(sizes[0]), []
        else:
            continuous, branches = 0, [int(b) for b in sizes]
    else:
        continuous, branches = int(spec.num_continuous_actions), [int(b) for b in spec.discrete_branch_sizes]
        if len(branches) != spec.num_discrete_actions:
            raise bad("the number of discrete branches disagrees with their sizes.", log_path, brain=name,
                      field="action_spec.discrete_branch_sizes",
                      expected=f"{spec.num_discrete_actions} sizes (num_discrete_actions)",
                      received=f"{len(branches)} sizes {branches[:8]}")
    if not 0 <= continuous <= MAX_BRAIN_SIZE or len(branches) > MAX_BRANCHES or not all(
            1 <= b <= MAX_BRAIN_SIZE for b in branches):
        raise bad("the action sizes are out of range.", log_path, brain=name, field="action_spec",
                  expected=f"0 to {MAX_BRAIN_SIZE} continuous actions, at most {MAX_BRANCHES} branches of 1 to "
                  f"{MAX_BRAIN_SIZE} actions", received=f"{continuous} continuous, branches {branches[:8]}")
    return continuous, branches


def observation_shapes(name: str, first: "pb.AgentInfoProto", log_path: Optional[str]) -> List[Tuple[int, ...]]:
    """The observation shapes of a behaviour's first agent: vectors (rank 1-2) and cameras (rank 3)."""
    if len(first.observations) > MAX_CHANNELS * 16:
        raise bad("too many observations.", log_path, brain=name, agent=first.id, field="observations",
                  expected=f"at most {MAX_CHANNELS * 16} sensors", received=len(first.observations))
    shapes = []
    for k, obs in enumerate(first.observations):
        shape = tuple(int(d) for d in obs.shape)
        camera = len(shape) == 3
        side = MAX_CAMERA_SIDE if camera else MAX_BRAIN_SIZE
        if not 1 <= len(shape) <= 3 or not all(1 <= d <= side for d in shape) or (
                camera and min(shape[0], shape[2]) > MAX_CHANNELS) or (
                not camera and int(np.prod(shape)) > MAX_BRAIN_SIZE):
            raise bad("an observation has an impossible shape.", log_path, brain=name, agent=first.id,
                      field=f"observations[{k}].shape", received=shape[:4],
                      expected=f"a vector of 1 to {MAX_BRAIN_SIZE} values or a camera of at most "
                      f"{MAX_CAMERA_SIDE}x{MAX_CAMERA_SIDE} with at most {MAX_CHANNELS} channels")
        shapes.append(shape)
    return shapes


def spec_of(name: str, params: "pb.BrainParametersProto", first: "pb.AgentInfoProto",
            log_path: Optional[str]) -> Spec:
    continuous, branches = action_sizes(name, params, log_path)
    return continuous, tuple(branches), tuple(observation_shapes(name, first, log_path))


def check_same_spec(name: str, known: Spec, announced: Spec, log_path: Optional[str]) -> None:
    """A behaviour's spec is fixed for the run: the trainers' networks were built for it."""
    if known == announced:
        return
    field = "action_spec" if known[:2] != announced[:2] else "observations"

    def show(s: Spec) -> str:
        acts = f"discrete branches {list(s[1])}" if s[1] else f"{s[0]} continuous actions"
        return f"{acts}, observations {[list(x) for x in s[2]]}"

    raise bad("the behaviour was announced again with another spec mid-run; its trainer was built for the "
              "first one.", log_path, brain=name, field=field, expected=show(known), received=show(announced))


# ------------------------------------------------------------------------------- agents
def check_agents(name: str, infos: Sequence["pb.AgentInfoProto"], log_path: Optional[str]) -> None:
    """At most MAX_AGENTS infos, ids unique except for one done + one deciding info of an agent."""
    if len(infos) > MAX_AGENTS:
        raise bad("too many agent infos in one message.", log_path, brain=name, field="agentInfos",
                  expected=f"at most {MAX_AGENTS}", received=len(infos))
    seen = {True: set(), False: set()}
    for info in infos:
        ids = seen[bool(info.done)]
        if info.id in ids:
            raise bad("the same agent sent two infos of the same kind in one step.", log_path, brain=name,
                      agent=info.id, field="id", expected="distinct ids, one decision request and at most one "
                      "episode end per agent", received=f"id {info.id} twice with done={bool(info.done)}")
        ids.add(info.id)


def check_mask(name: str, info: "pb.AgentInfoProto", total: int, log_path: Optional[str]) -> None:
    """A mask is absent or has exactly one entry per discrete action (the sum of the branch sizes)."""
    n = len(info.action_mask)
    if n and n != total:
        raise bad("the action mask does not fit the behaviour's discrete actions.", log_path, brain=name,
                  agent=info.id, field="action_mask",
                  expected=f"{total} entries (the sum of the branch sizes) or none" if total
                  else "no mask (the behaviour has continuous actions)", received=f"{n} entries")


def check_finite(brain: str, field: str, values: np.ndarray, log_path: Optional[str],
                 agents: Optional[Sequence[int]] = None) -> None:
    """Non-finite values from the environment are its error: refuse them before a trainer sees them."""
    values = np.asarray(values)
    if not values.size:
        return
    finite = np.isfinite(values)
    if finite.all():
        return
    k = int(np.argmin(finite.ravel()))
    agent = None
    if agents is not None and values.ndim >= 1 and len(agents) == values.shape[0]:
        agent = agents[np.unravel_index(k, values.shape)[0]]
    raise bad("NaN or infinity from a scene is the environment's error: check its sensors and reward code.",
              log_path, brain=brain, agent=agent, field=field, expected="finite numbers",
              received=f"{values.ravel()[k]} (flat index {k})")


# ------------------------------------------------------------------------------- side channels
def parse_side_channels(data: bytes, log_path: Optional[str]) -> List[Tuple[uuid.UUID, bytes]]:
    """Split Unity's ``side_channel`` bytes into (channel, payload) frames, every length checked."""
    frames = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < 20:
            raise bad("a side-channel frame is truncated.", log_path, field="rl_output.side_channel",
                      expected=f"a 20-byte header (16-byte channel id + int32 length) at offset {offset}",
                      received=f"{len(data) - offset} bytes")
        channel = uuid.UUID(bytes_le=bytes(data[offset:offset + 16]))
        (length,) = struct.unpack_from("<i", data, offset + 16)
        offset += 20
        if length < 0 or offset + length > len(data):
            raise bad(f"a side-channel message of channel {channel} is truncated.", log_path,
                      field="rl_output.side_channel", expected=f"{len(data) - offset} bytes or fewer (what remains)",
                      received=f"a header saying {length} bytes")
        frames.append((channel, bytes(data[offset:offset + length])))
        offset += length
    return frames


def parse_stat(payload: bytes, log_path: Optional[str]) -> Optional[Tuple[str, float, str]]:
    """A stats message (string key, float32 value, int32 aggregation); None for a non-finite value."""
    def short(why: str) -> UnityMessageException:
        return bad(f"a stats message is malformed: {why}.", log_path, field="side_channel (stats)",
                   expected="an int32 key length, an ASCII key, a float32 value and an int32 aggregation",
                   received=f"{len(payload)} bytes")

    if len(payload) < 4:
        raise short("no key length")
    (n,) = struct.unpack_from("<i", payload, 0)
    if n < 0 or 4 + n + 8 > len(payload):
        raise short(f"its key length is {n}")
    try:
        key = payload[4:4 + n].decode("ascii")
    except UnicodeDecodeError:
        raise short("its key is not ASCII") from None
    value, method = struct.unpack_from("<fi", payload, 4 + n)
    if not math.isfinite(value):
        logger.warning("The environment sent the stat %r with the value %s; it is dropped (stats must be finite).",
                       key, value)
        return None
    if not 0 <= method < len(STATS_AGGREGATIONS):
        raise short(f"its aggregation is {method} (0 average, 1 most recent, 2 sum, 3 histogram)")
    return key, float(value), STATS_AGGREGATIONS[method]


# ------------------------------------------------------------------------------- cameras
def split_pngs(data: bytes) -> List[bytes]:
    """The PNG files of a concatenation, found by walking each file's chunks to its IEND."""
    images, offset = [], 0
    while offset < len(data):
        if data[offset:offset + 8] != PNG_SIGNATURE:
            raise ValueError(f"no PNG signature at byte {offset} (found {bytes(data[offset:offset + 8])!r})")
        pos = offset + 8
        while True:
            if pos + 8 > len(data):
                raise ValueError("the PNG ends before its IEND chunk")
            (length,) = struct.unpack_from(">I", data, pos)
            kind = data[pos + 4:pos + 8]
            pos += 12 + length
            if kind == b"IEND":
                break
        if pos > len(data):
            raise ValueError("the PNG ends inside its IEND chunk")
        images.append(bytes(data[offset:pos]))
        offset = pos
        if len(images) > MAX_CHANNELS:
            raise ValueError(f"more than {MAX_CHANNELS} images in one observation")
    return images


def decode_png_observation(data: bytes, hwc: Tuple[int, int, int], mapping: Sequence[int]) -> np.ndarray:
    """Concatenated PNGs → float ``[H, W, C]`` in 0..1, with ML-Agents' channel rules (one PNG per 3
    channels, grey when 1).

    Raises ``ValueError`` with the reason when the images do not decode or do not fit ``hwc``.
    """
    from PIL import Image

    planes = []
    for png in split_pngs(data):
        size = png_size(png)  # from the IHDR chunk: a frame of the wrong size is never decoded
        if size != (hwc[1], hwc[0]):
            raise ValueError(f"an image's PNG header says {size[0]}x{size[1]} (refused before decoding), "
                             f"expected {hwc[1]}x{hwc[0]}" if size else "an image has no PNG IHDR header")
        with Image.open(io.BytesIO(png)) as img:
            if img.mode not in ("L", "RGB", "RGBA"):
                img = img.convert("RGB")
            pixels = np.asarray(img, dtype=np.float32) / 255.0
        planes.append(pixels[:, :, None] if pixels.ndim == 2 else pixels)
    if not planes:
        raise ValueError("no image in the compressed data")
    height, width, channels = hwc
    if any(p.shape[:2] != (height, width) for p in planes):
        raise ValueError(f"an image is {planes[0].shape[1]}x{planes[0].shape[0]}, expected {width}x{height}")
    if mapping:
        stacked = np.concatenate(planes, axis=2)
        if len(mapping) != stacked.shape[2]:
            raise ValueError(f"the channel mapping has {len(mapping)} entries for {stacked.shape[2]} decoded channels")
        used = sorted({m for m in mapping if m >= 0})
        if used != list(range(len(used))) or len(used) != channels:
            raise ValueError(f"the channel mapping {list(mapping)} does not map onto channels 0..{channels - 1}")
        out = np.zeros((height, width, channels), np.float32)
        counts = np.zeros(channels, np.float32)
        for i, target in enumerate(mapping):
            if target >= 0:
                out[:, :, target] += stacked[:, :, i]
                counts[target] += 1
        return out / counts
    if channels == 1:  # a camera sends RGB even for grayscale: average the first image
        return planes[0][:, :, :3].mean(axis=2, keepdims=True)
    stacked = np.concatenate(planes, axis=2)
    if stacked.shape[2] < channels:
        raise ValueError(f"decoded {stacked.shape[2]} channels, expected {channels}")
    return stacked[:, :, :channels]


def observation_error(text: str, log_path: Optional[str], brain: str, agent: int, k: int, expected: Any,
                      received: Any, field: str = "") -> UnityObservationException:
    """``bad`` for observation ``k`` of an agent (a ``UnityObservationException``)."""
    return bad(text, log_path, brain=brain, agent=agent, field=f"observations[{k}]{field}", expected=expected,
               received=received, kind=UnityObservationException)
