"""A signal taken while the scene waits for the trainer's reply ends the wait in plain Python.

``serve_modern``'s handlers only record SIGINT and SIGTERM and have the call in flight cancelled
(the first call, which polls its future, cancels itself); the client then raises
``KeyboardInterrupt`` outside gRPC's native code, and its goodbye still reaches the trainer.
"""
import os
import signal
import threading
import time
from concurrent import futures

import grpc
import pytest

from academy import grpc_communicator as gc
from unityagents.wire.protos import communicator_objects_pb2 as pb


def serve_exchange(exchange, workers):
    """A trainer's gRPC server on 127.0.0.1 whose Exchange is ``exchange``; the server and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    handler = grpc.method_handlers_generic_handler("communicator_objects.UnityToExternalProto", {
        "Exchange": grpc.unary_unary_rpc_method_handler(
            exchange, request_deserializer=pb.UnityMessageProto.FromString,
            response_serializer=pb.UnityMessageProto.SerializeToString)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


@pytest.fixture
def silent_trainer():
    """A trainer whose Exchange never answers (until the test ends)."""
    release = threading.Event()

    def exchange(request, context):
        release.wait(10)
        return pb.UnityMessageProto()

    server, port = serve_exchange(exchange, workers=2)
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


@pytest.fixture
def trainer_silent_after_first():
    """A trainer that answers the first call at once, then answers nothing but a goodbye (status 400);
    yields its port and the statuses of the calls it received."""
    release, statuses = threading.Event(), []

    def exchange(request, context):
        statuses.append(request.header.status)
        if len(statuses) > 1 and request.header.status != gc._BYE:
            release.wait(10)
        return pb.UnityMessageProto()

    server, port = serve_exchange(exchange, workers=4)
    yield port, statuses
    release.set()
    server.stop(0)


def _wait_interrupted(client, record) -> None:
    hello = pb.UnityMessageProto()
    hello.header.status = gc._OK
    client.exchange(hello)  # answered: the next call is gRPC's blocking one
    gc._signalled.clear()
    timer = threading.Timer(0.3, record)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            client.exchange(hello)
        assert time.monotonic() - started < 5.0  # the trainer never answers this call
    finally:
        timer.cancel()


def test_a_signal_recorded_during_a_blocking_call_cancels_it_and_the_goodbye_still_goes_out(
        trainer_silent_after_first):
    port, statuses = trainer_silent_after_first
    client = gc.GrpcClient(port)
    try:
        _wait_interrupted(client, lambda: gc._record_signal(gc.signal.SIGTERM, None))
        client.say_goodbye()
        assert statuses == [gc._OK, gc._OK, gc._BYE]
    finally:
        gc._signalled.clear()
        client.close()


def test_a_real_sigterm_during_a_blocking_call_ends_it_through_the_handler(trainer_silent_after_first):
    port, _ = trainer_silent_after_first
    client = gc.GrpcClient(port)
    previous = signal.signal(signal.SIGTERM, gc._record_signal)
    try:
        _wait_interrupted(client, lambda: os.kill(os.getpid(), signal.SIGTERM))
    finally:
        signal.signal(signal.SIGTERM, previous)
        gc._signalled.clear()
        client.close()
