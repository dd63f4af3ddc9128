"""The gRPC server that Unity calls: one unary ``Exchange`` RPC, its calls handed to the trainer's thread.

Unity is the gRPC client and calls ``/communicator_objects.UnityToExternalProto/Exchange`` once per
message it sends; the reply to each call is whatever the trainer sends next. ``ExchangeServer``
queues each call's request bytes for the trainer's thread (``next_call``) and blocks the gRPC
worker until the trainer answers it (``answer``), so that a malformed message is parsed, and
raises, in the trainer, not in a worker thread. It listens on 127.0.0.1 only.
"""
from __future__ import annotations

import queue
import socket
import threading
from concurrent import futures
from typing import Any, Optional

from unityagents.exception import UnityEnvironmentException
from unityagents.wire.base import port_in_use

METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
SERVICE, RPC = "communicator_objects.UnityToExternalProto", "Exchange"
#: The largest message an environment may send (ML-Agents' trainer: 532,000,000 bytes).
MAX_MESSAGE_BYTES = 532_000_000


class _Call:
    """One pending ``Exchange`` call: the request bytes and where its reply goes."""

    __slots__ = ("request", "_reply", "_answered")

    def __init__(self, request: bytes):
        self.request = request
        self._reply: "queue.SimpleQueue[bytes]" = queue.SimpleQueue()
        self._answered = False

    def answer(self, reply: bytes) -> None:
        if not self._answered:
            self._answered = True
            self._reply.put(reply)

    def wait(self, closed: threading.Event, bye: bytes) -> bytes:
        """The reply, or ``bye`` once the communicator is closed (a worker thread never hangs:
        interpreter exit joins the pool's threads)."""
        while True:
            try:
                return self._reply.get(timeout=0.5)
            except queue.Empty:
                if closed.is_set():
                    return bye



class ExchangeServer:
    """The gRPC server of one environment and the call of Unity's that waits for our reply.

    :param port: listened on at 127.0.0.1 only; a port in use is refused before anything is launched.
    :param worker_id: only to say, when the port is in use, which base port and worker id gave it.
    :param bye: the reply that tells Unity to quit (status 400), given to every call once closed.
    """

    def __init__(self, port: int, worker_id: int, bye: bytes):
        import grpc  # only a gRPC environment needs grpcio

        self._bye = bye
        self._calls: "queue.SimpleQueue[_Call]" = queue.SimpleQueue()
        self._pending: Optional[_Call] = None
        self._closing = threading.Event()
        self._probe_port(port, worker_id)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="unityagents-grpc"),
            # A cap on one message of the environment (the figure ML-Agents' own trainer uses): a
            # larger one is refused by gRPC itself instead of being buffered whole.
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.max_send_message_length", -1)],
        )
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            RPC: grpc.unary_unary_rpc_method_handler(self._exchange)})  # raw bytes both ways
        self._server.add_generic_rpc_handlers((handler,))
        try:
            bound = self._server.add_insecure_port(f"127.0.0.1:{port}")
        except RuntimeError:
            bound = 0
        if bound != port:
            self._server.stop(None)
            raise port_in_use(port, worker_id, "gRPC could not bind it")
        self._server.start()

    def _probe_port(self, port: int, worker_id: int) -> None:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed run's TIME_WAIT is no owner
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise port_in_use(port, worker_id, e.strerror or str(e)) from None
        finally:
            probe.close()

    def _exchange(self, request: bytes, context: Any) -> bytes:
        """gRPC worker thread: hand the call to the trainer's thread, block until it answers."""
        if self._closing.is_set():
            return self._bye
        call = _Call(request)
        self._calls.put(call)
        return call.wait(self._closing, self._bye)


    def next_call(self, timeout: float) -> bytes:
        """The request bytes of Unity's next call, which becomes the pending one (``queue.Empty``
        after ``timeout`` seconds)."""
        call = self._calls.get(timeout=timeout)
        self._pending = call
        return call.request

    def answer(self, reply: bytes) -> None:
        """Reply to the pending call."""
        call, self._pending = self._pending, None
        if call is None:
            raise UnityEnvironmentException("No call of the environment is pending; receive() its answer first.")
        call.answer(reply)

    def close(self) -> None:
        """Answer every call with the bye (Unity quits), then stop the server."""
        self._closing.set()
        data = self._bye
        if self._pending is not None:
            self._pending.answer(data)
            self._pending = None
        while True:  # calls that arrived but were never read
            try:
                self._calls.get_nowait().answer(data)
            except queue.Empty:
                break
        self._server.stop(grace=1.0).wait(5.0)
