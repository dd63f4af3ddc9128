"""The communicator seam: the only place that knows a protocol's bytes.

``UnityEnvironment`` launches the environment, validates what the caller gives it and keeps the
brains' bookkeeping; a ``Communicator`` turns its requests into one protocol's messages and the
environment's answers into ``BrainInfo``. Two implementations exist:

* ``API2Communicator`` (this module): the raw-socket protocol of ML-Agents #166
  (its message sequence is in ``API2Communicator``'s docstring), Python as the TCP server;
* ``GrpcCommunicator`` (``wire/grpc.py``): the modern ML-Agents gRPC protocol
  (communication API 1.5.0), Python as the gRPC server.

Both are driven in the same order: ``connect`` → ``handshake`` → (``send_reset`` |
``send_step``) → ``receive`` ... → ``close``. A send and its receive are split so that a set of
environments can all simulate at once (``UnityEnvironment.reset_send``/``step_send``/``receive``).

Everything that arrives from an environment is checked here, at the boundary, before any of it
reaches a trainer: every field's type, size and range (``validate_academy_parameters``,
``_brain_info``), finiteness within float32 (NaN, infinities and overflows are the environment's
error), a camera frame's PNG header before it is decoded, each message's length against what its
brain can need, one deadline per message however it is split, and the unframed JSON in linear
time. Any failure is a ``UnityException`` subclass (``UnityMessageException`` for a malformed
field) naming the brain, the field, what was expected and what arrived.
"""
from __future__ import annotations

import abc
import dataclasses
import io
import json
import math
import re
import reprlib
import socket
import struct
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import orjson
from PIL import Image

from unityagents.brain import BrainInfo, BrainParameters
from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityMessageException,
    UnityObservationException,
    UnityProtocolException,
    UnityTimeOutException,
)

API2_VERSION = "API-2"
_POLL_SECONDS = 0.2
#: The first bytes a gRPC client (an HTTP/2 connection) sends: the connection preface.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: A stat the environment sent: (value, aggregation), aggregation one of STATS_AGGREGATIONS.
Stat = Tuple[float, str]
STATS_AGGREGATIONS = ("average", "most_recent", "sum", "histogram")


@dataclasses.dataclass
class Handshake:
    """What an environment says about itself when it connects.

    :param academy_name: the Academy's name (API-2) or the initialisation output's name (gRPC).
    :param brains: parameters of every brain known so far, by name.
    :param external_brain_names: the brains that take actions from Python.
    :param reset_parameters: the Academy's reset parameters with their defaults (API-2); the
        modern protocol declares none.
    :param log_path: where the environment writes its log, when it says so.
    :param first_infos: the first ``BrainInfo`` per brain when the handshake had to reset the
        environment to learn its brains (gRPC), else None.
    """

    academy_name: str
    brains: Dict[str, BrainParameters]
    external_brain_names: List[str]
    reset_parameters: Dict[str, float]
    log_path: Optional[str] = None
    first_infos: Optional[Dict[str, BrainInfo]] = None


class Peer:
    """What the wire knows of the environment at its other end: how long to wait for it, its log, its process.

    The environment fills it in as it launches the process and learns the log's path; communicators
    only read it, to say in every error where the log is and whether the process is still alive.
    The wire therefore needs nothing of ``UnityEnvironment``.

    :param timeout: seconds to wait for any single answer of the environment.
    """

    def __init__(self, timeout: float):
        self.timeout = float(timeout)
        self.log_path: Optional[str] = None
        #: The launched process, or None (an environment started by someone else, or not yet launched).
        self.process: Optional[subprocess.Popen] = None

    def check_alive(self, what: str) -> None:
        """Raise if the process has exited while we waited for it ``what`` (e.g. "to connect")."""
        if self.process is not None and self.process.poll() is not None:
            raise UnityCommunicationException(
                f"The environment process exited with code {self.process.returncode} while we waited for it "
                f"{what}.", self.log_path)

    def raise_timeout(self, what: str):
        self.check_alive(f"to send {what}")
        raise UnityTimeOutException(
            f"The environment took longer than {self.timeout:.0f} s to send {what}. It may be stuck "
            "or paused; raise timeout_wait if it is only slow.", self.log_path) from None

    def raise_lost(self, what: str, how: str):
        code = None
        if self.process is not None:
            try:
                code = self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        state = f"the process exited with code {code}" if code is not None else "the process is still running"
        raise UnityCommunicationException(
            f"Lost the environment while waiting for {what}: {how} ({state}). "
            "It probably crashed; check its log.", self.log_path) from None


