"""A user's own side channels over the modern (gRPC) protocol: ML-Agents' ``SideChannel`` model.

A side channel is a stream of messages between the scene and Python beside the observations,
named by a UUID that both ends agree on (the C# class registers the same id with
``SideChannelManager.RegisterSideChannel``). Subclass :class:`SideChannel`, pass instances as
``UnityEnvironment(..., protocol="grpc", side_channels=[...])``; each message Unity sends on the
channel's id reaches ``on_message_received`` as an :class:`IncomingMessage` when the step or
reset that carried it is received, and each :class:`OutgoingMessage` given to
``queue_message_to_send`` travels with the next step or reset.

Message bytes follow ML-Agents' format (C#'s ``BinaryWriter``/``BinaryReader``): little-endian,
no alignment; a bool is one byte, an int32 and a float32 four, a float list an int32 count then
the floats, a string an int32 byte length then its bytes. Strings are written as UTF-8, which is
ASCII for ASCII text; Unity's reader decodes ASCII, so other characters arrive there as '?'.
Reading past the end of a message returns the default value given, as both ML-Agents readers do.

The engine-configuration, environment-parameters and stats channels are built in (their messages
are written here: ``EngineConfig``, ``float_parameter_payload``; the gRPC communicator sends and
reads them); a user channel with one of their ids is refused.
"""
from __future__ import annotations

import abc
import dataclasses
import struct
import uuid
from typing import Dict, Iterable, List, Optional

from unityagents.exception import UnityEnvironmentException, UnitySideChannelException

__all__ = ["SideChannel", "IncomingMessage", "OutgoingMessage", "BUILT_IN_CHANNELS", "EngineConfig",
           "EngineConfigurationChannel", "EnvironmentParametersChannel", "check_side_channels"]

#: The ids of the channels the gRPC communicator speaks itself (their values as ML-Agents defines them).
ENGINE_CONFIGURATION_CHANNEL = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
ENVIRONMENT_PARAMETERS_CHANNEL = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS_CHANNEL = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")

#: Those ids, by name.
BUILT_IN_CHANNELS: Dict[uuid.UUID, str] = {
    ENGINE_CONFIGURATION_CHANNEL: "engine configuration",
    ENVIRONMENT_PARAMETERS_CHANNEL: "environment parameters",
    STATS_CHANNEL: "stats",
}


