"""API-2's byte stream: exact-size reads, tokens, framed messages and unframed JSON over one socket.

API-2 mixes length-prefixed messages, fixed tokens (``CONFIG_REQUEST``, ``STEPPING``, ``True``)
and one JSON object without a length prefix (the AcademyParameters), and TCP may split or merge
any of them. ``Connection`` reads all of them through one buffer, with one deadline per message,
and finds the end of the unframed JSON in time linear in its size.
"""
from __future__ import annotations

import re
import socket
import struct
import time
from typing import Any, Optional

import numpy as np
import orjson

from unityagents.exception import UnityCommunicationException, UnityMessageException, UnityProtocolException
from unityagents.wire.base import Peer

#: The first bytes a gRPC client (an HTTP/2 connection) sends: the connection preface.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: The unframed AcademyParameters JSON (a real one is a few kB; 30 MB are read in about a second).
MAX_ACADEMY_PARAMETERS_BYTES = 64 << 20
#: JSON nesting of any message (the AcademyParameters need 4 levels, a state message 2).
MAX_JSON_DEPTH = 64

# The unframed JSON reader finds the end of the top-level value with these: a complete string
# (escapes included), and the tokens that matter for nesting (a lone quote: a string still open).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # the "unrolled loop": fast in sre
_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
#: The content of a string up to its closing quote, a trailing lone backslash or the buffer's end.
_STRING_PART = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)


def _json_end(region: bytes, depth: int) -> int:
    """The index just after the byte of ``region`` at which the nesting ``depth`` returns to zero.

    Called only for the region known to contain it (see ``read_json_unframed``), which starts
    outside any string.
    """
    for m in _JSON_TOKENS.finditer(region):
        token = m.group()
        if token in (b"{", b"["):
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                return m.end()
    raise AssertionError("the region was counted to close the JSON value")  # pragma: no cover