class Communicator(abc.ABC):
    """One protocol's end of the wire, owned by one ``UnityEnvironment``.

    Failures raise ``UnityException`` subclasses naming what was expected, what arrived and what
    to do; the environment closes the communicator and reaps the process on any of them.
    """

    #: The value of ``UnityEnvironment(protocol=...)`` that selects this class.
    protocol: str = ""

    def __init__(self, peer: Peer):
        self.peer = peer
        #: Custom stats the environment sent with the last answer (see ``UnityEnvironment.stats``).
        self.stats: Dict[str, List[Stat]] = {}

    @abc.abstractmethod
    def connect(self, start_timeout: float, file_name: str) -> None:
        """Wait until the launched environment connects (``UnityTimeOutException`` after the timeout)."""

    @abc.abstractmethod
    def handshake(self) -> Handshake:
        """Read what the environment says about itself and answer it."""

    @abc.abstractmethod
    def send_reset(self, train_mode: bool, config: Dict[str, float]) -> None:
        """Ask for a reset with these reset parameters (already validated by the environment)."""

    @abc.abstractmethod
    def send_step(self, actions: Dict[str, np.ndarray], memories: Dict[str, np.ndarray],
                  values: Dict[str, np.ndarray]) -> None:
        """Send one decision per agent: flat float arrays per External brain, already size-checked."""

    @abc.abstractmethod
    def receive(self) -> Tuple[Dict[str, BrainInfo], bool]:
        """The answer to the last send: the ``BrainInfo`` of every brain and the global done flag."""

    @abc.abstractmethod
    def close(self) -> None:
        """Tell the environment to quit (if connected) and release the port. Idempotent."""

    def set_brains(self, brains: Dict[str, BrainParameters]) -> None:  # noqa: B027 (optional hook)
        """The environment's brains, for decoding (API-2 learns them in the handshake); a no-op
        for protocols that learn them otherwise."""


# Limits on what an environment may send: generous for any real scene, far below what would
# exhaust memory. A message over its limit is refused from its length prefix, before it is read.
#: The unframed AcademyParameters JSON (a real one is a few kB; 30 MB are read in about a second).
MAX_ACADEMY_PARAMETERS_BYTES = 64 << 20
#: Agents of one brain in one state message.
MAX_AGENTS = 100_000
#: Sizes a brain may declare (stateSize, actionSize, memorySize, a camera's width and height).
MAX_BRAIN_SIZE = 1 << 20
MAX_CAMERA_SIDE = 8192
#: JSON nesting of any message (the AcademyParameters need 4 levels, a state message 2).
MAX_JSON_DEPTH = 64
#: Bytes of JSON one number may take in a state message (``-1.2345678901234567E+38,`` and spaces).
_BYTES_PER_NUMBER = 32
_BYTES_PER_AGENT = 128  # its id, its done flag, and the separators
F32_MAX = float(np.finfo(np.float32).max)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

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


class _Connection:
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