class OutgoingMessage:
    """A message being written for Unity; ``buffer`` holds its bytes so far."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write_bool(self, value: bool) -> None:
        self.buffer += struct.pack("<?", bool(value))

    def write_int32(self, value: int) -> None:
        self.buffer += struct.pack("<i", int(value))

    def write_float32(self, value: float) -> None:
        self.buffer += struct.pack("<f", float(value))

    def write_float32_list(self, values: Iterable[float]) -> None:
        values = [float(v) for v in values]
        self.buffer += struct.pack(f"<i{len(values)}f", len(values), *values)

    def write_string(self, text: str) -> None:
        data = str(text).encode("utf-8")
        self.buffer += struct.pack("<i", len(data)) + data

    def set_raw_bytes(self, data: bytes) -> None:
        """Replace the whole message with ``data`` (a channel with its own encoding)."""
        self.buffer = bytearray(data)


class IncomingMessage:
    """A message Unity sent, read front to back; a read past its end returns ``default``."""

    def __init__(self, data: bytes) -> None:
        self.buffer = bytes(data)
        self.offset = 0

    def _unpack(self, layout: str, default):
        size = struct.calcsize(layout)
        if self.offset + size > len(self.buffer):
            self.offset = len(self.buffer)
            return default
        (value,) = struct.unpack_from(layout, self.buffer, self.offset)
        self.offset += size
        return value

    def read_bool(self, default: bool = False) -> bool:
        return bool(self._unpack("<?", default))

    def read_int32(self, default: int = 0) -> int:
        return int(self._unpack("<i", default))

    def read_float32(self, default: float = 0.0) -> float:
        return float(self._unpack("<f", default))

    def read_float32_list(self, default: Optional[List[float]] = None) -> List[float]:
        count = self._unpack("<i", None)
        if count is None or count < 0 or self.offset + 4 * count > len(self.buffer):
            self.offset = len(self.buffer)
            return [] if default is None else list(default)
        values = struct.unpack_from(f"<{count}f", self.buffer, self.offset)
        self.offset += 4 * count
        return [float(v) for v in values]

    def read_string(self, default: str = "") -> str:
        size = self._unpack("<i", None)
        if size is None or size < 0 or self.offset + size > len(self.buffer):
            self.offset = len(self.buffer)
            return default
        text = self.buffer[self.offset:self.offset + size].decode("utf-8", errors="replace")
        self.offset += size
        return text

    def get_raw_bytes(self) -> bytes:
        """The whole message, whatever has been read of it."""
        return self.buffer


class SideChannel(abc.ABC):
    """A channel of the user's: a UUID shared with the scene, a handler, a queue of messages to send.

    :param channel_id: the ``uuid.UUID`` the scene's C# channel registers.
    """

    def __init__(self, channel_id: uuid.UUID) -> None:
        if not isinstance(channel_id, uuid.UUID):
            raise UnityEnvironmentException(
                f"A side channel's id must be a uuid.UUID (the Guid the scene registers), got "
                f"{type(channel_id).__name__} {channel_id!r}; write uuid.UUID('...').")
        self._channel_id = channel_id
        self._queued: List[bytes] = []

    @property
    def channel_id(self) -> uuid.UUID:
        return self._channel_id

    @abc.abstractmethod
    def on_message_received(self, msg: IncomingMessage) -> None:
        """Called with each message Unity sent on this channel, in order, as its step is received."""

    def queue_message_to_send(self, msg: OutgoingMessage) -> None:
        """Send ``msg`` (its bytes as they are now) with the next step or reset."""
        self._queued.append(bytes(msg.buffer))

    def take_queued(self) -> List[bytes]:
        """The queued payloads, oldest first; the queue is then empty (the communicator sends them)."""
        queued, self._queued = self._queued, []
        return queued


def check_side_channels(channels: Iterable[SideChannel]) -> Dict[uuid.UUID, SideChannel]:
    """The user's channels by id, refusing non-channels, built-in ids and ids given twice."""
    by_id: Dict[uuid.UUID, SideChannel] = {}
    for channel in channels:
        if not isinstance(channel, SideChannel):
            raise UnityEnvironmentException(
                f"side_channels takes unityagents.wire.side_channels.SideChannel instances, got "
                f"{type(channel).__name__} {channel!r}; subclass SideChannel and pass an instance.")
        cid = channel.channel_id
        if cid in BUILT_IN_CHANNELS and not isinstance(channel, _BuiltInChannel):
            raise UnityEnvironmentException(
                f"Side channel {type(channel).__name__} uses id {cid}, which is the built-in "
                f"{BUILT_IN_CHANNELS[cid]} channel; give your channel its own uuid (uuid.uuid4() once, then "
                "the same value in the scene), or use the environment's own options for that channel.")
        if cid in by_id:
            raise UnityEnvironmentException(
                f"Two side channels share the id {cid} ({type(by_id[cid]).__name__} and "
                f"{type(channel).__name__}); each channel needs its own uuid.")
        by_id[cid] = channel
    return by_id


# ------------------------------------------------------------------------------- built-in channels
@dataclasses.dataclass
class EngineConfig:
    """Engine settings sent through the engine-configuration side channel (ML-Agents' EngineConfigurationChannel).

    Only the settings that are not None are sent, in the channel's order (resolution, quality,
    time scale, target frame rate, capture frame rate). ``width`` and ``height`` go together.
    """

    width: Optional[int] = None
    height: Optional[int] = None
    quality_level: Optional[int] = None
    time_scale: Optional[float] = 20.0
    target_frame_rate: Optional[int] = None
    capture_frame_rate: Optional[int] = None

    @staticmethod
    def default_config() -> "EngineConfig":
        """The settings of mlagents_envs' ``EngineConfig.default_config()``: 80x80, quality 1, time scale
        20, no target frame rate, capture frame rate 60."""
        return EngineConfig(80, 80, 1, 20.0, -1, 60)

    def messages(self) -> List[bytes]:
        """One payload per setting, as ``EngineConfigurationChannel`` reads them."""
        if (self.width is None) != (self.height is None):
            raise UnitySideChannelException(
                f"The engine configuration needs width and height together (got width={self.width}, "
                f"height={self.height}); pass both --width and --height, or neither.")
        out = []
        if self.width is not None:
            out.append(struct.pack("<iii", 0, int(self.width), int(self.height)))
        if self.quality_level is not None:
            out.append(struct.pack("<ii", 1, int(self.quality_level)))
        if self.time_scale is not None:
            out.append(struct.pack("<if", 2, float(self.time_scale)))
        if self.target_frame_rate is not None:
            out.append(struct.pack("<ii", 3, int(self.target_frame_rate)))
        if self.capture_frame_rate is not None:
            out.append(struct.pack("<ii", 4, int(self.capture_frame_rate)))
        return out


