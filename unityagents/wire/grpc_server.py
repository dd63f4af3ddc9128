"""The gRPC server that Unity calls: one unary ``Exchange`` RPC, served on the trainer's own thread.

Unity is the gRPC client and calls ``/communicator_objects.UnityToExternalProto/Exchange`` once per
message it sends; the reply to each call is whatever the trainer sends next. ``ExchangeServer``
gives the trainer's thread each call's request bytes (``next_call``) and replies to it when the
trainer answers (``answer``), so that a malformed message is parsed, and raises, in the trainer. It
listens on 127.0.0.1 only.

A lockstep exchange pays gRPC's fixed cost once per step, and on a scene of one agent that cost is
a large part of the step. grpcio's public server spends it in Python on two threads of its own (one
polls grpc core's completion queue, a pool worker runs the handler, and the trainer's thread waits
for the worker): about 250 µs of CPU per call on a two-core machine. So ``ExchangeServer`` runs grpc
core's server through the same binding grpcio's server is written on (``grpc._cython.cygrpc``:
``Server``, ``CompletionQueue``, ``start_server_batch``) and polls its completion queue on the
trainer's thread itself: no thread of its own, no hand-over, about 100 µs of CPU per call (``python
bench/protocol.py`` measures both). Where grpcio is first imported here, core's iomgr listener is
chosen (its experiment ``event_engine_listener`` turned off), which reads and writes the socket on
the thread that polls, as the scene's client does (``academy.grpc_communicator.import_grpc``). A
grpcio whose binding lacks what this needs gets grpcio's public server instead (``PooledCalls``):
the same behaviour, at the public server's cost.
"""
from __future__ import annotations

import os
import queue
import socket
import sys
import threading
import time
from concurrent import futures
from typing import Any, Optional, Tuple

from unityagents.exception import UnityEnvironmentException
from unityagents.wire.base import port_in_use

METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
_METHOD_BYTES = METHOD.encode()
SERVICE, RPC = "communicator_objects.UnityToExternalProto", "Exchange"
#: The largest message an environment may send (ML-Agents' trainer: 532,000,000 bytes).
MAX_MESSAGE_BYTES = 532_000_000
#: grpc core's channel options for the server. A cap on one message of the environment (the figure
#: ML-Agents' own trainer uses): a larger one is refused by gRPC itself instead of being buffered whole.
OPTIONS = (("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
           ("grpc.max_send_message_length", -1))
#: How long ``close`` lets a call that is being answered finish before cancelling it, in seconds.
CLOSE_GRACE = 1.0


def import_grpc() -> Any:
    """grpcio, imported with core's iomgr listener where this process imports it first.

    Core reads ``GRPC_EXPERIMENTS`` once, when grpcio is imported, so the variable is set only around
    that import (nothing else in the process sees it); a user's own setting, or a grpcio another
    library imported first, is left as it is, and the server works with either listener.
    """
    if "grpc" not in sys.modules and "GRPC_EXPERIMENTS" not in os.environ:
        os.environ["GRPC_EXPERIMENTS"] = "-event_engine_listener"
        try:
            import grpc
        finally:
            del os.environ["GRPC_EXPERIMENTS"]
    import grpc
    return grpc


class PolledCalls:
    """grpc core's server, its completion queue polled by the thread that calls ``next_call``.

    Every event of the queue comes back to that thread: a new call (its message is then asked for,
    and the next call requested), a call's message (handed to the trainer), and the completions of
    replies sent, which need nothing more. A call of another method is answered UNIMPLEMENTED; a call
    whose message never arrives whole (the client cancelled it, or it was over the size cap, which
    core answers itself) is dropped, and the wait goes on.
    """

    _NEW, _MESSAGE, _DONE, _SHUTDOWN = "new call", "message", "done", "shutdown"

    def __init__(self, cygrpc: Any, port: int) -> None:
        self._cy = cygrpc
        self._queue = cygrpc.CompletionQueue()
        self._server = cygrpc.Server(OPTIONS, False)
        self._server.register_completion_queue(self._queue)
        self.bound = self._server.add_http2_port(f"127.0.0.1:{port}".encode())
        self._server.start()
        self._closing = self._shut_down = False
        if self.bound == port:
            self._request()

    def _request(self) -> None:
        if not self._closing:  # a server shutting down takes no more calls
            self._server.request_call(self._queue, self._queue, self._NEW)

    def _reply(self, call: Any, reply: Optional[bytes], code: Any = None, details: bytes = b"") -> None:
        cy, flags = self._cy, 0
        operations = [cy.SendInitialMetadataOperation(None, flags),
                      cy.SendStatusFromServerOperation(None, code or cy.StatusCode.ok, details, flags)]
        if reply is not None:
            operations.insert(1, cy.SendMessageOperation(reply, flags))
        call.start_server_batch(operations, self._DONE)

    def _take(self, event: Any) -> Optional[Tuple[Any, bytes]]:
        """Act on one event of the queue; a call and its message once one has arrived whole."""
        tag = event.tag
        if tag == self._NEW:
            if not event.success:  # the server is shutting down
                return None
            call, method = event.call, event.call_details.method
            if method != _METHOD_BYTES:
                self._reply(call, None, self._cy.StatusCode.unimplemented,
                            f"Expected a call of {METHOD}, got one of {method.decode(errors='replace')}: "
                            "this is an ML-Agents trainer, which serves only that method.".encode())
            else:
                call.start_server_batch((self._cy.ReceiveCloseOnServerOperation(0),), self._DONE)
                call.start_server_batch((self._cy.ReceiveMessageOperation(0),), (self._MESSAGE, call))
            self._request()
        elif isinstance(tag, tuple) and tag[0] == self._MESSAGE:
            message = event.batch_operations[0].message() if event.success else None
            if message is not None:
                return tag[1], message
        elif tag == self._SHUTDOWN:
            self._shut_down = True
        return None

    def next_call(self, timeout: float) -> Tuple[Any, bytes]:
        deadline = time.time() + timeout
        while True:
            event = self._queue.poll(deadline)
            if event.completion_type == self._cy.CompletionType.queue_timeout:
                raise queue.Empty
            arrived = self._take(event)
            if arrived is not None:
                return arrived

    def answer(self, call: Any, reply: bytes) -> None:
        self._reply(call, reply)

    def close(self, bye: bytes) -> None:
        """Answer the calls that arrive within ``CLOSE_GRACE`` with ``bye``, then shut the server down."""
        self._closing = True
        self._server.shutdown(self._queue, self._SHUTDOWN)
        grace_ends = time.time() + CLOSE_GRACE
        cancelled = False
        while not self._shut_down and time.time() < grace_ends + 5.0:
            if not cancelled and time.time() >= grace_ends:
                self._server.cancel_all_calls()
                cancelled = True
            event = self._queue.poll(time.time() + 0.1)
            if event.completion_type == self._cy.CompletionType.queue_timeout:
                continue
            arrived = self._take(event)
            if arrived is not None:
                self._reply(arrived[0], bye)
        self._queue.shutdown()


class PooledCalls:
    """grpcio's public server: its pool worker hands each call to the polling thread and waits for the reply."""

    def __init__(self, grpc: Any, port: int) -> None:
        self._calls: "queue.SimpleQueue[Tuple[queue.SimpleQueue, bytes]]" = queue.SimpleQueue()
        self._closing = threading.Event()
        self._bye = b""
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="unityagents-grpc"),
                                   options=list(OPTIONS))
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            RPC: grpc.unary_unary_rpc_method_handler(self._exchange)})  # raw bytes both ways
        self._server.add_generic_rpc_handlers((handler,))
        try:
            self.bound = self._server.add_insecure_port(f"127.0.0.1:{port}")
        except RuntimeError:
            self.bound = 0
        self._server.start()

    def _exchange(self, request: bytes, context: Any) -> bytes:
        """gRPC worker thread: hand the call over, block until it is answered (a worker never hangs once
        closed: interpreter exit joins the pool's threads)."""
        if self._closing.is_set():
            return self._bye
        reply: "queue.SimpleQueue[bytes]" = queue.SimpleQueue()
        self._calls.put((reply, request))
        while True:
            try:
                return reply.get(timeout=0.5)
            except queue.Empty:
                if self._closing.is_set():
                    return self._bye

    def next_call(self, timeout: float) -> Tuple[Any, bytes]:
        return self._calls.get(timeout=timeout)

    def answer(self, call: Any, reply: bytes) -> None:
        call.put(reply)

    def close(self, bye: bytes) -> None:
        self._bye = bye
        self._closing.set()
        while True:  # calls that arrived but were never read
            try:
                self._calls.get_nowait()[0].put(bye)
            except queue.Empty:
                break
        self._server.stop(grace=CLOSE_GRACE).wait(5.0)