class API2Communicator(Communicator):
    """API-2 over a raw socket on 127.0.0.1 (the seed's bytes; see the module docstring).

    The listening socket is bound in the constructor, before anything is launched, so that a
    port in use is reported before a process is started for nothing.
    """

    protocol = "api2"

    def __init__(self, peer: Peer, port: int, worker_id: int):
        super().__init__(peer)
        self.port = port
        self._conn: Optional[_Connection] = None
        self._brains: Dict[str, BrainParameters] = {}
        self._brain_names: List[str] = []
        self._limits: Dict[str, int] = {}
        self._frame_limits: Dict[str, List[int]] = {}
        self._listener: Optional[socket.socket] = self._bind(port, worker_id)

    @staticmethod
    def _bind(port: int, worker_id: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", port))
        except OSError as e:
            listener.close()
            raise UnityEnvironmentException(
                f"Couldn't listen on 127.0.0.1:{port} (base port {port - worker_id} + worker id "
                f"{worker_id}): {e.strerror or e}. Another environment or training run probably uses "
                "that port. Close it, or pick a free port with a different --worker-id "
                "(or --base-port)."
            ) from None
        listener.listen(1)
        return listener

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def connect(self, start_timeout: float, file_name: str) -> None:
        deadline = time.monotonic() + start_timeout
        self._listener.settimeout(_POLL_SECONDS)
        while True:
            try:
                sock, _ = self._listener.accept()
                break
            except socket.timeout:
                self.peer.check_alive("to connect")
                if time.monotonic() > deadline:
                    raise UnityTimeOutException(
                        f"The environment {file_name!r} did not connect to 127.0.0.1:{self.port} within "
                        f"{start_timeout:.0f} s. Make sure it does not need user interaction to launch, "
                        "that its Academy and External brain(s) are in the scene, and that it was built "
                        "for this API (API-2; a modern ML-Agents build needs --protocol grpc); raise "
                        "start_timeout if it is just slow to start.",
                        self.peer.log_path,
                    ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.peer.timeout)
        self._conn = _Connection(sock, self.peer, self.peer.timeout)

    def handshake(self) -> Handshake:
        p = self._conn.read_json_unframed("AcademyParameters")
        if not isinstance(p, dict):
            raise UnityMessageException(
                f"Protocol error: expected the AcademyParameters as a JSON object but received {p!r:.200}.",
                self.peer.log_path, field="AcademyParameters", expected="a JSON object",
                received=_show(p))
        api = p.get("apiNumber", "API-1")
        if api != API2_VERSION:
            raise UnityEnvironmentException(
                f"The API number is not compatible between Unity and python. Python API: {API2_VERSION}, "
                f"Unity API: {api if isinstance(api, str) else _show(api):.80}. Use a Unity build made with the "
                "ML-Agents version of this package."
            )
        hello = validate_academy_parameters(p, self.peer.log_path)
        self._brains, self._brain_names = hello.brains, list(hello.brains)
        self._limits = {b: _state_message_limit(bp) for b, bp in hello.brains.items()}
        self._frame_limits = {b: [_png_limit(r) for r in bp.camera_resolutions] for b, bp in hello.brains.items()}
        return hello

    def send_reset(self, train_mode: bool, config: Dict[str, float]) -> None:
        self._conn.send(b"RESET")
        self._conn.read_token(b"CONFIG_REQUEST")
        message = {"train_model": bool(train_mode), "parameters": {k: float(v) for k, v in config.items()}}
        self._conn.send(json.dumps(message).encode("utf-8"))

    def send_step(self, actions: Dict[str, np.ndarray], memories: Dict[str, np.ndarray],
                  values: Dict[str, np.ndarray]) -> None:
        message = {"action": actions, "memory": memories, "value": values}
        # Encoded before STEP so that nothing but the send sits between STEPPING and the actions;
        # orjson writes the same compact JSON as json.dumps, several times faster (bench/protocol.py).
        payload = orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)
        self._conn.send(b"STEP")
        self._conn.read_token(b"STEPPING")
        self._conn.send_framed(payload)

    def receive(self) -> Tuple[Dict[str, BrainInfo], bool]:
        infos: Dict[str, BrainInfo] = {}
        limit = max(self._limits.values(), default=0)
        for _ in self._brain_names:
            raw = self._conn.read_framed("a brain's state message", limit)
            # Ack at once: the environment sends its next message while we decode this one.
            self._conn.send(b"RECEIVED")
            try:
                msg = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise UnityMessageException(
                    f"Protocol error: expected a state message of one of the brains {self._brain_names} "
                    f"but could not read it ({e}); received {raw[:120]!r}. NaN, Infinity and nesting "
                    f"deeper than 1024 levels are not JSON.", self.peer.log_path,
                    field="state message", expected="a JSON object", received=raw[:120]) from None
            b = msg.get("brain_name") if isinstance(msg, dict) else None
            if not isinstance(b, str) or b not in self._brains:
                raise UnityMessageException(
                    f"Protocol error: expected a state message of one of the brains {self._brain_names} "
                    f"but received one whose brain_name is {_show(b)} ({raw[:120]!r}).",
                    self.peer.log_path, field="brain_name", expected=f"one of {self._brain_names}",
                    received=_show(b))
            if b in infos:
                raise UnityMessageException(
                    f"Protocol error: brain {b!r} sent two state messages in one step (expected one message "
                    f"per brain: {self._brain_names}).", self.peer.log_path, brain=b,
                    field="brain_name", expected="each brain once", received=f"{b!r} twice")
            if len(raw) > self._limits[b]:
                raise UnityMessageException(
                    f"Protocol error: the state message of brain {b!r} has {len(raw)} bytes; no message of "
                    f"this brain can need more than {self._limits[b]}.", self.peer.log_path, brain=b,
                    field="length prefix", expected=f"<= {self._limits[b]}", received=len(raw))
            infos[b] = self._brain_info(b, self._brains[b], msg)
        return infos, self._conn.read_done_flag()

    def _brain_info(self, b: str, params: BrainParameters, msg: Dict[str, Any]) -> BrainInfo:
        """Check every field of one state message (types, sizes, finiteness); then build its info."""
        log = self.peer.log_path
        agents = _field(msg, b, "agents", log)
        if not isinstance(agents, list) or not set(map(type, agents)) <= {int}:
            raise _bad(b, "agents", "a list of integer agent ids", agents, log)
        n = len(agents)
        if n > MAX_AGENTS:
            raise _bad(b, "agents", f"at most {MAX_AGENTS} agents", f"{n} agents", log)
        if len(set(agents)) != n:
            dup = sorted({a for a in agents if agents.count(a) > 1})[:5]
            raise _bad(b, "agents", f"distinct agent ids (repeated: {dup})", agents, log)
        state = _floats(msg, b, "states", n, params.state_width,
                        f"{params.state_width} {params.state_space_type} float(s) per agent", log)
        _floats(msg, b, "rewards", n, 1, "one per agent", log)
        rewards = [float(r) for r in msg["rewards"]]
        dones = _field(msg, b, "dones", log)
        if not isinstance(dones, list) or not set(map(type, dones)) <= {bool}:
            raise _bad(b, "dones", "a list of true/false, one per agent", dones, log)
        self._check_size(b, "dones", len(dones), n, "one per agent")
        memories = msg.get("memories")
        if memories:
            memory = _floats(msg, b, "memories", n, params.memory_space_size,
                             f"memorySize {params.memory_space_size} per agent", log)
        elif memories is None or memories == []:
            memory = np.zeros((n, params.memory_space_size), np.float32)
        else:
            raise _bad(b, "memories", "a list of numbers", memories, log)
        actions = msg.get("actions")
        if actions:
            prev = _floats(msg, b, "actions", n, params.action_width,
                           f"the previous action: {params.action_width} float(s) per agent", log)
        elif actions is None or actions == []:
            prev = np.zeros((n, 0), np.float32) if n else np.array([])
        else:
            raise _bad(b, "actions", "a list of numbers", actions, log)
        observations = []
        for i, res in enumerate(params.camera_resolutions):
            what = f"camera {i} of brain {b!r}"
            limit = self._frame_limits[b][i]
            frames = [self._decode_png(self._conn.read_framed(what, limit, b), res, b) for _ in range(n)]
            observations.append(np.stack(frames) if frames else
                                np.zeros((0, res["height"], res["width"], 1 if res.get("blackAndWhite") else 3),
                                         np.float32))
        return BrainInfo(observations, state, memory, rewards, agents, dones, prev)

    def _check_size(self, brain: str, field: str, got: int, expected: int, layout: str) -> None:
        if got != expected:
            raise UnityObservationException(
                f"Brain {brain!r} sent an invalid {field} field: expected {expected} values ({layout}) "
                f"but received {got}. The brain's parameters and its agents disagree; check the "
                f"brain's state size in the scene.", brain=brain, field=field, expected=f"{expected} values",
                received=f"{got} values")

    def _decode_png(self, data: bytes, res: Dict[str, Any], brain: str) -> np.ndarray:
        self._conn.send(b"RECEIVED")
        # A method of its own, so that bench/train.py can time the decoding by wrapping it.
        return decode_api2_png(data, res, brain, self.peer.log_path)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.sock.sendall(b"EXIT")
            except OSError:
                pass
            self._conn.sock.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None