def side_channel_frame(channel: uuid.UUID, payload: bytes) -> bytes:
    """One frame: the channel id in .NET ``Guid.ToByteArray`` order, int32 LE length, payload."""
    return channel.bytes_le + struct.pack("<i", len(payload)) + payload


def _string(text: str) -> bytes:
    data = text.encode("ascii")
    return struct.pack("<i", len(data)) + data


def float_parameter_payload(key: str, value: float) -> bytes:
    """An environment-parameters message setting ``key`` to the constant ``value`` (FLOAT = 0)."""
    try:
        return _string(key) + struct.pack("<if", 0, float(value))
    except UnicodeEncodeError:
        raise UnityEnvironmentException(
            f"The environment parameter name {key!r} is not ASCII; the side channel carries ASCII only.") from None



# ------------------------------------------------------------------------------- mlagents_envs' channel classes
class _BuiltInChannel(SideChannel):
    """A channel with a built-in id that a script creates itself (as with mlagents_envs) and passes in
    ``side_channels``: its messages travel with the next reset or step like any user channel's."""

    ID: uuid.UUID

    def __init__(self) -> None:
        super().__init__(self.ID)

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise UnitySideChannelException(
            f"The environment wrote to the {BUILT_IN_CHANNELS[self.ID]} channel ({self.ID}), which only Python "
            "writes to; check the scene's side channels.")


class EngineConfigurationChannel(_BuiltInChannel):
    """The engine settings (resolution, quality, time scale, frame rates), sent with the next reset or step.

    The environment's own ``engine_config`` goes first; settings queued here follow it, so they win.
    """

    ID = ENGINE_CONFIGURATION_CHANNEL

    def set_configuration_parameters(self, width: Optional[int] = None, height: Optional[int] = None,
                                     quality_level: Optional[int] = None, time_scale: Optional[float] = None,
                                     target_frame_rate: Optional[int] = None,
                                     capture_frame_rate: Optional[int] = None) -> None:
        """Queue one message per setting that is not None (``width`` and ``height`` go together)."""
        self.set_configuration(EngineConfig(width, height, quality_level, time_scale, target_frame_rate,
                                            capture_frame_rate))

    def set_configuration(self, config: EngineConfig) -> None:
        """Queue every setting of ``config`` that is not None."""
        for payload in config.messages():
            self._queued.append(payload)


class EnvironmentParametersChannel(_BuiltInChannel):
    """Environment parameters (the scene reads them with ``GetWithDefault``), sent with the next reset or step.

    A constant, or a sampler the scene draws from with its own seeded generator at each read.
    """

    ID = ENVIRONMENT_PARAMETERS_CHANNEL

    def set_float_parameter(self, key: str, value: float) -> None:
        self._queued.append(float_parameter_payload(key, value))

    def set_uniform_sampler_parameters(self, key: str, min_value: float, max_value: float, seed: int) -> None:
        self._queued.append(_key(key) + struct.pack("<iiiff", 1, int(seed), 0, float(min_value), float(max_value)))

    def set_gaussian_sampler_parameters(self, key: str, mean: float, st_dev: float, seed: int) -> None:
        self._queued.append(_key(key) + struct.pack("<iiiff", 1, int(seed), 1, float(mean), float(st_dev)))

    def set_multirangeuniform_sampler_parameters(self, key: str, intervals: Iterable[Iterable[float]],
                                                 seed: int) -> None:
        """``intervals``: ``[(min, max), ...]``; the scene picks one by its length, then a value inside it."""
        flat = [float(v) for pair in intervals for v in pair]
        self._queued.append(_key(key) + struct.pack("<iii", 1, int(seed), 2)
                            + struct.pack(f"<i{len(flat)}f", len(flat), *flat))


def _key(key: str) -> bytes:
    try:
        return _string(key)
    except UnicodeEncodeError:
        raise UnitySideChannelException(
            f"The environment parameter name {key!r} is not ASCII; the side channel carries ASCII only.") from None
