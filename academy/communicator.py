"""The Unity side of the API-2 wire (``ExternalCommunicator.cs`` at #166), byte for byte.

Unity is the TCP client: it connects to the trainer, sends the AcademyParameters JSON unframed, then
serves commands in lock-step (the trainer's side is ``unityagents/wire/api2.py``):

* ``RESET`` → ``CONFIG_REQUEST``, read the unframed ``{"train_model", "parameters"}`` JSON, reset,
  send the states;
* ``STEP`` → ``STEPPING``, read the length-prefixed action JSON, step, send the states;
* states: per subscribed brain a length-prefixed compact JSON, acked with ``RECEIVED``, then one
  length-prefixed RGB24 PNG per camera per agent, each acked; then the unframed ``True``/``False``;
* ``EXIT`` or any other string ends the run (C#'s ``default`` case maps unknown strings to QUIT).

Improvements that leave the bytes unchanged: every read is by exact byte count from one receive
buffer (TCP may split or merge segments), the unframed JSON is read until it parses, and every
message goes out in a single ``sendall`` with TCP_NODELAY, so Nagle's algorithm and delayed ACKs
cannot stall a prefix that waits for its payload.

What the trainer sends is distrusted: the unframed reset configuration is scanned once,
in linear time, for the end of its object, with a cap on its size and on its nesting depth; the
action message's length prefix is capped before anything is allocated; and once a message has
begun (its first byte arrived) it must be complete within ``message_timeout`` seconds, a deadline
for the whole message rather than for each ``recv``. The wait for a message to begin has no limit,
as in Unity: a trainer may take its time between messages (a model update, a paused process). A
violation is a ``ProtocolError`` (or ``TrainerTimeout``), never another exception. What the values
mean is checked by the Academy, for every communicator.
"""
from __future__ import annotations

import io
import json
import logging
import re
import socket
import struct
import time

import numpy as np
import orjson

from academy.checks import clip

log = logging.getLogger("academy.communicator")

API_NUMBER = "API-2"
_COMMANDS = (b"RESET", b"STEP", b"EXIT")
_RECEIVED = b"RECEIVED"
_PREFIX = struct.Struct("<I")
_RECV_SIZE = 65536

#: The reset configuration is a few reset parameters (Unity reads it with one 12000-byte receive).
MAX_RESET_CONFIG_BYTES = 1 << 20
#: ``{"parameters": {...}}`` is 2 levels deep; deeper is not a reset configuration.
MAX_JSON_DEPTH = 32
#: Actions, memories and values of every agent: 64 MiB is millions of floats.
MAX_ACTION_BYTES = 64 << 20
#: Seconds a started message may take to arrive in full (not the wait for the next command).
DEFAULT_MESSAGE_TIMEOUT = 60.0
_JSON_SPECIAL = re.compile(rb'["\\{}\[\]]')
_STRING_SPECIAL = re.compile(rb'["\\]')


class CommunicatorError(Exception):
    """Base of the errors that end a connected run."""


class ConnectionLost(CommunicatorError):
    """The trainer closed or dropped the connection."""


class ProtocolError(CommunicatorError):
    """The trainer sent bytes that API-2 does not allow at this point."""


class TrainerTimeout(ConnectionLost):
    """The trainer began a message and did not finish it within ``message_timeout`` seconds."""