# ------------------------------------------------------------------------------- validation
_repr = reprlib.Repr()
_repr.maxstring, _repr.maxother, _repr.maxlist, _repr.maxdict, _repr.maxlevel = 60, 60, 8, 6, 3


def _show(value: Any) -> str:
    """A short, bounded repr of what arrived (safe for deep nesting and huge values)."""
    return f"{type(value).__name__} {_repr.repr(value)}"


def _bad(brain: Optional[str], field: str, expected: str, received: Any, log_path: Optional[str],
         where: str = "state message") -> UnityMessageException:
    whose = f"brain {brain!r}" if brain is not None else "the environment"
    return UnityMessageException(
        f"Protocol error: the {where} of {whose} has an invalid {field}: expected {expected}, received "
        f"{_show(received)}. The environment sent a message this API-2 trainer cannot use; check that "
        "the build matches this ML-Agents version and that the scene's agents send finite values.",
        log_path, brain=brain, field=field, expected=expected, received=_show(received))


def _field(msg: Dict[str, Any], brain: str, field: str, log_path: Optional[str]) -> Any:
    if field not in msg:
        raise _bad(brain, field, "the field (API-2 state messages have brain_name, agents, states, rewards, "
                   "actions, memories, dones)", "nothing", log_path)
    return msg[field]


