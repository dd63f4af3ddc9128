"""A signal taken while the scene waits for the trainer's reply ends the wait in plain Python.

``serve_modern``'s handlers only record SIGINT and SIGTERM; the client polls its call and, once a
signal is recorded, cancels the call and raises ``KeyboardInterrupt`` outside gRPC's native code.
"""
import threading
import time
from concurrent import futures

import grpc
import pytest

from academy import grpc_communicator as gc
from unityagents.wire.protos import communicator_objects_pb2 as pb


@pytest.fixture
def silent_trainer():
    """A trainer whose Exchange never answers (until the test ends)."""
    release = threading.Event()

    def exchange(request, context):
        release.wait(10)
        return pb.UnityMessageProto()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler("communicator_objects.UnityToExternalProto", {
        "Exchange": grpc.unary_unary_rpc_method_handler(
            exchange, request_deserializer=pb.UnityMessageProto.FromString,
            response_serializer=pb.UnityMessageProto.SerializeToString)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    release.set()
    server.stop(0)


def test_a_recorded_signal_ends_the_wait_for_a_reply_with_keyboard_interrupt(silent_trainer):
    client = gc.GrpcClient(silent_trainer)
    gc._signalled.clear()
    timer = threading.Timer(0.3, gc._record_signal, args=(gc.signal.SIGTERM, None))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            client.exchange(pb.UnityMessageProto())
        assert time.monotonic() - started < 5.0  # not the call's 30 s connect timeout
        with pytest.raises(KeyboardInterrupt):  # a recorded signal stops the next exchange before it is sent
            client.exchange(pb.UnityMessageProto())
    finally:
        gc._signalled.clear()
        client.close()
