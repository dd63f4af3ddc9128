"""The communicator seam: the only place that knows a protocol's bytes.

``UnityEnvironment`` launches the environment, validates what the caller gives it and keeps the
brains' bookkeeping; a ``Communicator`` turns its requests into one protocol's messages and the
environment's answers into ``BrainInfo``. Two implementations exist:

* ``API2Communicator`` (this module): the raw-socket protocol of ML-Agents #166
  (``shared/reference/api2-facts.md`` §1), Python as the TCP server;
* ``GrpcCommunicator`` (``grpc_communicator.py``): the modern ML-Agents gRPC protocol
  (communication API 1.5.0), Python as the gRPC server.

Both are driven in the same order: ``connect`` → ``handshake`` → (``send_reset`` |
``send_step``) → ``receive`` ... → ``close``. A send and its receive are split so that a set of
environments can all simulate at once (``UnityEnvironment.reset_send``/``step_send``/``receive``).
"""
from __future__ import annotations

import abc
import dataclasses
import io
import json
import socket
import struct
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np
import orjson
from PIL import Image

from .brain import BrainInfo, BrainParameters
from .exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityObservationException,
    UnityProtocolException,
    UnityTimeOutException,
)

if TYPE_CHECKING:  # the environment gives the communicator its failure helpers and log path
    from .environment import UnityEnvironment

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


class Communicator(abc.ABC):
    """One protocol's end of the wire, owned by one ``UnityEnvironment``.

    Failures raise ``UnityException`` subclasses naming what was expected, what arrived and what
    to do; the environment closes the communicator and reaps the process on any of them.
    """

    #: The value of ``UnityEnvironment(protocol=...)`` that selects this class.
    protocol: str = ""

    def __init__(self, env: "UnityEnvironment"):
        self.env = env
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

    def set_brains(self, brains: Dict[str, BrainParameters]) -> None:
        """The environment's brains, for decoding (API-2 learns them in the handshake)."""


class _Connection:
    """Exact-size reads and single-write sends over the accepted socket.

    The protocol mixes framed messages, fixed tokens and unframed JSON, and TCP may split or merge
    any of them, so every read goes through one pending buffer and asks for an exact byte count.
    """

    def __init__(self, sock: socket.socket, env: "UnityEnvironment"):
        self.sock = sock
        self.env = env
        self.pending = bytearray()

    def _fill(self, what: str) -> None:
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            self.env._raise_timeout(what)
        except OSError as e:
            self.env._raise_lost(what, f"the socket failed ({e})")
        if not chunk:
            self.env._raise_lost(what, "the environment closed the connection")
        self.pending += chunk

    def read_exact(self, n: int, what: str) -> bytes:
        while len(self.pending) < n:
            self._fill(what)
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
                self.env.logfile_path,
            )

    def read_framed(self, what: str) -> bytes:
        (length,) = struct.unpack("<I", self.read_exact(4, what))
        return self.read_exact(length, what)

    def read_json_unframed(self, what: str) -> Any:
        """Read one JSON value that has no length prefix: keep reading until it parses."""
        decoder = json.JSONDecoder()
        while True:
            if bytes(self.pending[:4]) == HTTP2_PREFACE[:4] and bytes(HTTP2_PREFACE).startswith(
                    bytes(self.pending[:len(HTTP2_PREFACE)])):
                raise UnityProtocolException(
                    "The environment opened an HTTP/2 (gRPC) connection, but this trainer listens for "
                    "API-2 (expected the AcademyParameters JSON, received the HTTP/2 preface "
                    f"{bytes(self.pending[:24])!r}): this looks like a modern ML-Agents build; use "
                    "--protocol grpc (UnityEnvironment(..., protocol='grpc')).", self.env.logfile_path)
            text = self.pending.decode("utf-8", errors="replace")
            start = len(text) - len(text.lstrip())
            if start < len(text):
                if text[start] not in "{[":
                    raise UnityCommunicationException(
                        f"Protocol error: expected the {what} as JSON but received {bytes(self.pending[:80])!r}.",
                        self.env.logfile_path)
                try:
                    value, end = decoder.raw_decode(text, start)
                except json.JSONDecodeError:
                    pass  # incomplete: read more
                else:
                    del self.pending[: len(text[:end].encode("utf-8"))]
                    return value
            self._fill(what)

    def read_done_flag(self) -> bool:
        head = self.read_exact(4, "the global done flag")
        if head == b"True":
            return True
        if head == b"Fals" and self.read_exact(1, "the global done flag") == b"e":
            return False
        raise UnityCommunicationException(
            f"Protocol error: expected the global done flag b'True' or b'False' but received {head!r}.",
            self.env.logfile_path,
        )

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as e:
            self.env._raise_lost("a send to the environment", f"the socket failed ({e})")

    def send_framed(self, payload: bytes) -> None:
        # One write for prefix and payload: two small writes would meet Nagle + delayed ACK.
        self.send(struct.pack("<I", len(payload)) + payload)


