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
import collections
import dataclasses
import enum
import logging
import struct
import uuid
from typing import DefaultDict, Dict, Iterable, List, Mapping, Optional, Tuple

from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnitySideChannelException,
)

logger = logging.getLogger("unityagents")

__all__ = ["SideChannel", "IncomingMessage", "OutgoingMessage", "SideChannelManager", "BUILT_IN_CHANNELS",
           "EngineConfig", "EngineConfigurationChannel", "EnvironmentParametersChannel", "FloatPropertiesChannel",
           "RawBytesChannel", "StatsSideChannel", "StatsAggregationMethod", "DefaultTrainingAnalyticsSideChannel",
           "check_side_channels"]

#: The ids of the channels the gRPC communicator speaks itself (their values as ML-Agents defines them).
ENGINE_CONFIGURATION_CHANNEL = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
ENVIRONMENT_PARAMETERS_CHANNEL = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS_CHANNEL = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")
#: ML-Agents' other well-known ids: the float-properties channel's default, the training-analytics channel.
FLOAT_PROPERTIES_CHANNEL = uuid.UUID("60ccf7d0-4f7e-11ea-b238-784f4387d1f7")
TRAINING_ANALYTICS_CHANNEL = uuid.UUID("b664a4a9-d86f-5a5f-95cb-e8353a7e8356")

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

    def write_bool(self, b: bool) -> None:
        self.buffer += struct.pack("<?", bool(b))

    def write_int32(self, i: int) -> None:
        self.buffer += struct.pack("<i", int(i))

    def write_float32(self, f: float) -> None:
        self.buffer += struct.pack("<f", float(f))

    def write_float32_list(self, float_list: Iterable[float]) -> None:
        values = [float(v) for v in float_list]
        self.buffer += struct.pack(f"<i{len(values)}f", len(values), *values)

    def write_string(self, s: str) -> None:
        data = str(s).encode("utf-8")
        self.buffer += struct.pack("<i", len(data)) + data

    def set_raw_bytes(self, buffer: bytes) -> None:
        """Replace the whole message with ``buffer`` (a channel with its own encoding); anything
        written before is lost, which a warning says."""
        if self.buffer:
            logger.warning("OutgoingMessage.set_raw_bytes replaces the %d bytes already written.", len(self.buffer))
        self.buffer = bytearray(buffer)


class IncomingMessage:
    """A message Unity sent, read front to back; a read past its end returns ``default``."""

    def __init__(self, buffer: bytes, offset: int = 0) -> None:
        self.buffer = bytes(buffer)
        self.offset = int(offset)

    def _unpack(self, layout: str, default):
        size = struct.calcsize(layout)
        if self.offset + size > len(self.buffer):
            self.offset = len(self.buffer)
            return default
        (value,) = struct.unpack_from(layout, self.buffer, self.offset)
        self.offset += size
        return value

    def read_bool(self, default_value: bool = False) -> bool:
        return bool(self._unpack("<?", default_value))

    def read_int32(self, default_value: int = 0) -> int:
        return int(self._unpack("<i", default_value))

    def read_float32(self, default_value: float = 0.0) -> float:
        return float(self._unpack("<f", default_value))

    def read_float32_list(self, default_value: Optional[List[float]] = None) -> List[float]:
        count = self._unpack("<i", None)
        if count is None or count < 0 or self.offset + 4 * count > len(self.buffer):
            self.offset = len(self.buffer)
            return [] if default_value is None else list(default_value)
        values = struct.unpack_from(f"<{count}f", self.buffer, self.offset)
        self.offset += 4 * count
        return [float(v) for v in values]

    def read_string(self, default_value: str = "") -> str:
        size = self._unpack("<i", None)
        if size is None or size < 0 or self.offset + size > len(self.buffer):
            self.offset = len(self.buffer)
            return default_value
        text = self.buffer[self.offset:self.offset + size].decode("utf-8", errors="replace")
        self.offset += size
        return text

    def get_raw_bytes(self) -> bytearray:
        """A copy of the whole message, whatever has been read of it."""
        return bytearray(self.buffer)


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
        #: The payloads queued for the next step or reset, oldest first (mlagents_envs' name).
        self.message_queue: List[bytearray] = []

    @property
    def channel_id(self) -> uuid.UUID:
        return self._channel_id

    @abc.abstractmethod
    def on_message_received(self, msg: IncomingMessage) -> None:
        """Called with each message Unity sent on this channel, in order, as its step is received."""

    def queue_message_to_send(self, msg: OutgoingMessage) -> None:
        """Send ``msg`` (its bytes as they are now) with the next step or reset."""
        self.message_queue.append(bytearray(msg.buffer))

    def take_queued(self) -> List[bytes]:
        """The queued payloads, oldest first; the queue is then empty (the communicator sends them)."""
        queued, self.message_queue = self.message_queue, []
        return [bytes(m) for m in queued]