def _floats(msg: Dict[str, Any], brain: str, field: str, n: int, width: int, layout: str,
            log_path: Optional[str]) -> np.ndarray:
    """``msg[field]`` as ``[n, width]`` float32, refused unless it is that many finite numbers
    within float32's range (a float32 overflow is as non-finite as an infinity)."""
    value = _field(msg, brain, field, log_path)
    if not isinstance(value, list):
        raise _bad(brain, field, f"a list of numbers ({layout})", value, log_path)
    if len(value) != n * width:
        raise UnityObservationException(
            f"Brain {brain!r} sent an invalid {field} field: expected {n * width} values ({layout}) "
            f"but received {len(value)}. The brain's parameters and its agents disagree; check the "
            f"brain's state size in the scene.", log_path, brain=brain, field=field,
            expected=f"{n * width} values", received=f"{len(value)} values")
    if not _finite_numbers(value):
        for k, v in enumerate(value):  # the slow path, only to name the culprit
            if not isinstance(v, (int, float)):
                raise _bad(brain, field, f"a flat list of numbers ({layout})", value, log_path)
            if not abs(v) <= F32_MAX:
                raise _bad(brain, f"{field}[{k}]", "a finite number within float32's range (NaN, infinity "
                           "and values beyond 3.4e38 are environment errors)", v, log_path)
        raise _bad(brain, field, f"a flat list of finite numbers ({layout})", value, log_path)
    return np.asarray(value, np.float32).reshape(n, width)


def _finite_numbers(values: List[Any]) -> bool:
    """Whether ``values`` are all numbers within float32's range, NaN and infinities excluded.

    On the hot path (every state message), so in C loops: ``sum`` refuses anything but numbers
    (strings, None, lists) and carries any NaN or infinity into its result; ``min``/``max`` bound
    the magnitudes (a float32 overflow is as non-finite as an infinity). JSON ``true``/``false``
    pass as the numbers 1 and 0, as in Python.
    """
    if not values:
        return True
    try:
        return math.isfinite(sum(values)) and max(values) <= F32_MAX and min(values) >= -F32_MAX
    except (TypeError, OverflowError):
        return False


