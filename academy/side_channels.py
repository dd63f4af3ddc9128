"""The side channels of the modern protocol, as the Unity side reads and writes them.

Each call's ``side_channel`` bytes are frames of (channel UUID as little-endian bytes, int32 size,
payload). Python sends the engine configuration and environment parameters; the scene answers
with stats. Written independently of ``unityagents.wire.side_channels``, as a Unity build is.
"""
from __future__ import annotations

import logging
import struct
import uuid

log = logging.getLogger("academy.grpc")

ENGINE_CHANNEL = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
PARAMETERS_CHANNEL = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")
STATS_CHANNEL = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")
_ENGINE_SETTINGS = {0: ("resolution", "<ii"), 1: ("quality level", "<i"), 2: ("time scale", "<f"),
                    3: ("target frame rate", "<i"), 4: ("capture frame rate", "<i")}


class TrainerProtocolError(Exception):
    """The trainer's reply does not follow the protocol."""


def frame(channel: uuid.UUID, payload: bytes) -> bytes:
    """One side-channel frame: the channel's id, the payload's size, the payload."""
    return channel.bytes_le + struct.pack("<i", len(payload)) + payload


def frames(data: bytes) -> list[tuple[uuid.UUID, bytes]]:
    """The ``(channel, payload)`` frames of ``data``; TrainerProtocolError when a frame is cut short."""
    out, at = [], 0
    while at < len(data):
        if at + 20 > len(data):
            raise TrainerProtocolError(f"side-channel bytes end inside a frame header at offset {at}")
        channel = uuid.UUID(bytes_le=bytes(data[at:at + 16]))
        (size,) = struct.unpack_from("<i", data, at + 16)
        at += 20
        if size < 0 or at + size > len(data):
            raise TrainerProtocolError(f"side-channel frame of {channel} claims {size} bytes, {len(data) - at} remain")
        out.append((channel, bytes(data[at:at + size])))
        at += size
    return out


def stat_frame(key: str, value: float, aggregation: int = 0) -> bytes:
    """A stats-channel frame: the stat's name, its value and how the trainer aggregates it (0 = average)."""
    data = key.encode("ascii", errors="replace")
    return frame(STATS_CHANNEL, struct.pack("<i", len(data)) + data + struct.pack("<fi", value, aggregation))


def read_side_channels(data: bytes) -> dict[str, float]:
    """The environment parameters that ``data`` sets, in the order sent (a later value wins).

    The engine configuration is logged and otherwise dropped: a Python scene has no engine to
    apply it to. A parameter that is not a constant, and a channel not registered here, are
    logged and ignored, as Unity does.
    """
    parameters: dict[str, float] = {}
    for channel, payload in frames(data):
        if channel == PARAMETERS_CHANNEL:
            (size,) = struct.unpack_from("<i", payload, 0)
            key = payload[4:4 + size].decode("ascii", errors="replace")
            (kind,) = struct.unpack_from("<i", payload, 4 + size)
            if kind != 0:
                log.warning("environment parameter %r: only constant (FLOAT) values are supported; ignored", key)
                continue
            (value,) = struct.unpack_from("<f", payload, 8 + size)
            parameters[key] = float(value)
        elif channel == ENGINE_CHANNEL:
            (kind,) = struct.unpack_from("<i", payload, 0)
            name, layout = _ENGINE_SETTINGS.get(kind, (f"setting {kind}", ""))
            value = struct.unpack_from(layout, payload, 4) if layout else ()
            log.info("engine configuration: %s %s accepted (a Python scene has no engine to apply it to)",
                     name, value)
        else:
            log.info("side channel %s: not registered here; ignored", channel)
    return parameters
