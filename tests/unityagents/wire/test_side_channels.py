"""A user's side channels (``unityagents/wire/side_channels.py``): the message format, the id checks, and
their frames over gRPC (sent to the academy's gRPC side; received through the communicator's router)."""
from __future__ import annotations

import struct
import uuid

import pytest

from tests.conftest import free_port
from unityagents import UnityEnvironment
from unityagents.base_env import ActionTuple
from unityagents.exception import UnityEnvironmentException
from unityagents.wire.base import Peer
from unityagents.wire.grpc import GrpcCommunicator
from unityagents.wire.side_channels import (
    BUILT_IN_CHANNELS,
    STATS_CHANNEL,
    IncomingMessage,
    OutgoingMessage,
    SideChannel,
    side_channel_frame,
)

USER_ID = uuid.UUID("621f0a70-4f87-11ea-a6bf-784f4387d1f7")


class Recorder(SideChannel):
    """Keeps every message it receives (as a string and a float32 list)."""

    def __init__(self, channel_id: uuid.UUID = USER_ID):
        super().__init__(channel_id)
        self.received = []

    def on_message_received(self, msg: IncomingMessage) -> None:
        self.received.append((msg.read_string(), msg.read_float32_list()))


def test_messages_are_written_and_read_in_mlagents_byte_layout():
    out = OutgoingMessage()
    out.write_string("gravity")
    out.write_float32(9.81)
    out.write_bool(True)
    out.write_int32(-2)
    out.write_float32_list([0.5, 2.0])
    # the environment-parameters example of ML-Agents' format: 07 00 00 00 'gravity' ... c3 f5 1c 41
    assert bytes(out.buffer) == (b"\x07\x00\x00\x00gravity" + bytes.fromhex("c3f51c41") + b"\x01"
                                 + struct.pack("<i", -2) + bytes.fromhex("02000000 0000003f 00000040"))
    msg = IncomingMessage(bytes(out.buffer))
    assert msg.read_string() == "gravity"
    assert msg.read_float32() == pytest.approx(9.81)
    assert msg.read_bool() is True and msg.read_int32() == -2 and msg.read_float32_list() == [0.5, 2.0]
    # past the end: the default, as both of ML-Agents' readers do
    assert (msg.read_int32(7), msg.read_string("x"), msg.read_float32_list([1.0]), msg.read_bool(True)) == (
        7, "x", [1.0], True)


def test_channel_ids_are_uuids_of_their_own():
    # ML-Agents' ids for the channels the communicator speaks itself (the protocol's facts)
    assert {str(c): n for c, n in BUILT_IN_CHANNELS.items()} == {
        "e951342c-4f7e-11ea-b238-784f4387d1f7": "engine configuration",
        "534c891e-810f-11ea-a9d0-822485860400": "environment parameters",
        "a1d8f7b7-cec8-50f9-b78b-d3e165a78520": "stats"}
    with pytest.raises(UnityEnvironmentException, match="must be a uuid.UUID"):
        Recorder(str(USER_ID))
    for built_in, name in BUILT_IN_CHANNELS.items():
        with pytest.raises(UnityEnvironmentException, match=f"built-in {name} channel"):
            UnityEnvironment("3DBall", base_port=free_port(), protocol="grpc", side_channels=[Recorder(built_in)])
    with pytest.raises(UnityEnvironmentException, match="share the id"):
        UnityEnvironment("3DBall", base_port=free_port(), protocol="grpc", side_channels=[Recorder(), Recorder()])
    with pytest.raises(UnityEnvironmentException, match="API-2.*no side channels"):
        UnityEnvironment("3DBall", base_port=free_port(), protocol="api2", side_channels=[Recorder()])


def test_queued_messages_travel_with_the_next_reset_and_step():
    """The academy's gRPC side logs each frame of a channel it does not know, by id: one line per message."""
    channel = Recorder()
    hello = OutgoingMessage()
    hello.write_string("before the first reset")
    channel.queue_message_to_send(hello)
    env = UnityEnvironment("3DBall", base_port=free_port(), seed=0, protocol="grpc", side_channels=[channel])
    try:
        env.reset()
        channel.queue_message_to_send(hello)
        channel.queue_message_to_send(hello)
        zeros = {env.external_brain_names[0]: ActionTuple([[0.0, 0.0]] * 12)}
        env.step_behaviors(zeros)
        env.step_behaviors(zeros)
    finally:
        env.close()
    with open(env.logfile_path) as log:
        assert log.read().count(f"side channel {USER_ID}: not registered here") == 3


def test_frames_on_a_user_channel_reach_it_in_order():
    """Unity's side-channel bytes, as the communicator reads them from a step: the user's frames go to
    its channel, the stats frame still to the statistics, an unknown id nowhere."""
    channel, other = Recorder(), Recorder(uuid.UUID(int=7))

    def message(text: str, values) -> bytes:
        out = OutgoingMessage()
        out.write_string(text)
        out.write_float32_list(values)
        return bytes(out.buffer)

    stat = struct.pack("<i", 4) + b"loss" + struct.pack("<fi", 0.25, 0)
    data = b"".join([side_channel_frame(USER_ID, message("first", [1.0])),
                     side_channel_frame(STATS_CHANNEL, stat),
                     side_channel_frame(uuid.UUID(int=9), b"\x00" * 3),
                     side_channel_frame(USER_ID, message("second", []))])
    communicator = GrpcCommunicator(Peer(5.0), free_port(), 0, side_channels=[channel, other])
    try:
        communicator.stats = {}
        communicator._read_side_channels(data)
        assert channel.received == [("first", [1.0]), ("second", [])] and other.received == []
        assert communicator.stats == {"loss": [(0.25, "average")]}
    finally:
        communicator.close()