class Connection:
    """Exact-size reads and single-write sends over the accepted socket.

    The protocol mixes framed messages, fixed tokens and unframed JSON, and TCP may split or merge
    any of them, so every read goes through one pending buffer and asks for an exact byte count.
    Each message has one deadline (``timeout`` seconds from when we start reading it), so a peer
    that trickles a byte at a time cannot hold the trainer longer than a silent one.
    """

    def __init__(self, sock: socket.socket, peer: Peer, timeout: float):
        self.sock = sock
        self.peer = peer
        self.timeout = timeout
        self.pending = bytearray()
        self.sock.settimeout(timeout)
        self._sock_timeout = timeout

    def _fill(self, what: str, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            self.peer.raise_timeout(what)
        try:
            # The socket keeps the full timeout (no system call on the hot path, where a message
            # comes in one read); only a message that is late shortens it to what is left.
            want = left if left < self.timeout - 0.01 else self.timeout
            if want != self._sock_timeout:
                self.sock.settimeout(want)
                self._sock_timeout = want
            chunk = self.sock.recv(65536)
        except socket.timeout:
            self.peer.raise_timeout(what)
        except OSError as e:
            self.peer.raise_lost(what, f"the socket failed ({e})")
        if not chunk:
            self.peer.raise_lost(what, "the environment closed the connection")
        self.pending += chunk

    def read_exact(self, n: int, what: str, deadline: Optional[float] = None) -> bytes:
        if len(self.pending) < n:
            if deadline is None:
                deadline = time.monotonic() + self.timeout
            while len(self.pending) < n:
                self._fill(what, deadline)
        data = bytes(self.pending[:n])
        del self.pending[:n]
        return data

    def read_token(self, token: bytes) -> None:
        data = self.read_exact(len(token), token.decode())
        if data != token:
            raise UnityCommunicationException(
                f"Protocol error: expected {token!r} from the environment but received {data!r}. "
                "The environment may not speak API-2 (the action message became length-prefixed in "
                "#166 without a version change): use a build made with the matching ML-Agents version.",
                self.peer.log_path,
            )

    def read_framed(self, what: str, limit: int, brain: Optional[str] = None) -> bytes:
        """One length-prefixed message, refused from its prefix when longer than ``limit``."""
        deadline = time.monotonic() + self.timeout
        (length,) = struct.unpack("<I", self.read_exact(4, what, deadline))
        if length > limit:
            raise UnityMessageException(
                f"Protocol error: {what} announces {length} bytes, but no message of this brain can "
                f"need more than {limit} (expected a length prefix of at most {limit}, received {length}). "
                "The environment sent a corrupt length prefix or is not an API-2 build of these brains.",
                self.peer.log_path, brain=brain, field="length prefix", expected=f"<= {limit}",
                received=length)
        return self.read_exact(length, what, deadline)

    def read_json_unframed(self, what: str, limit: int = MAX_ACADEMY_PARAMETERS_BYTES) -> Any:
        """Read one JSON object that has no length prefix, in time linear in its size.

        Each new region of the buffer is looked at once, in C: its complete strings are cut out
        (``_JSON_STRING``) and its brackets counted (numpy). Only the region in which the nesting
        returns to zero is scanned token by token, to find the value's last byte; the value is then
        parsed once. A string still open at the end of the buffer is followed from where it was
        left (``_STRING_PART``), so that even one huge string is read in linear time.
        """
        deadline = time.monotonic() + self.timeout
        scanned, depth, begun, open_string = 0, 0, False, False
        while True:
            buf = self.pending
            if not begun:
                if bytes(buf[:4]) == HTTP2_PREFACE[:4] and HTTP2_PREFACE.startswith(bytes(buf[:len(HTTP2_PREFACE)])):
                    raise UnityProtocolException(
                        "The environment opened an HTTP/2 (gRPC) connection, but this trainer listens for "
                        "API-2 (expected the AcademyParameters JSON, received the HTTP/2 preface "
                        f"{bytes(buf[:24])!r}): this looks like a modern ML-Agents build; use "
                        "--protocol grpc (UnityEnvironment(..., protocol='grpc')).", self.peer.log_path)
                stripped = buf.lstrip()
                if stripped:
                    if stripped[:1] not in (b"{", b"["):
                        raise UnityCommunicationException(
                            f"Protocol error: expected the {what} as JSON but received {bytes(buf[:80])!r}.",
                            self.peer.log_path)
                    begun, scanned = True, len(buf) - len(stripped)
            if open_string:  # follow the string still open at ``scanned`` to its closing quote
                scanned = _STRING_PART.match(buf, scanned).end()
                if scanned < len(buf) and buf[scanned] == 34:  # '"'
                    scanned, open_string = scanned + 1, False
            if begun and not open_string and len(buf) > scanned:
                region = bytes(buf[scanned:])
                outside = _JSON_STRING.sub(b"", region)  # what is left of a string is one still open
                quote = outside.find(b'"')
                body = outside if quote < 0 else outside[:quote]
                codes = np.frombuffer(body, np.uint8)
                steps = ((codes == 123).astype(np.int64) + (codes == 91) - (codes == 125) - (codes == 93))
                running = depth + np.cumsum(steps)
                if running.size and running.max() > MAX_JSON_DEPTH:
                    raise UnityMessageException(
                        f"Protocol error: the {what} JSON is nested more than {MAX_JSON_DEPTH} levels deep "
                        "(expected an object of 4 levels). The environment is not an API-2 build.",
                        self.peer.log_path, field=what, expected=f"nesting <= {MAX_JSON_DEPTH}",
                        received="deeper")
                if running.size and running.min() <= 0:
                    end = scanned + _json_end(region, depth)
                    raw = bytes(buf[:end])
                    del self.pending[:end]
                    try:
                        return orjson.loads(raw)
                    except orjson.JSONDecodeError as e:
                        raise UnityCommunicationException(
                            f"Protocol error: expected the {what} as JSON but it does not parse ({e}); "
                            f"received {raw[:80]!r}...", self.peer.log_path) from None
                if running.size:
                    depth = int(running[-1])
                if quote < 0:
                    scanned += len(region)
                else:  # only the open string's content follows its quote: go on from just after it
                    scanned += len(region) - (len(outside) - quote) + 1
                    open_string = True
                    continue  # the rest of this buffer may close it
            if len(buf) > limit:
                raise UnityMessageException(
                    f"Protocol error: the {what} is longer than {limit} bytes and still incomplete "
                    "(expected a JSON object of a few kB). The environment is not an API-2 build, or "
                    "its message is corrupt.", self.peer.log_path, field=what,
                    expected=f"<= {limit} bytes", received=f"> {limit} bytes")
            self._fill(what, deadline)

    def read_done_flag(self) -> bool:
        deadline = time.monotonic() + self.timeout
        head = self.read_exact(4, "the global done flag", deadline)
        if head == b"True":
            return True
        if head == b"Fals" and self.read_exact(1, "the global done flag", deadline) == b"e":
            return False
        raise UnityCommunicationException(
            f"Protocol error: expected the global done flag b'True' or b'False' but received {head!r}.",
            self.peer.log_path,
        )

    def send(self, data: bytes) -> None:
        try:
            if self._sock_timeout != self.timeout:  # a late message left a shorter one
                self.sock.settimeout(self.timeout)
                self._sock_timeout = self.timeout
            self.sock.sendall(data)
        except OSError as e:
            self.peer.raise_lost("a send to the environment", f"the socket failed ({e})")

    def send_framed(self, payload: bytes) -> None:
        # One write for prefix and payload: two small writes would meet Nagle + delayed ACK.
        self.send(struct.pack("<I", len(payload)) + payload)