def _state_message_limit(params: BrainParameters) -> int:
    """The most bytes a state message of this brain can need (MAX_AGENTS agents, long numbers)."""
    numbers = params.state_width + params.memory_space_size + params.action_width + 1
    return min(1 << 30, 4096 + MAX_AGENTS * (_BYTES_PER_AGENT + _BYTES_PER_NUMBER * numbers))


def _png_limit(res: Dict[str, Any]) -> int:
    """The most bytes a PNG of this camera can need: uncompressed 16-bit RGBA rows, twice, plus chunks."""
    return 2 * res["height"] * (1 + 8 * res["width"]) + (64 << 10)


def png_size(data: bytes) -> Optional[Tuple[int, int]]:
    """A PNG's (width, height) from its IHDR chunk, without decoding it; None if it is no PNG."""
    if len(data) < 24 or data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _int_field(where: str, d: Dict[str, Any], key: str, low: int, high: int, log_path: Optional[str],
               default: Optional[int] = None) -> int:
    value = d.get(key, default)
    if value is None and default is not None:
        value = default
    if type(value) is not int or not low <= value <= high:
        raise _academy_error(f"{where}.{key}", f"an integer from {low} to {high}", value, log_path)
    return value


def _academy_error(field: str, expected: str, received: Any, log_path: Optional[str]) -> UnityMessageException:
    return UnityMessageException(
        f"The AcademyParameters sent by the environment are malformed: {field} must be {expected}; received "
        f"{_show(received)}. Expected the AcademyName, brainNames, brainParameters, externalBrainNames and "
        "resetParameters of API-2; use a build made with the matching ML-Agents version.",
        log_path, field=field, expected=expected, received=_show(received))


def _str_list(field: str, value: Any, log_path: Optional[str], optional: bool = False) -> List[str]:
    if value is None and optional:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _academy_error(field, "a list of names", value, log_path)
    if len(set(value)) != len(value):
        raise _academy_error(field, "distinct names", value, log_path)
    return value


def validate_academy_parameters(p: Dict[str, Any], log_path: Optional[str]) -> Handshake:
    """The checked AcademyParameters: every field's type, range and consistency, before use."""
    name = p.get("AcademyName")
    if not isinstance(name, str):
        raise _academy_error("AcademyName", "a string", name, log_path)
    brain_names = _str_list("brainNames", p.get("brainNames"), log_path)
    external = _str_list("externalBrainNames", p.get("externalBrainNames"), log_path, optional=True)
    unknown = [b for b in external if b not in brain_names]
    if unknown:
        raise UnityMessageException(
            f"The AcademyParameters name External brains {unknown} that are not in brainNames "
            f"{brain_names}.", log_path, field="externalBrainNames", expected=f"names among {brain_names}",
            received=_show(unknown))
    reset = p.get("resetParameters")
    reset = {} if reset is None else reset
    if not isinstance(reset, dict):
        raise _academy_error("resetParameters", "an object of names to numbers", reset, log_path)
    for k, v in reset.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= F32_MAX:
            raise _academy_error(f"resetParameters[{k!r}]", "a finite number", v, log_path)
    log = p.get("logPath")
    if log is not None and not isinstance(log, str):
        raise _academy_error("logPath", "a string", log, log_path)
    params = p.get("brainParameters")
    if not isinstance(params, list) or len(params) != len(brain_names):
        raise _academy_error("brainParameters", f"a list of {len(brain_names)} objects (one per brain "
                             "of brainNames)", params, log_path)
    brains: Dict[str, BrainParameters] = {}
    for i, (b, bp) in enumerate(zip(brain_names, params)):
        where = f"brainParameters[{i}] (brain {b!r})"
        if not isinstance(bp, dict):
            raise _academy_error(where, "an object", bp, log_path)
        clean: Dict[str, Any] = {
            "stateSize": _int_field(where, bp, "stateSize", 0, MAX_BRAIN_SIZE, log_path),
            "actionSize": _int_field(where, bp, "actionSize", 1, MAX_BRAIN_SIZE, log_path),
            "memorySize": _int_field(where, bp, "memorySize", 0, MAX_BRAIN_SIZE, log_path, default=0),
            "actionSpaceType": _int_field(where, bp, "actionSpaceType", 0, 1, log_path, default=0),
            "stateSpaceType": _int_field(where, bp, "stateSpaceType", 0, 1, log_path, default=1),
        }
        cameras = bp.get("cameraResolutions")
        cameras = [] if cameras is None else cameras
        if not isinstance(cameras, list) or len(cameras) > 64:
            raise _academy_error(f"{where}.cameraResolutions", "a list of at most 64 cameras", cameras, log_path)
        clean["cameraResolutions"] = []
        for k, cam in enumerate(cameras):
            at = f"{where}.cameraResolutions[{k}]"
            if not isinstance(cam, dict):
                raise _academy_error(at, "an object with width, height and blackAndWhite", cam, log_path)
            bw = cam.get("blackAndWhite", False)
            if not isinstance(bw, bool):
                raise _academy_error(f"{at}.blackAndWhite", "true or false", bw, log_path)
            clean["cameraResolutions"].append({
                "width": _int_field(at, cam, "width", 1, MAX_CAMERA_SIDE, log_path),
                "height": _int_field(at, cam, "height", 1, MAX_CAMERA_SIDE, log_path),
                "blackAndWhite": bw})
        descriptions = bp.get("actionDescriptions")
        if descriptions is not None and (not isinstance(descriptions, list)
                                         or not all(isinstance(d, str) for d in descriptions)):
            raise _academy_error(f"{where}.actionDescriptions", "a list of strings", descriptions, log_path)
        clean["actionDescriptions"] = descriptions or []
        if "actionBranches" in bp:
            branches = bp["actionBranches"]
            if not isinstance(branches, list) or len(branches) > 1024 or not all(
                    type(x) is int and 1 <= x <= MAX_BRAIN_SIZE for x in branches):
                raise _academy_error(f"{where}.actionBranches", "a list of positive integers", branches, log_path)
            clean["actionBranches"] = branches
        if "actionMasks" in bp:
            if not isinstance(bp["actionMasks"], bool):
                raise _academy_error(f"{where}.actionMasks", "true or false", bp["actionMasks"], log_path)
            clean["actionMasks"] = bp["actionMasks"]
        brains[b] = BrainParameters(b, clean)
    return Handshake(name, brains, external, {k: float(v) for k, v in reset.items()}, log or log_path)


