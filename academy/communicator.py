"""The Unity side of the API-2 wire (``ExternalCommunicator.cs`` at #166), byte for byte.

Unity is the TCP client: it connects to the trainer, sends the AcademyParameters JSON unframed, then
serves commands in lock-step (facts §1.2-§1.9):

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
"""
from __future__ import annotations

import io
import json
import logging
import socket
import struct

import numpy as np
import orjson

log = logging.getLogger("academy.communicator")

API_NUMBER = "API-2"
_COMMANDS = (b"RESET", b"STEP", b"EXIT")
_RECEIVED = b"RECEIVED"
_PREFIX = struct.Struct("<I")
_RECV_SIZE = 65536


class CommunicatorError(Exception):
    """Base of the errors that end a connected run."""


class ConnectionLost(CommunicatorError):
    """The trainer closed or dropped the connection."""


class ProtocolError(CommunicatorError):
    """The trainer sent bytes that API-2 does not allow at this point."""


class ExternalCommunicator:
    """One connection to a trainer, with exact-size reads and single-write messages."""

    def __init__(self, port: int, host: str = "127.0.0.1", connect_timeout: float = 30.0) -> None:
        self.address = (host, port)
        self.connect_timeout = connect_timeout
        self._sock: socket.socket | None = None
        self._buffer = bytearray()

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

    def _fill(self, what: str) -> None:
        """Append at least one byte from the socket to the buffer, or raise ConnectionLost."""
        try:
            chunk = self._sock.recv(_RECV_SIZE)
        except OSError as exc:
            raise ConnectionLost(f"the trainer connection broke while waiting for {what} ({exc})") from exc
        if not chunk:
            raise ConnectionLost(f"the trainer closed the connection while Unity waited for {what}")
        self._buffer += chunk

    def _read_exact(self, n: int, what: str) -> bytes:
        while len(self._buffer) < n:
            self._fill(what)
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def _read_json(self, what: str) -> dict:
        """Read one unframed JSON object: keep reading until the bytes so far parse as JSON."""
        decoder = json.JSONDecoder()
        while True:
            text = self._buffer.decode("utf-8", errors="replace").lstrip()
            if text:
                if not text.startswith("{"):
                    raise ProtocolError(f"expected {what} (a JSON object), got {text[:60]!r}")
                try:
                    obj, end = decoder.raw_decode(text)
                except json.JSONDecodeError:
                    pass
                else:
                    self._buffer[:] = text[end:].encode("utf-8")
                    return obj
            self._fill(what)

    # --- messages ---------------------------------------------------------------------------------

    def send_academy_parameters(self, parameters: dict) -> None:
        """The first message: AcademyParameters, unframed, indented like Newtonsoft's output."""
        self._send(json.dumps(parameters, indent=2).encode("ascii"))

    def get_command(self) -> str:
        """Block until a whole command arrives; unknown strings come back as-is (the caller quits)."""
        while True:
            buffered = bytes(self._buffer)
            for command in _COMMANDS:
                if buffered.startswith(command):
                    del self._buffer[:len(command)]
                    return command.decode()
            if buffered and not any(c.startswith(buffered) for c in _COMMANDS):
                self._buffer.clear()
                return buffered.decode("ascii", errors="replace")
            self._fill("a command (RESET, STEP or EXIT)")

    def get_reset_config(self) -> tuple[bool, dict]:
        """Answer RESET: send CONFIG_REQUEST, read ``{"train_model": bool, "parameters": {...}}``."""
        self._send(b"CONFIG_REQUEST")
        config = self._read_json("the reset configuration")
        train_model = config.get("train_model", True)
        parameters = config.get("parameters") or {}
        if not isinstance(train_model, bool) or not isinstance(parameters, dict):
            raise ProtocolError('the reset configuration must be {"train_model": bool, "parameters": {...}}, '
                                f"got {config!r}")
        return train_model, parameters

    def get_actions(self) -> dict:
        """Answer STEP: send STEPPING, read the length-prefixed ``{"action", "memory", "value"}``."""
        self._send(b"STEPPING")
        (length,) = _PREFIX.unpack(self._read_exact(4, "the action message's length prefix"))
        payload = self._read_exact(length, f"the {length}-byte action message")
        try:
            message = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"the action message is not valid JSON ({exc}): {payload[:80]!r}") from exc
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
