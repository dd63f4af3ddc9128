"""``UnityEnvironment``: the Python end of the API-2 socket protocol.

Python is the TCP server and the environment (a Unity build, or a built-in scene of ``academy``)
is the client. The byte sequences are those of the API-2 protocol as of ML-Agents #166
(``shared/reference/api2-facts.md`` §1): unframed AcademyParameters, ``RESET`` →
``CONFIG_REQUEST`` → config JSON, ``STEP`` → ``STEPPING`` → length-prefixed actions, one
length-prefixed state message per subscribed brain and one PNG per agent per camera, each acked
with ``RECEIVED``, then an unframed ``True``/``False`` global-done flag.

Everything that does not change those bytes is hardened: exact-size reads, a listening socket on
127.0.0.1 only, ``TCP_NODELAY`` with one write per message, timeouts everywhere, the launched
process polled while we wait and reaped on every failure, and errors that say what was expected,
what arrived and what to do. This module knows nothing of learning and never imports TensorFlow.
"""
from __future__ import annotations

import atexit
import glob
import io
import json
import logging
import os
import platform
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import orjson
from PIL import Image

from .brain import BrainInfo, BrainParameters
from .curriculum import Curriculum
from .exception import (
    UnityActionException,
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityTimeOutException,
)

logger = logging.getLogger("unityagents")

API_VERSION = "API-2"
_UNITY_EXTENSIONS = (".app", ".exe", ".x86_64", ".x86")
_POLL_SECONDS = 0.2

ActionInput = Union[None, float, Sequence[float], np.ndarray, Dict[str, Any]]


def builtin_scenes() -> List[str]:
    """Names of the scenes shipped in ``academy`` (empty if the package is not importable)."""
    try:
        import academy
    except ImportError:
        return []
    return sorted(academy.SCENES)


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