class ExternalCommunicator:
    """One connection to a trainer, with exact-size reads and single-write messages."""

    def __init__(self, port: int, host: str = "127.0.0.1", connect_timeout: float = 30.0,
                 message_timeout: float = DEFAULT_MESSAGE_TIMEOUT) -> None:
        self.address = (host, port)
        self.connect_timeout = connect_timeout
        self.message_timeout = message_timeout
        self._sock: socket.socket | None = None
        self._buffer = bytearray()

    @classmethod
    def from_socket(cls, sock: socket.socket,
                    message_timeout: float = DEFAULT_MESSAGE_TIMEOUT) -> "ExternalCommunicator":
        """A communicator over an already connected socket (a socketpair in tests, an inherited fd)."""
        comm = cls(0, message_timeout=message_timeout)
        sock.settimeout(None)
        comm._sock = sock
        return comm

    # --- connection -------------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect to the trainer; the trainer may take its time between commands, so reads block."""
        try:
            sock = socket.create_connection(self.address, timeout=self.connect_timeout)
        except OSError as exc:
            raise ConnectionLost(f"could not connect to the trainer at {self.address[0]}:{self.address[1]} "
                                 f"({exc}); is a trainer listening on that port?") from exc
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    # --- raw I/O ----------------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise ConnectionLost(f"the trainer connection broke while sending ({exc})") from exc

    def _send_framed(self, payload: bytes) -> None:
        self._send(_PREFIX.pack(len(payload)) + payload)

    def _fill(self, what: str, deadline: float | None = None) -> None:
        """Append at least one byte from the socket to the buffer, or raise ConnectionLost.

        ``deadline`` (a ``time.monotonic()`` value) bounds the wait; None waits for as long as the
        trainer takes, which is right only between messages.
        """
        try:
            if deadline is None:
                self._sock.settimeout(None)
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout()
                self._sock.settimeout(remaining)
            chunk = self._sock.recv(_RECV_SIZE)
        except socket.timeout:
            raise TrainerTimeout(f"the trainer began {what} but did not complete it within {self.message_timeout:g} s "
                                 "of its first byte (a stalled or trickling trainer); the whole message must arrive "
                                 "within that time") from None
        except OSError as exc:
            raise ConnectionLost(f"the trainer connection broke while waiting for {what} ({exc})") from exc
        if not chunk:
            raise ConnectionLost(f"the trainer closed the connection while Unity waited for {what}")
        self._buffer += chunk

    def _deadline(self) -> float:
        return time.monotonic() + self.message_timeout

    def _read_exact(self, n: int, what: str, deadline: float | None = None) -> bytes:
        """``n`` bytes, complete by ``deadline``; without one, within ``message_timeout`` of the first byte."""
        if deadline is None and self._buffer:
            deadline = self._deadline()
        while len(self._buffer) < n:
            self._fill(what, deadline)
            if deadline is None:
                deadline = self._deadline()
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def _read_json(self, what: str, limit: int = MAX_RESET_CONFIG_BYTES) -> dict:
        """Read one unframed JSON object, by finding where it ends rather than re-parsing a prefix.

        One pass over the bytes tracks strings, escapes and bracket depth, so the cost is linear in
        the message, a nesting deeper than MAX_JSON_DEPTH or a message longer than ``limit`` is
        refused before it is parsed, and the object is parsed once, when complete.
        """
        deadline = self._deadline() if self._buffer else None
        pos = 0           # next byte of the buffer to scan
        start = None      # where the object's '{' is
        depth = 0
        in_string = False
        while True:
            buf = self._buffer
            if start is None:
                while pos < len(buf) and buf[pos] in b" \t\r\n":
                    pos += 1
                if pos < len(buf):
                    if buf[pos] != 0x7B:  # '{'
                        raise ProtocolError(f"expected {what} (a JSON object), got {bytes(buf[pos:pos + 60])!r}")
                    start, depth = pos, 1
                    pos += 1
            while start is not None and pos < len(buf):
                match = (_STRING_SPECIAL if in_string else _JSON_SPECIAL).search(buf, pos)
                if match is None:
                    pos = len(buf)
                    break
                char, pos = buf[match.start()], match.end()
                if in_string:
                    if char == 0x5C:  # backslash: the next byte is escaped
                        if pos >= len(buf):
                            pos -= 1  # rescan the backslash once the escaped byte arrived
                            break
                        pos += 1
                    else:
                        in_string = False
                elif char == 0x22:
                    in_string = True
                elif char in b"{[":
                    depth += 1
                    if depth > MAX_JSON_DEPTH:
                        raise ProtocolError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels; it must be "
                                            '{"train_model": bool, "parameters": {name: number}}')
                else:
                    depth -= 1
                    if depth == 0:
                        return self._parse_json(what, start, pos)
            if pos > limit:
                raise ProtocolError(f"{what} is longer than {limit} bytes and still not complete; it must be "
                                    '{"train_model": bool, "parameters": {name: number}}')
            self._fill(what, deadline)
            if deadline is None:
                deadline = self._deadline()

    def _parse_json(self, what: str, start: int, end: int) -> dict:
        raw = bytes(self._buffer[start:end])
        del self._buffer[:end]
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ProtocolError(f"{what} is not valid JSON ({exc}): {raw[:80]!r}") from None
        if not isinstance(obj, dict):
            raise ProtocolError(f"expected {what} (a JSON object), got {raw[:80]!r}")
        return obj

    # --- messages ---------------------------------------------------------------------------------

    def send_academy_parameters(self, parameters: dict) -> None:
        """The first message: AcademyParameters, unframed, indented like Newtonsoft's output."""
        self._send(json.dumps(parameters, indent=2).encode("ascii"))

    def get_command(self) -> str:
        """Block until a whole command arrives; unknown strings come back as-is (the caller quits).

        The wait for a command has no deadline (the trainer may be updating its model); once part of
        one arrived, the rest must follow within ``message_timeout``.
        """
        deadline = None
        while True:
            buffered = bytes(self._buffer)
            for command in _COMMANDS:
                if buffered.startswith(command):
                    del self._buffer[:len(command)]
                    return command.decode()
            if buffered and not any(c.startswith(buffered) for c in _COMMANDS):
                self._buffer.clear()
                return buffered[:80].decode("ascii", errors="replace")
            if buffered and deadline is None:
                deadline = self._deadline()
            self._fill("a command (RESET, STEP or EXIT)", deadline)

    def get_reset_config(self) -> tuple[bool, dict]:
        """Answer RESET: send CONFIG_REQUEST, read ``{"train_model": bool, "parameters": {...}}``."""
        self._send(b"CONFIG_REQUEST")
        config = self._read_json("the reset configuration")
        train_model = config.get("train_model", True)
        parameters = config.get("parameters")
        if parameters is None:
            parameters = {}
        if not isinstance(train_model, bool) or not isinstance(parameters, dict):
            raise ProtocolError('the reset configuration must be {"train_model": bool, "parameters": {...}}, '
                                f"got {clip(repr(config))}")
        return train_model, parameters

    def get_actions(self) -> dict:
        """Answer STEP: send STEPPING, read the length-prefixed ``{"action", "memory", "value"}``."""
        self._send(b"STEPPING")
        (length,) = _PREFIX.unpack(self._read_exact(4, "the action message's length prefix"))
        deadline = self._deadline()
        if length > MAX_ACTION_BYTES:
            raise ProtocolError(f"the action message's length prefix says {length} bytes, more than the "
                                f"{MAX_ACTION_BYTES} an action message may have; expected a 4-byte little-endian "
                                'length, then {"action", "memory", "value"} JSON')
        payload = self._read_exact(length, f"the {length}-byte action message", deadline)
        try:
            message = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"the action message is not valid JSON ({exc}): {payload[:80]!r}") from None
        if not isinstance(message, dict):
            raise ProtocolError(f'the action message must be a JSON object with "action", "memory" and '
                                f'"value", got {payload[:80]!r}')
        return message

    def _wait_received(self, after: str) -> None:
        token = self._read_exact(len(_RECEIVED), f"RECEIVED after {after}")
        if token != _RECEIVED:
            raise ProtocolError(f"expected RECEIVED after {after}, got {token!r}")

    def send_brain_info(self, message: dict, frames: list[np.ndarray]) -> None:
        """One brain's state JSON, then its images (camera-major, agent-minor), each acked."""
        brain = message["brain_name"]
        self._send_framed(orjson.dumps(message))  # compact JSON like json.dumps, much faster
        self._wait_received(f"the state of brain {brain!r}")
        for camera, images in enumerate(frames):
            for agent, image in enumerate(images):
                self._send_framed(encode_png(image))
                self._wait_received(f"image {camera} of agent {agent} of brain {brain!r}")

    def send_done(self, done: bool) -> None:
        """The unframed global done flag that ends every reset and step."""
        self._send(b"True" if done else b"False")


def encode_png(image: np.ndarray) -> bytes:
    """An RGB24 PNG of ``image`` (uint8 ``[H, W, 3]``), as ``Texture2D.EncodeToPNG`` would send."""
    from PIL import Image  # Pillow only when a camera brain is served, so `import academy` stays light

    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8), "RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue()