def decode_api2_png(data: bytes, res: Dict[str, Any], brain: str, log_path: Optional[str]) -> np.ndarray:
    """One API-2 camera frame as float ``[H, W, C]`` in 0..1 (C = 1 for black-and-white cameras).

    The PNG's own header is checked against the camera first, so that a frame claiming a huge
    image (a decompression bomb) is refused without being decoded.
    """
    size = png_size(data)
    if size is None:
        raise UnityObservationException(
            f"Brain {brain!r} sent a camera frame that is not a PNG (expected the PNG signature and an IHDR "
            f"chunk, received {bytes(data[:24])!r}).", log_path, brain=brain, field="camera frame",
            expected="a PNG", received=bytes(data[:24]))
    if size != (res["width"], res["height"]):
        raise UnityObservationException(
            f"Brain {brain!r} sent a {size[0]}x{size[1]} frame but declares a camera of "
            f"{res['width']}x{res['height']} (refused from the PNG header, before decoding).", log_path,
            brain=brain, field="camera frame", expected=f"{res['width']}x{res['height']}",
            received=f"{size[0]}x{size[1]}")
    try:
        with Image.open(io.BytesIO(data)) as img:
            pixels = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    except Exception as e:  # Pillow raises several types for bad images
        raise UnityObservationException(
            f"Brain {brain!r} sent a camera frame that is not a readable PNG ({type(e).__name__}: {e}).",
            log_path, brain=brain, field="camera frame", expected="a readable PNG", received=str(e)) from None
    if pixels.shape[:2] != (res["height"], res["width"]):
        raise UnityObservationException(
            f"Brain {brain!r} sent a {pixels.shape[1]}x{pixels.shape[0]} frame but declares a camera of "
            f"{res['width']}x{res['height']}.")
    if res.get("blackAndWhite"):
        pixels = pixels.mean(axis=2, keepdims=True)
    return pixels