class UnityEnvironment:
    """A running environment: a Unity build or a built-in ``academy`` scene, over a local socket.

    :param file_name: a Unity build (``3DBall``, ``3DBall.x86_64``, ``builds/3DBall.app``) or
        the name of a built-in scene (``3DBall``, ``Basic``, ``GridWorld``, ...). A Unity build
        next to the working directory wins over a built-in scene of the same name.
    :param worker_id: added to ``base_port``, so that several environments can run at once.
    :param base_port: first port to listen on (127.0.0.1 only).
    :param curriculum: path of a curriculum JSON file (see ``Curriculum``), or None.
    :param seed: passed as ``--seed`` to built-in scenes (API-2 Unity builds take no seed).
    :param timeout_wait: seconds to wait for any single answer of the environment.
    :param start_timeout: seconds to wait for the environment to start and connect.
    :param log_dir: where the output of a built-in scene goes (a temporary folder by default).
    :param env_args: extra command-line arguments for the launched build or scene (e.g.
        ``["--frame-time-ms", "5"]`` for a built-in scene that emulates a heavy engine).
    """

    def __init__(
        self,
        file_name: str,
        worker_id: int = 0,
        base_port: int = 5005,
        curriculum: Optional[str] = None,
        seed: Optional[int] = None,
        timeout_wait: float = 30.0,
        start_timeout: float = 60.0,
        log_dir: Optional[str] = None,
        env_args: Sequence[str] = (),
    ):
        atexit.register(self.close)
        self._env_args = [str(a) for a in env_args]
        self._loaded = False
        self._closed = False
        self._proc: Optional[subprocess.Popen] = None
        self._conn: Optional[_Connection] = None
        self._listener: Optional[socket.socket] = None
        self._global_done: Optional[bool] = None
        self._log_path: Optional[str] = None
        self._timeout_wait = float(timeout_wait)
        self._n_agents: Dict[str, int] = {}
        self._awaiting = False  # a reset or step was sent; receive() reads its answer
        self.port = int(base_port) + int(worker_id)
        self.worker_id = int(worker_id)
        self._listener = self._bind(self.port, worker_id)
        try:
            self._launch(file_name, seed, log_dir)
            self._connect(file_name, float(start_timeout))
            self._read_academy_parameters()
            self._curriculum = Curriculum(curriculum, self._reset_parameters)
        except BaseException:
            self.close()
            raise
        self._loaded = True
        logger.info("'%s' started successfully!\n%s", self._academy_name, self)

    # ------------------------------------------------------------------------ start-up
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

    @staticmethod
    def find_unity_binary(file_name: str) -> Optional[str]:
        """The Unity build that ``file_name`` names, by the platform rules of API-2, or None."""
        name = file_name.strip()
        for ext in _UNITY_EXTENSIONS:
            if name.endswith(ext):
                name = name[: -len(ext)]
        cwd = os.getcwd()
        system = platform.system()
        if system == "Darwin":
            base = os.path.basename(os.path.normpath(name))
            candidates = [os.path.join(cwd, name + ".app", "Contents", "MacOS", base),
                          os.path.join(name + ".app", "Contents", "MacOS", base)]
        elif system == "Windows":
            candidates = [os.path.join(cwd, name + ".exe"), name + ".exe"]
        else:
            candidates = [os.path.join(cwd, name + ".x86_64"), os.path.join(cwd, name + ".x86"),
                          name + ".x86_64", name + ".x86"]
        for candidate in candidates:
            found = glob.glob(candidate)
            if found:
                return found[0]
        return None

    def _launch(self, file_name: str, seed: Optional[int], log_dir: Optional[str]) -> None:
        binary = self.find_unity_binary(file_name)
        if binary is not None:
            logger.info("Launching the Unity build %s on port %d", binary, self.port)
            self._log_path = os.path.join(os.getcwd(), "unity-environment.log")
            # Own session: Ctrl-C reaches the trainer, which saves, then closes the environment.
            self._proc = subprocess.Popen([binary, "--port", str(self.port)] + self._env_args,
                                          start_new_session=True)
            return
        scenes = builtin_scenes()
        scene = os.path.basename(file_name.strip())
        if scene not in scenes:
            raise UnityEnvironmentException(
                f"Couldn't launch the {file_name!r} environment: no Unity build matches it "
                f"(looked for {file_name}.x86_64 / .x86 / .app / .exe) and it is not a built-in "
                f"scene. Built-in scenes: {', '.join(scenes) or '(academy is not installed)'}."
            )
        log_dir = log_dir or os.path.join(tempfile.gettempdir(), "unityagents")
        os.makedirs(log_dir, exist_ok=True)
        self._log_path = os.path.abspath(os.path.join(log_dir, f"{scene}-worker{self.worker_id}.log"))
        cmd = [sys.executable, "-m", "academy", scene, "--port", str(self.port)]
        if seed is not None:
            cmd += ["--seed", str(int(seed))]
        cmd += self._env_args
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["academy"].__file__)))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        logger.info("Launching the built-in scene %s on port %d (log: %s)", scene, self.port, self._log_path)
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True)

    def _connect(self, file_name: str, start_timeout: float) -> None:
        deadline = time.monotonic() + start_timeout
        self._listener.settimeout(_POLL_SECONDS)
        while True:
            try:
                sock, _ = self._listener.accept()
                break
            except socket.timeout:
                self._check_process_alive("to connect")
                if time.monotonic() > deadline:
                    raise UnityTimeOutException(
                        f"The environment {file_name!r} did not connect to 127.0.0.1:{self.port} within "
                        f"{start_timeout:.0f} s. Make sure it does not need user interaction to launch, "
                        "that its Academy and External brain(s) are in the scene, and that it was built "
                        "for this API (API-2); raise start_timeout if it is just slow to start.",
                        self._log_path,
                    ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self._timeout_wait)
        self._conn = _Connection(sock, self)

    def _read_academy_parameters(self) -> None:
        p = self._conn.read_json_unframed("AcademyParameters")
        if not isinstance(p, dict):
            raise UnityCommunicationException(
                f"Protocol error: expected the AcademyParameters as a JSON object but received {p!r:.200}.",
                self._log_path,
            )
        api = p.get("apiNumber", "API-1")
        if api != API_VERSION:
            raise UnityEnvironmentException(
                f"The API number is not compatible between Unity and python. Python API: {API_VERSION}, "
                f"Unity API: {api}. Use a Unity build made with the ML-Agents version of this package."
            )
        try:
            self._academy_name = p["AcademyName"]
            self._brain_names = list(p["brainNames"])
            self._external_brain_names = list(p.get("externalBrainNames") or [])
            self._reset_parameters = dict(p.get("resetParameters") or {})
            params = p["brainParameters"]
            if len(params) != len(self._brain_names):
                raise ValueError(f"{len(self._brain_names)} brainNames but {len(params)} brainParameters")
            self._brains = {n: BrainParameters(n, bp) for n, bp in zip(self._brain_names, params)}
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise UnityCommunicationException(
                f"The AcademyParameters sent by the environment are malformed ({type(e).__name__}: {e}). "
                "Expected the keys AcademyName, brainNames, brainParameters, externalBrainNames and "
                "resetParameters of API-2.",
                self._log_path,
            ) from None
        if p.get("logPath"):
            self._log_path = p["logPath"]
        unknown = [b for b in self._external_brain_names if b not in self._brains]
        if unknown:
            raise UnityCommunicationException(
                f"The AcademyParameters name External brains {unknown} that are not in brainNames "
                f"{self._brain_names}.", self._log_path)
        if not self._external_brain_names:
            logger.warning("No External Brains found in the Unity Environment. "
                           "You will not be able to pass actions to your agent(s).")

    # ------------------------------------------------------------------------ failures
    def _check_process_alive(self, what: str) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise UnityCommunicationException(
                f"The environment process exited with code {self._proc.returncode} while we waited for it "
                f"{what}.", self._log_path)

    def _raise_timeout(self, what: str):
        self._check_process_alive(f"to send {what}")
        raise UnityTimeOutException(
            f"The environment took longer than {self._timeout_wait:.0f} s to send {what}. It may be stuck "
            "or paused; raise timeout_wait if it is only slow.", self._log_path) from None

    def _raise_lost(self, what: str, how: str):
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        state = f"the process exited with code {code}" if code is not None else "the process is still running"
        raise UnityCommunicationException(
            f"Lost the environment while waiting for {what}: {how} ({state}). "
            "It probably crashed; check its log.", self._log_path) from None

    # ------------------------------------------------------------------------ properties
    @property
    def curriculum(self) -> Curriculum:
        return self._curriculum

    @property
    def logfile_path(self) -> Optional[str]:
        return self._log_path

    @property
    def brains(self) -> Dict[str, BrainParameters]:
        return self._brains

    @property
    def global_done(self) -> Optional[bool]:
        return self._global_done

    @property
    def academy_name(self) -> str:
        return self._academy_name

    @property
    def number_brains(self) -> int:
        return len(self._brain_names)

    @property
    def number_external_brains(self) -> int:
        return len(self._external_brain_names)

    @property
    def brain_names(self) -> List[str]:
        return self._brain_names

    @property
    def external_brain_names(self) -> List[str]:
        return self._external_brain_names

    @property
    def reset_parameters(self) -> Dict[str, float]:
        return dict(self._reset_parameters)

    def __str__(self) -> str:
        params = dict(self._reset_parameters)
        params.update(self._curriculum.get_config())
        lines = "\n\t\t".join(f"{k} -> {v}" for k, v in params.items())
        return (
            f"Unity Academy name: {self._academy_name}\n"
            f"        Number of Brains: {self.number_brains}\n"
            f"        Number of External Brains : {self.number_external_brains}\n"
            f"        Lesson number : {self._curriculum.get_lesson_number}\n"
            f"        Reset Parameters :\n\t\t{lines}\n"
            + "\n".join(str(self._brains[b]) for b in self._brain_names)
        )

    # ------------------------------------------------------------------------ reset / step
    def _require_loaded(self) -> None:
        if not self._loaded or self._closed:
            raise UnityEnvironmentException("No Unity environment is loaded.")

    def _require_idle(self) -> None:
        self._require_loaded()
        if self._awaiting:
            raise UnityEnvironmentException(
                "A reset or step was sent and its answer not yet received; call receive() first.")

    def reset_send(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None,
                   lesson: Optional[int] = None) -> None:
        """The first half of ``reset``: send it; the environment resets while the caller goes on.

        ``receive()`` returns the first ``BrainInfo``. Splitting the exchange lets a set of
        environments reset (or step) all at once before collecting any of them.
        """
        self._require_idle()
        if config is None:
            config = self._curriculum.get_config(lesson)
        elif config:
            logger.info("Academy reset with parameters: %s", ", ".join(f"{k} -> {v}" for k, v in config.items()))
        for k, v in config.items():
            if k not in self._reset_parameters:
                raise UnityEnvironmentException(
                    f"The reset parameter {k!r} is not a parameter of this environment. "
                    f"Its parameters are: {sorted(self._reset_parameters) or 'none'}.")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise UnityEnvironmentException(
                    f"The value for reset parameter {k!r} must be an integer or a float, got {v!r}.")
        self._conn.send(b"RESET")
        self._conn.read_token(b"CONFIG_REQUEST")
        message = {"train_model": bool(train_mode), "parameters": {k: float(v) for k, v in config.items()}}
        self._conn.send(json.dumps(message).encode("utf-8"))
        self._awaiting = True

    def reset(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None,
              lesson: Optional[int] = None) -> Dict[str, BrainInfo]:
        """Reset the Academy and return the first ``BrainInfo`` of every subscribed brain.

        :param train_mode: the engine's training configuration (fast) or inference (slow).
        :param config: reset parameters to set; by default the curriculum's current lesson.
        :param lesson: take the reset parameters of this lesson instead of the current one.
        """
        self.reset_send(train_mode, config, lesson)
        return self.receive()

    def step(self, action: ActionInput = None, memory: ActionInput = None,
             value: ActionInput = None) -> Dict[str, BrainInfo]:
        """Send one decision per External brain and return the next ``BrainInfo`` of every brain.

        Each argument is a dict keyed by External brain name, or (with exactly one External
        brain) the bare array. Memories and values default to zeros.
        """
        self.step_send(action, memory, value)
        return self.receive()

    def step_send(self, action: ActionInput = None, memory: ActionInput = None,
                  value: ActionInput = None) -> None:
        """The first half of ``step``: check and send the decisions; ``receive()`` gets the result.

        Between the two the environment simulates, so a caller driving several environments
        sends to all of them before receiving from any.
        """
        self._require_idle()
        if self._global_done is None:
            raise UnityActionException(
                "You cannot conduct step without first calling reset. Reset the environment with 'reset()'")
        if self._global_done:
            raise UnityActionException("The episode is completed. Reset the environment with 'reset()'")
        action = self._by_brain(action, "action")
        memory = self._by_brain(memory, "memory")
        value = self._by_brain(value, "value")
        message: Dict[str, Dict[str, Any]] = {"action": {}, "memory": {}, "value": {}}
        for b in self._external_brain_names:
            params = self._brains[b]
            n = self._n_agents[b]
            if action.get(b) is None:
                if n == 0:
                    action[b] = []
                else:
                    raise UnityActionException(
                        f"You need to input an action for the brain {b!r} ({n} agents, "
                        f"{params.action_width} value(s) each).")
            message["action"][b] = self._checked(action[b], n * params.action_width, "action", b,
                                                 f"{n} agents x {params.action_width}")
            m = memory.get(b)
            message["memory"][b] = ([0.0] * (n * params.memory_space_size) if m is None else
                                    self._checked(m, n * params.memory_space_size, "memory", b,
                                                  f"{n} agents x memorySize {params.memory_space_size}"))
            v = value.get(b)
            message["value"][b] = [0.0] * n if v is None else self._checked(v, n, "value", b, f"{n} agents x 1")
        # Encoded before STEP so that nothing but the send sits between STEPPING and the actions;
        # orjson writes the same compact JSON as json.dumps, several times faster (bench/protocol.py).
        payload = orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)
        self._conn.send(b"STEP")
        self._conn.read_token(b"STEPPING")
        self._conn.send_framed(payload)
        self._awaiting = True

    def receive(self) -> Dict[str, BrainInfo]:
        """The second half of ``reset_send`` / ``step_send``: the next ``BrainInfo`` of every brain."""
        self._require_loaded()
        if not self._awaiting:
            raise UnityEnvironmentException(
                "receive() was called with no reset or step in flight; call reset_send() or step_send() first.")
        self._awaiting = False
        return self._get_state()

    def _by_brain(self, x: ActionInput, kind: str) -> Dict[str, Any]:
        if x is None:
            return {}
        if isinstance(x, dict):
            for k in x:
                if k not in self._external_brain_names:
                    what = ("a broadcasting brain; only External brains take input"
                            if k in self._brains else "not a brain of this environment")
                    raise UnityActionException(
                        f"The {kind} was given for brain {k!r}, which is {what}. "
                        f"External brains: {self._external_brain_names}.")
            return dict(x)
        if len(self._external_brain_names) == 1:
            return {self._external_brain_names[0]: x}
        if not self._external_brain_names:
            raise UnityActionException(
                f"There are no external brains in the environment, step cannot take a {kind} input.")
        raise UnityActionException(
            f"You have {len(self._external_brain_names)} External brains; give the {kind} as a dict "
            f"keyed by brain name ({self._external_brain_names}).")

    @staticmethod
    def _checked(x: Any, expected: int, kind: str, brain: str, layout: str) -> np.ndarray:
        try:
            flat = np.asarray(x, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise UnityActionException(
                f"The {kind} for brain {brain!r} must be numbers; got {type(x).__name__}: {x!r:.100}.") from None
        if flat.size != expected:
            raise UnityActionException(
                f"There was a mismatch between the provided {kind} and environment's expectation: "
                f"brain {brain!r} expects {expected} floats ({layout}) but got {flat.size}.")
        if not np.all(np.isfinite(flat)):
            raise UnityActionException(f"The {kind} for brain {brain!r} contains NaN or infinity: {flat[:8]}...")
        return flat

    def _get_state(self) -> Dict[str, BrainInfo]:
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
                    self._log_path) from None
            infos[b] = self._brain_info(b, params, msg)
        self._global_done = self._conn.read_done_flag()
        return infos

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
                "agents, states, rewards, actions, memories, dones.", self._log_path) from None
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
        self._n_agents[b] = n
        state = np.asarray(states, dtype=np.float32).reshape(n, params.state_width)
        memory = (np.asarray(memories, dtype=np.float32).reshape(n, params.memory_space_size) if memories
                  else np.zeros((n, params.memory_space_size), np.float32))
        prev = np.asarray(actions, dtype=np.float32).reshape(n, -1) if n else np.array([])
        return BrainInfo(observations, state, memory, rewards, agents, dones, prev)

    def _check_size(self, brain: str, field: str, got: int, expected: int, layout: str) -> None:
        if got != expected:
            raise UnityEnvironmentException(
                f"Brain {brain!r} sent an invalid {field} field: expected {expected} values ({layout}) "
                f"but received {got}. The brain's parameters and its agents disagree; check the "
                f"brain's state size in the scene.")

    def _decode_png(self, data: bytes, res: Dict[str, Any], brain: str) -> np.ndarray:
        self._conn.send(b"RECEIVED")
        try:
            with Image.open(io.BytesIO(data)) as img:
                pixels = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
        except Exception as e:  # Pillow raises several types for bad images
            raise UnityCommunicationException(
                f"Brain {brain!r} sent a camera frame that is not a readable PNG ({e}).", self._log_path) from None
        if pixels.shape[:2] != (res["height"], res["width"]):
            raise UnityEnvironmentException(
                f"Brain {brain!r} sent a {pixels.shape[1]}x{pixels.shape[0]} frame but declares a camera of "
                f"{res['width']}x{res['height']}.")
        if res.get("blackAndWhite"):
            pixels = pixels.mean(axis=2, keepdims=True)
        return pixels

    # ------------------------------------------------------------------------ close
    def close(self) -> None:
        """Send ``EXIT``, close the sockets and reap the process. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._conn is not None:
            try:
                self._conn.sock.sendall(b"EXIT")
            except OSError:
                pass
            self._conn.sock.close()
        if self._listener is not None:
            self._listener.close()
        if self._proc is not None and self._proc.poll() is None:
            try:  # a connected environment quits on EXIT; one that never connected is killed
                self._proc.wait(timeout=5.0 if self._conn is not None else 0.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._loaded = False

    def __enter__(self) -> "UnityEnvironment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
