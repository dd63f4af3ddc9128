"""The Python end of API-2, the raw-socket protocol of ML-Agents #166 (Unity builds of 2018).

Python is the TCP server on 127.0.0.1 and the environment connects to it. The exchange:

* the environment sends its AcademyParameters as JSON without a length prefix (read by
  ``api2_stream.Connection.read_json_unframed``, checked by
  ``api2_messages.validate_academy_parameters``);
* a reset: ``RESET`` -> the environment asks ``CONFIG_REQUEST`` -> the reset parameters as JSON;
* a step: ``STEP`` -> ``STEPPING`` -> the actions, memories and values as length-prefixed JSON;
* every answer: one length-prefixed state message per brain, each acknowledged with ``RECEIVED``,
  then each camera frame as a length-prefixed PNG, camera by camera and agent by agent, each
  acknowledged too; then the global done flag, ``True`` or ``False``;
* ``EXIT`` on close.

Everything that arrives is checked at the boundary, before any of it reaches a trainer
(``api2_messages``): each message's length against what its brain can need, one deadline per
message however it is split, the unframed JSON in linear time.
"""
from __future__ import annotations

import functools
import json
import logging
import socket
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import orjson

from unityagents.base_env import ActionTuple, BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.exception import UnityEnvironmentException, UnityMessageException, UnityTimeOutException
from unityagents.wire.api2_messages import (
    decode_api2_png,
    png_limit,
    show,
    state_message_limit,
    steps_of,
    validate_academy_parameters,
)
from unityagents.wire.api2_stream import Connection
from unityagents.wire.base import Communicator, Handshake, Peer, port_in_use

logger = logging.getLogger("unityagents")

API2_VERSION = "API-2"
_POLL_SECONDS = 0.2


class API2Communicator(Communicator):
    """API-2 over a raw socket on 127.0.0.1 (the seed's bytes; see the module docstring).

    The listening socket is bound in the constructor, before anything is launched, so that a
    port in use is reported before a process is started for nothing.

    :param seed: not sent: API-2 has no place for it (a built-in scene gets ``--seed`` from the launcher).
    :param engine_config: ignored with a warning: API-2 has no engine configuration channel.
    :param side_channels: refused: API-2 has no side channels.
    """

    protocol = "api2"

    def __init__(self, peer: Peer, port: int, worker_id: int, seed: Optional[int] = None,
                 engine_config: Optional[Any] = None, side_channels: Sequence[Any] = ()):
        if side_channels:
            raise UnityEnvironmentException(
                "API-2 (protocol='api2') has no side channels, so side_channels cannot be used with it; "
                "open a modern build with protocol='grpc', or leave side_channels out.")
        if engine_config is not None:
            logger.warning("API-2 has no engine configuration channel: engine_config is ignored "
                           "(train_mode chooses the engine's speed).")
        super().__init__(peer)
        self.port = port
        self._conn: Optional[Connection] = None
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
            raise port_in_use(port, worker_id, str(e.strerror or e)) from None
        listener.listen(1)
        return listener

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
        self._conn = Connection(sock, self.peer, self.peer.timeout)
        self.connected = True

    def handshake(self) -> Handshake:
        p = self._conn.read_json_unframed("AcademyParameters")
        if not isinstance(p, dict):
            raise UnityMessageException(
                f"Protocol error: expected the AcademyParameters as a JSON object but received {p!r:.200}.",
                self.peer.log_path, field="AcademyParameters", expected="a JSON object",
                received=show(p))
        api = p.get("apiNumber", "API-1")
        if api != API2_VERSION:
            raise UnityEnvironmentException(
                f"The API number is not compatible between Unity and python. Python API: {API2_VERSION}, "
                f"Unity API: {api if isinstance(api, str) else show(api):.80}. Use a Unity build made with the "
                "ML-Agents version of this package."
            )
        hello = validate_academy_parameters(p, self.peer.log_path)
        self._brains, self._brain_names = hello.brains, list(hello.brains)
        self._limits = {b: state_message_limit(bp) for b, bp in hello.brains.items()}
        self._frame_limits = {b: [png_limit(r) for r in bp.camera_resolutions] for b, bp in hello.brains.items()}
        return hello

    def send_reset(self, train_mode: bool, config: Dict[str, float]) -> None:
        self._conn.send(b"RESET")
        self._conn.read_token(b"CONFIG_REQUEST")
        message = {"train_model": bool(train_mode), "parameters": {k: float(v) for k, v in config.items()}}
        self._conn.send(json.dumps(message).encode("utf-8"))

    def send_step(self, actions: Dict[str, ActionTuple], memories: Dict[str, np.ndarray],
                  values: Dict[str, np.ndarray]) -> None:
        # API-2 takes each brain's actions as one flat float list: per agent, its continuous
        # values, then one index per discrete branch.
        flat = {b: np.concatenate([a.continuous.astype(np.float64), a.discrete.astype(np.float64)], axis=1).ravel()
                for b, a in actions.items()}
        message = {"action": flat, "memory": memories, "value": values}
        # Encoded before STEP so that nothing but the send sits between STEPPING and the actions;
        # orjson writes the same compact JSON as json.dumps, several times faster (bench/protocol.py).
        payload = orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)
        self._conn.send(b"STEP")
        self._conn.read_token(b"STEPPING")
        self._conn.send_framed(payload)

    def receive(self) -> Tuple[Dict[str, BehaviorSteps], bool]:
        infos: Dict[str, BehaviorSteps] = {}
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
                    f"but received one whose brain_name is {show(b)} ({raw[:120]!r}).",
                    self.peer.log_path, field="brain_name", expected=f"one of {self._brain_names}",
                    received=show(b))
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
            infos[b] = steps_of(b, self._brains[b], msg, self.peer.log_path,
                                     functools.partial(self._read_frame, b))
        return infos, self._conn.read_done_flag()

    def _read_frame(self, brain: str, camera: int, res: Dict[str, Any]) -> np.ndarray:
        what = f"camera {camera} of brain {brain!r}"
        return self._decode_png(self._conn.read_framed(what, self._frame_limits[brain][camera], brain), res, brain)

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

