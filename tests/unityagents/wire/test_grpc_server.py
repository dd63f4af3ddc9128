"""The trainer's gRPC server (``ExchangeServer``) against a plain grpcio client, in both of its modes.

``polled`` is grpc core's completion queue polled on the trainer's thread (what this grpcio gets);
``pooled`` is grpcio's public server, whose worker threads hand each call over. Both must behave alike:
a call read and answered on the caller's thread, a timeout, the bye on close, other methods refused,
oversized and abandoned calls dropped without stopping the server.
"""
import queue
import threading
import time

import grpc
import pytest

from tests.conftest import free_port, grpc_experiments_at_import
from unityagents.wire import grpc_server
from unityagents.wire.grpc_server import METHOD, ExchangeServer, PolledCalls, PooledCalls

MODES = ["polled", "pooled"]


class Client:
    """Unity's side: blocking unary calls, each made on a thread of its own; ``result`` waits for one."""

    def __init__(self, port: int) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)])
        self._results: "queue.SimpleQueue" = queue.SimpleQueue()
        self.replies: dict = {}  # each request's reply, for calls in flight together

    def call(self, request: bytes, method: str = METHOD, timeout: float = 30.0) -> None:
        def run():
            try:
                reply = self.channel.unary_unary(method)(request, timeout=timeout, wait_for_ready=True)
            except grpc.RpcError as e:
                reply = e
            self.replies[request] = reply
            self._results.put(reply)
        threading.Thread(target=run, name="test-client", daemon=True).start()

    def result(self, timeout: float = 30.0):
        return self._results.get(timeout=timeout)

    def close(self) -> None:
        self.channel.close()


@pytest.fixture(params=MODES)
def served(request):
    port = free_port()
    server = ExchangeServer(port, 0, b"bye", pooled=request.param == "pooled")
    client = Client(port)
    yield server, client
    server.close()
    client.close()


def test_this_grpcio_gets_the_polled_server_and_pooled_is_grpcios_own():
    polled, pooled = ExchangeServer(free_port(), 0, b"bye"), ExchangeServer(free_port(), 0, b"bye", pooled=True)
    try:
        assert isinstance(polled._calls, PolledCalls)  # a binding that changed would fall back silently
        assert isinstance(pooled._calls, PooledCalls)
    finally:
        polled.close()
        pooled.close()


def test_each_call_is_read_and_answered_on_the_callers_thread(served):
    server, client = served
    for i in range(3):
        client.call(b"step %d" % i)
        assert server.next_call(30) == b"step %d" % i
        server.answer(b"actions %d" % i)
        assert client.result() == b"actions %d" % i


@pytest.mark.parametrize("pooled, threads", [(False, False), (True, True)])
def test_the_polled_server_runs_no_thread_of_its_own_where_grpcios_hands_calls_over(pooled, threads):
    before = set(threading.enumerate())
    port = free_port()
    server = ExchangeServer(port, 0, b"bye", pooled=pooled)
    client = Client(port)
    try:
        client.call(b"hello")
        assert server.next_call(30) == b"hello"
        server.answer(b"hi")
        assert client.result() == b"hi"
        started = {t.name for t in set(threading.enumerate()) - before if t.name != "test-client"}
        assert bool(started) is threads, started  # grpcio's public server hands calls over from threads of its own
    finally:
        server.close()
        client.close()


def test_calls_in_flight_together_each_get_their_own_reply(served):
    server, client = served
    at_once = 6 if isinstance(server._calls, PolledCalls) else 2  # grpcio's public server: one per pool thread
    requests = [b"call %d" % i for i in range(at_once)]
    for request in requests:
        client.call(request)
    time.sleep(0.3)  # all arrive before the first is read
    taken = [server._calls.next_call(30) for _ in requests]  # below ExchangeServer's one-at-a-time door
    for call, request in reversed(taken):
        server._calls.answer(call, b"re " + request)
    for _ in requests:
        client.result()
    assert client.replies == {r: b"re " + r for r in requests}  # each call got the answer to its own message


def test_with_no_call_the_wait_ends_after_its_timeout(served):
    server, _ = served
    start = time.monotonic()
    with pytest.raises(queue.Empty):
        server.next_call(0.3)
    assert 0.25 <= time.monotonic() - start < 5.0


def test_answering_with_no_call_pending_says_to_receive_first(served):
    from unityagents.exception import UnityEnvironmentException

    server, _ = served
    with pytest.raises(UnityEnvironmentException, match="receive"):
        server.answer(b"x")


def test_close_answers_the_pending_call_with_the_bye(served):
    server, client = served
    client.call(b"step")
    assert server.next_call(30) == b"step"
    server.close()
    assert client.result() == b"bye"


def test_close_answers_a_call_that_arrived_but_was_never_read_with_the_bye(served):
    server, client = served
    client.call(b"first")
    assert server.next_call(30) == b"first"
    server.answer(b"ok")
    assert client.result() == b"ok"
    client.call(b"second")  # arrives while the trainer is busy elsewhere
    time.sleep(0.3)
    server.close()
    assert client.result() == b"bye"


def test_a_call_of_another_method_is_unimplemented_and_the_server_goes_on(served):
    server, client = served
    client.call(b"x", method="/communicator_objects.UnityToExternalProto/Other")
    with pytest.raises(queue.Empty):
        server.next_call(0.5)  # never handed to the trainer
    error = client.result()
    assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.UNIMPLEMENTED
    if isinstance(server._calls, PolledCalls):  # grpcio's public server says only "Method not found!"
        assert "got one of /communicator_objects.UnityToExternalProto/Other" in error.details()
    client.call(b"step")
    assert server.next_call(30) == b"step"
    server.answer(b"ok")
    assert client.result() == b"ok"


@pytest.mark.parametrize("mode", MODES)
def test_a_message_over_the_cap_is_refused_by_grpc_and_the_next_call_is_served(monkeypatch, mode):
    monkeypatch.setattr(grpc_server, "OPTIONS", (("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 1000),
                                                 ("grpc.max_send_message_length", -1)))
    port = free_port()
    server = ExchangeServer(port, 0, b"bye", pooled=mode == "pooled")
    client = Client(port)
    try:
        client.call(b"x" * 5000)
        with pytest.raises(queue.Empty):
            server.next_call(0.5)
        error = client.result()
        assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        client.call(b"y" * 500)
        assert server.next_call(30) == b"y" * 500
        server.answer(b"ok")
        assert client.result() == b"ok"
    finally:
        server.close()
        client.close()


def test_a_call_its_client_gave_up_on_is_answered_without_error_and_the_next_is_served(served):
    server, client = served
    client.call(b"slow", timeout=0.3)
    assert server.next_call(30) == b"slow"
    error = client.result()
    assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    server.answer(b"too late")  # the call is gone: nothing to raise
    client.call(b"next")
    assert server.next_call(30) == b"next"
    server.answer(b"ok")
    assert client.result() == b"ok"


@pytest.mark.parametrize("user_setting, expected", [(None, "-event_engine_listener None"), ("x", "x x")])
def test_the_server_imports_grpc_with_the_polling_threads_io_and_leaves_the_environment_as_it_was(
        user_setting, expected):
    assert grpc_experiments_at_import("unityagents.wire.grpc_server", user_setting) == expected