def check_side_channels(channels: Iterable[SideChannel]) -> Dict[uuid.UUID, SideChannel]:
    """The user's channels by id, refusing non-channels, built-in ids and ids given twice."""
    by_id: Dict[uuid.UUID, SideChannel] = {}
    for channel in channels:
        if not isinstance(channel, SideChannel):
            raise UnityEnvironmentException(
                f"side_channels takes unityagents.wire.side_channels.SideChannel instances, got "
                f"{type(channel).__name__} {channel!r}; subclass SideChannel and pass an instance.")
        cid = channel.channel_id
        if cid in BUILT_IN_CHANNELS and getattr(type(channel), "ID", None) != cid:
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
class _WrittenByPythonOnly(UnitySideChannelException, UnityCommunicationException):
    """A message arrived on a channel that only Python writes to (caught as either parent, as
    mlagents_envs raises a communication error there)."""


class _BuiltInChannel(SideChannel):
    """A channel with a built-in id that a script creates itself (as with mlagents_envs) and passes in
    ``side_channels``: its messages travel with the next reset or step like any user channel's."""

    ID: uuid.UUID

    def __init__(self) -> None:
        super().__init__(self.ID)

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise _WrittenByPythonOnly(
            f"The environment wrote to the {type(self).__name__} ({self.ID}), which only Python writes to; "
            "check the scene's side channels.")


class EngineConfigurationChannel(_BuiltInChannel):
    """The engine settings (resolution, quality, time scale, frame rates), sent with the next reset or step.

    The environment's own ``engine_config`` goes first; settings queued here follow it, so they win.
    """

    ID = ENGINE_CONFIGURATION_CHANNEL

    class ConfigurationType(enum.IntEnum):
        """The int32 that opens each message: which setting it carries."""

        SCREEN_RESOLUTION = 0
        QUALITY_LEVEL = 1
        TIME_SCALE = 2
        TARGET_FRAME_RATE = 3
        CAPTURE_FRAME_RATE = 4

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
            self.message_queue.append(bytearray(payload))


class EnvironmentParametersChannel(_BuiltInChannel):
    """Environment parameters (the scene reads them with ``GetWithDefault``), sent with the next reset or step.

    A constant, or a sampler the scene draws from with its own seeded generator at each read.
    """

    ID = ENVIRONMENT_PARAMETERS_CHANNEL

    class EnvironmentDataTypes(enum.IntEnum):
        """The int32 after the key: a constant or a sampler."""

        FLOAT = 0
        SAMPLER = 1

    class SamplerTypes(enum.IntEnum):
        """The int32 after a sampler's seed: its distribution."""

        UNIFORM = 0
        GAUSSIAN = 1
        MULTIRANGEUNIFORM = 2

    def set_float_parameter(self, key: str, value: float) -> None:
        self.message_queue.append(bytearray(float_parameter_payload(key, value)))

    def set_uniform_sampler_parameters(self, key: str, min_value: float, max_value: float, seed: int) -> None:
        self.message_queue.append(bytearray(
            _key(key) + struct.pack("<iiiff", 1, int(seed), 0, float(min_value), float(max_value))))

    def set_gaussian_sampler_parameters(self, key: str, mean: float, st_dev: float, seed: int) -> None:
        self.message_queue.append(bytearray(
            _key(key) + struct.pack("<iiiff", 1, int(seed), 1, float(mean), float(st_dev))))

    def set_multirangeuniform_sampler_parameters(self, key: str, intervals: Iterable[Iterable[float]],
                                                 seed: int) -> None:
        """``intervals``: ``[(min, max), ...]``; the scene picks one by its length, then a value inside it."""
        flat = [float(v) for pair in intervals for v in pair]
        self.message_queue.append(bytearray(_key(key) + struct.pack("<iii", 1, int(seed), 2)
                                            + struct.pack(f"<i{len(flat)}f", len(flat), *flat)))