class API2Communicator(Communicator):
    """API-2 over a raw socket on 127.0.0.1 (the seed's bytes; see the module docstring).

    The listening socket is bound in the constructor, before anything is launched, so that a
    port in use is reported before a process is started for nothing.
    """

    protocol = "api2"

    def __init__(self, env: "UnityEnvironment", port: int, worker_id: int):
        super().__init__(env)
        self.port = port
        self._conn: Optional[_Connection] = None
        self._brains: Dict[str, BrainParameters] = {}
        self._brain_names: List[str] = []
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
                self.env._check_process_alive("to connect")
                if time.monotonic() > deadline:
                    raise UnityTimeOutException(
                        f"The environment {file_name!r} did not connect to 127.0.0.1:{self.port} within "
                        f"{start_timeout:.0f} s. Make sure it does not need user interaction to launch, "
                        "that its Academy and External brain(s) are in the scene, and that it was built "
                        "for this API (API-2; a modern ML-Agents build needs --protocol grpc); raise "
                        "start_timeout if it is just slow to start.",
                        self.env.logfile_path,
                    ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.env._timeout_wait)
        self._conn = _Connection(sock, self.env)

    def handshake(self) -> Handshake:
        log_path = self.env.logfile_path
        p = self._conn.read_json_unframed("AcademyParameters")
        if not isinstance(p, dict):
            raise UnityCommunicationException(
                f"Protocol error: expected the AcademyParameters as a JSON object but received {p!r:.200}.",
                log_path,
            )
        api = p.get("apiNumber", "API-1")
        if api != API2_VERSION:
            raise UnityEnvironmentException(
                f"The API number is not compatible between Unity and python. Python API: {API2_VERSION}, "
                f"Unity API: {api}. Use a Unity build made with the ML-Agents version of this package."
            )
        try:
            academy_name = p["AcademyName"]
            brain_names = list(p["brainNames"])
            external = list(p.get("externalBrainNames") or [])
            reset_parameters = dict(p.get("resetParameters") or {})
            params = p["brainParameters"]
            if len(params) != len(brain_names):
                raise ValueError(f"{len(brain_names)} brainNames but {len(params)} brainParameters")
            brains = {n: BrainParameters(n, bp) for n, bp in zip(brain_names, params)}
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise UnityCommunicationException(
                f"The AcademyParameters sent by the environment are malformed ({type(e).__name__}: {e}). "
                "Expected the keys AcademyName, brainNames, brainParameters, externalBrainNames and "
                "resetParameters of API-2.",
                log_path,
            ) from None
        log_path = p.get("logPath") or log_path
        unknown = [b for b in external if b not in brains]
        if unknown:
            raise UnityCommunicationException(
                f"The AcademyParameters name External brains {unknown} that are not in brainNames "
                f"{brain_names}.", log_path)
        self._brains, self._brain_names = brains, brain_names
        return Handshake(academy_name, brains, external, reset_parameters, log_path)

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
        for _ in self._brain_names:
            raw = self._conn.read_framed("a brain's state message")
            # Ack at once: the environment sends its next message while we decode this one.
            self._conn.send(b"RECEIVED")
            try:
                msg = orjson.loads(raw)
                b = msg["brain_name"]
                params = self._brains[b]
            except (ValueError, KeyError, TypeError) as e:  # orjson.JSONDecodeError is a ValueError
                raise UnityCommunicationException(
                    f"Protocol error: expected a state message of one of the brains {self._brain_names} "
                    f"but could not read it ({type(e).__name__}: {e}); received {raw[:120]!r}.",
                    self.env.logfile_path) from None
            infos[b] = self._brain_info(b, params, msg)
        return infos, self._conn.read_done_flag()

    def _brain_info(self, b: str, params: BrainParameters, msg: Dict[str, Any]) -> BrainInfo:
        try:
            agents = list(msg["agents"])
            n = len(agents)
            states = msg["states"]
            rewards = [float(r) for r in msg["rewards"]]
            dones = [bool(d) for d in msg["dones"]]
            actions = msg.get("actions") or []
            memories = msg.get("memories") or []
        except (KeyError, TypeError) as e:
            raise UnityCommunicationException(
                f"The state message of brain {b!r} lacks a field of API-2 ({e}); expected brain_name, "
                "agents, states, rewards, actions, memories, dones.", self.env.logfile_path) from None
        self._check_size(b, "states", len(states), n * params.state_width,
                         f"{params.state_width} {params.state_space_type} float(s) per agent")
        self._check_size(b, "rewards", len(rewards), n, "one per agent")
        self._check_size(b, "dones", len(dones), n, "one per agent")
        if memories:
            self._check_size(b, "memories", len(memories), n * params.memory_space_size,
                             f"memorySize {params.memory_space_size} per agent")
        observations = []
        for i, res in enumerate(params.camera_resolutions):
            frames = [self._decode_png(self._conn.read_framed(f"camera {i} of brain {b!r}"), res, b)
                      for _ in range(n)]
            observations.append(np.stack(frames) if frames else
                                np.zeros((0, res["height"], res["width"], 1 if res.get("blackAndWhite") else 3),
                                         np.float32))
        state = np.asarray(states, dtype=np.float32).reshape(n, params.state_width)
        memory = (np.asarray(memories, dtype=np.float32).reshape(n, params.memory_space_size) if memories
                  else np.zeros((n, params.memory_space_size), np.float32))
        prev = np.asarray(actions, dtype=np.float32).reshape(n, -1) if n else np.array([])
        return BrainInfo(observations, state, memory, rewards, agents, dones, prev)

    def _check_size(self, brain: str, field: str, got: int, expected: int, layout: str) -> None:
        if got != expected:
            raise UnityObservationException(
                f"Brain {brain!r} sent an invalid {field} field: expected {expected} values ({layout}) "
                f"but received {got}. The brain's parameters and its agents disagree; check the "
                f"brain's state size in the scene.")

    def _decode_png(self, data: bytes, res: Dict[str, Any], brain: str) -> np.ndarray:
        self._conn.send(b"RECEIVED")
        # Through the environment, so that bench/train.py can time it by wrapping env._decode_png.
        return self.env._decode_png(data, res, brain)

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


def decode_api2_png(data: bytes, res: Dict[str, Any], brain: str, log_path: Optional[str]) -> np.ndarray:
    """One API-2 camera frame as float ``[H, W, C]`` in 0..1 (C = 1 for black-and-white cameras)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            pixels = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    except Exception as e:  # Pillow raises several types for bad images
        raise UnityObservationException(
            f"Brain {brain!r} sent a camera frame that is not a readable PNG ({e}).", log_path) from None
    if pixels.shape[:2] != (res["height"], res["width"]):
        raise UnityObservationException(
            f"Brain {brain!r} sent a {pixels.shape[1]}x{pixels.shape[0]} frame but declares a camera of "
            f"{res['width']}x{res['height']}.")
    if res.get("blackAndWhite"):
        pixels = pixels.mean(axis=2, keepdims=True)
    return pixels