def serve(port: int, pooled: bool = False) -> Any:
    """The calls of a server on 127.0.0.1:``port``: ``PolledCalls`` where this grpcio's binding has what
    it needs (or ``PooledCalls`` if ``pooled``)."""
    grpc = import_grpc()
    if not pooled:
        try:
            from grpc._cython import cygrpc
            return PolledCalls(cygrpc, port)
        except (ImportError, AttributeError, TypeError):
            pass  # a grpcio whose private binding differs
    return PooledCalls(grpc, port)


class ExchangeServer:
    """The gRPC server of one environment and the call of Unity's that waits for our reply.

    :param port: listened on at 127.0.0.1 only; a port in use is refused before anything is launched.
    :param worker_id: only to say, when the port is in use, which base port and worker id gave it.
    :param bye: the reply that tells Unity to quit (status 400), given to every call once closed.
    :param pooled: serve through grpcio's public server and its threads instead of polling core's queue.
    """

    def __init__(self, port: int, worker_id: int, bye: bytes, pooled: bool = False):
        self._bye = bye
        self._pending: Optional[Any] = None
        self._closed = False
        self._probe_port(port, worker_id)
        self._calls = serve(port, pooled)
        if self._calls.bound != port:
            self._calls.close(bye)
            raise port_in_use(port, worker_id, "gRPC could not bind it")

    def _probe_port(self, port: int, worker_id: int) -> None:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed run's TIME_WAIT is no owner
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise port_in_use(port, worker_id, e.strerror or str(e)) from None
        finally:
            probe.close()

    def next_call(self, timeout: float) -> bytes:
        """The request bytes of Unity's next call, which becomes the pending one (``queue.Empty``
        after ``timeout`` seconds)."""
        call, request = self._calls.next_call(timeout)
        self._pending = call
        return request

    def answer(self, reply: bytes) -> None:
        """Reply to the pending call."""
        call, self._pending = self._pending, None
        if call is None:
            raise UnityEnvironmentException("No call of the environment is pending; receive() its answer first.")
        self._calls.answer(call, reply)

    def close(self) -> None:
        """Answer the pending call, and every call that arrives while the server stops, with the bye (Unity
        quits), then stop the server."""
        if self._closed:
            return
        self._closed = True
        if self._pending is not None:
            self._calls.answer(self._pending, self._bye)
            self._pending = None
        self._calls.close(self._bye)

    def __del__(self) -> None:
        # A server never closed would keep core's queue and Unity's call alive until the process ends.
        if getattr(self, "_calls", None) is not None:
            try:
                self.close()
            except Exception:  # interpreter shutdown: grpc may be half torn down
                pass