def _key(key: str) -> bytes:
    try:
        return _string(key)
    except UnicodeEncodeError:
        raise UnitySideChannelException(
            f"The environment parameter name {key!r} is not ASCII; the side channel carries ASCII only.") from None


class FloatPropertiesChannel(SideChannel):
    """Named floats shared both ways: ``set_property`` sends one, a message from the scene updates one.

    :param channel_id: the id the scene's channel registers; by default ML-Agents' float-properties id.
    """

    def __init__(self, channel_id: Optional[uuid.UUID] = None) -> None:
        self._float_properties: Dict[str, float] = {}
        super().__init__(FLOAT_PROPERTIES_CHANNEL if channel_id is None else channel_id)

    def on_message_received(self, msg: IncomingMessage) -> None:
        """A string key, then a float32 value."""
        key = msg.read_string()
        self._float_properties[key] = msg.read_float32()

    def set_property(self, key: str, value: float) -> None:
        """Remember ``key`` = ``value`` here and send it with the next reset or step."""
        self._float_properties[key] = value
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_float32(value)
        self.queue_message_to_send(msg)

    def get_property(self, key: str) -> Optional[float]:
        """The last value set or received for ``key``; None if there is none."""
        return self._float_properties.get(key)

    def list_properties(self) -> List[str]:
        return list(self._float_properties)

    def get_property_dict_copy(self) -> Dict[str, float]:
        return dict(self._float_properties)


class RawBytesChannel(SideChannel):
    """Bytes both ways, unparsed: for a channel whose format the script and the scene agree on.

    :param channel_id: the id the scene's channel registers.
    """

    def __init__(self, channel_id: uuid.UUID) -> None:
        self._received_messages: List[bytearray] = []
        super().__init__(channel_id)

    def on_message_received(self, msg: IncomingMessage) -> None:
        self._received_messages.append(msg.get_raw_bytes())

    def get_and_clear_received_messages(self) -> List[bytearray]:
        """The messages received since the last call, oldest first."""
        received, self._received_messages = self._received_messages, []
        return received

    def send_raw_data(self, data: bytes) -> None:
        """Send ``data`` as one message with the next reset or step."""
        msg = OutgoingMessage()
        msg.set_raw_bytes(data)
        self.queue_message_to_send(msg)


class StatsAggregationMethod(enum.Enum):
    """How the values a scene records for one key within a summary period are combined."""

    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3


#: What ``StatsSideChannel.get_and_reset_stats`` returns: key -> [(value, aggregation), ...].
StatList = List[Tuple[float, StatsAggregationMethod]]
EnvironmentStats = Mapping[str, StatList]


class StatsSideChannel(SideChannel):
    """The stats a scene records (Unity's ``StatsRecorder``): a string key, a float32, an int32 aggregation.

    The environment reads this channel itself (``UnityEnvironment.stats``); pass one in
    ``side_channels`` to collect the same messages here too.
    """

    ID = STATS_CHANNEL

    def __init__(self) -> None:
        super().__init__(STATS_CHANNEL)
        self.stats: DefaultDict[str, StatList] = collections.defaultdict(list)

    def on_message_received(self, msg: IncomingMessage) -> None:
        key = msg.read_string()
        value = msg.read_float32()
        code = msg.read_int32()
        try:
            method = StatsAggregationMethod(code)
        except ValueError:
            raise UnitySideChannelException(
                f"The stats channel ({self.channel_id}) received the stat {key!r} with aggregation {code}; expected "
                f"one of {', '.join(f'{m.value} ({m.name})' for m in StatsAggregationMethod)}. "
                "Check the scene's StatsRecorder calls and the ML-Agents package version.") from None
        self.stats[key].append((value, method))

    def get_and_reset_stats(self) -> EnvironmentStats:
        """The stats received since the last call; the store is then empty."""
        stats, self.stats = self.stats, collections.defaultdict(list)
        return stats


class DefaultTrainingAnalyticsSideChannel(_BuiltInChannel):
    """The training-analytics channel: one message saying which Python side trains (ML-Agents' format).

    The environment does not add it by itself; a script that wants the scene to log its trainer
    passes one and calls ``environment_initialized()``.
    """

    ID = CHANNEL_ID = TRAINING_ANALYTICS_CHANNEL

    def environment_initialized(self) -> None:
        """Queue the ``TrainingEnvironmentInitialized`` message (a protobuf ``Any``)."""
        import sys

        from google.protobuf import any_pb2

        from unityagents.wire.protos import communicator_objects_pb2 as pb

        v = sys.version_info
        init = pb.TrainingEnvironmentInitialized(python_version=f"{v[0]}.{v[1]}.{v[2]}", mlagents_version="Custom",
                                                 mlagents_envs_version="unityagents", torch_version="Unknown",
                                                 torch_device_type="Unknown")
        packed = any_pb2.Any()
        packed.Pack(init)
        msg = OutgoingMessage()
        msg.set_raw_bytes(packed.SerializeToString())
        self.queue_message_to_send(msg)


# ------------------------------------------------------------------------------- the manager
class SideChannelManager:
    """Several channels over one byte stream: the frames Python sends, the frames it receives.

    :param side_channels: the channels, each with its own id (two with one id are refused).
    """

    def __init__(self, side_channels: Optional[Iterable[SideChannel]] = None) -> None:
        self._side_channels_dict: Dict[uuid.UUID, SideChannel] = {}
        for channel in side_channels or ():
            if channel.channel_id in self._side_channels_dict:
                raise UnityEnvironmentException(
                    f"There cannot be two side channels with the same channel id {channel.channel_id} "
                    f"({type(self._side_channels_dict[channel.channel_id]).__name__} and {type(channel).__name__}); "
                    "give each channel its own uuid.")
            self._side_channels_dict[channel.channel_id] = channel

    def process_side_channel_message(self, data: bytes) -> None:
        """Split ``data`` (Unity's side-channel bytes) into frames and hand each to its channel.

        A truncated frame raises ``UnityEnvironmentException``; a frame for no registered channel is
        logged and dropped; a channel that cannot read its message raises ``UnitySideChannelException``
        naming the channel.
        """
        offset = 0
        data = bytes(data)
        while offset < len(data):
            if len(data) - offset < 20:
                raise UnityEnvironmentException(
                    f"A side-channel frame at byte {offset} is truncated: expected a 16-byte channel id and an int32 "
                    f"length, got {len(data) - offset} bytes. Check that the scene's ML-Agents package speaks "
                    "communication API 1.x.")
            channel_id = uuid.UUID(bytes_le=data[offset:offset + 16])
            (length,) = struct.unpack_from("<i", data, offset + 16)
            offset += 20
            if length < 0 or offset + length > len(data):
                raise UnityEnvironmentException(
                    f"The message received by the side channel {channel_id} was unexpectedly short: its header says "
                    f"{length} bytes, {len(data) - offset} remain. Check that the scene writes its side channels "
                    "whole.")
            payload = data[offset:offset + length]
            offset += length
            channel = self._side_channels_dict.get(channel_id)
            if channel is None:
                logger.warning("Unknown side channel data received. Channel type: %s.", channel_id)
                continue
            deliver(channel, payload)

    def generate_side_channel_messages(self) -> bytearray:
        """Every queued message of every channel as frames (id, int32 length, payload); the queues empty."""
        result = bytearray()
        for channel_id, channel in self._side_channels_dict.items():
            for payload in channel.take_queued():
                result += side_channel_frame(channel_id, payload)
        return result


def deliver(channel: SideChannel, payload: bytes) -> None:
    """``channel.on_message_received`` with ``payload``; a message the channel cannot read raises
    ``UnitySideChannelException`` naming the channel (the library's own errors pass as they are)."""
    try:
        channel.on_message_received(IncomingMessage(payload))
    except UnityEnvironmentException:
        raise
    except (struct.error, ValueError, IndexError, UnicodeDecodeError, KeyError) as e:
        raise UnitySideChannelException(
            f"Side channel {type(channel).__name__} ({channel.channel_id}) could not read a message of {len(payload)} "
            f"bytes: {type(e).__name__}: {e}. Check that the scene writes what the channel reads "
            "(the same fields, in the same order).") from e
