"""The seam between the environment and the wire: what every protocol's communicator offers.

``UnityEnvironment`` launches the environment, validates what the caller gives it and keeps the
brains' bookkeeping; a ``Communicator`` turns its requests into one protocol's messages and the
environment's answers into per-sensor steps (``unityagents.base_env``). Each protocol has one (``COMMUNICATORS``):

* ``API2Communicator`` (``wire/api2.py``): the raw-socket protocol of ML-Agents #166, Python as the
  TCP server;
* ``GrpcCommunicator`` (``wire/grpc.py``): the modern ML-Agents gRPC protocol (communication API
  1.5.0), Python as the gRPC server.

Both are driven in the same order: ``connect`` -> ``handshake`` -> (``send_reset`` |
``send_step``) -> ``receive`` ... -> ``close``. A send and its receive are split so that a set of
environments can all simulate at once (``UnityEnvironment.reset_send``/``step_send``/``receive``).
What differs between protocols and matters to the environment (which reset parameters exist,
whether memories travel, whether an ended episode's last observation arrives) is answered by the
communicator's class attributes, so that the environment never asks which protocol it speaks.

A communicator sees the environment only through a ``Peer`` (the answer timeout, the log's path,
the process to poll), so nothing here imports ``unityagents.environment``. The limits every
protocol applies to what arrives are here too.
"""
from __future__ import annotations

import abc
import dataclasses
import importlib
import struct
import subprocess
from typing import Dict, List, Optional, Tuple, Type

import numpy as np

from unityagents.base_env import ActionTuple, BehaviorSteps
from unityagents.brain import BrainParameters
from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityTimeOutException,
    UnityWorkerInUseException,
)

#: A stat the environment sent: (value, aggregation), aggregation one of STATS_AGGREGATIONS.
Stat = Tuple[float, str]
STATS_AGGREGATIONS = ("average", "most_recent", "sum", "histogram")

# Limits on what an environment may send: generous for any real scene, far below what would
# exhaust memory.
#: Agents of one brain in one message.
MAX_AGENTS = 100_000
#: Sizes a brain may declare (state size, action size, memory size, a camera's width and height).
MAX_BRAIN_SIZE = 1 << 20
MAX_CAMERA_SIDE = 8192
F32_MAX = float(np.finfo(np.float32).max)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def port_in_use(port: int, worker_id: int, why: str) -> UnityWorkerInUseException:
    """The error for a port this environment cannot listen on, with the way to another one."""
    return UnityWorkerInUseException(
        f"Couldn't listen on 127.0.0.1:{port} (base port {port - worker_id} + worker id {worker_id}): "
        f"{why}. Another environment or training run probably uses that port. Close it, or pick a "
        "free port with a different --worker-id (or --base-port).", worker_id)


def png_size(data: bytes) -> Optional[Tuple[int, int]]:
    """A PNG's (width, height) from its IHDR chunk, without decoding it; None if it is no PNG."""
    if len(data) < 24 or data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height



@dataclasses.dataclass
class Handshake:
    """What an environment says about itself when it connects.

    :param academy_name: the Academy's name (API-2) or the initialisation output's name (gRPC).
    :param brains: parameters of every brain known so far, by name.
    :param external_brain_names: the brains that take actions from Python.
    :param reset_parameters: the Academy's reset parameters with their defaults (API-2); the
        modern protocol declares none.
    :param log_path: where the environment writes its log, when it says so.
    :param first_infos: the first steps per brain when the handshake had to reset the
        environment to learn its brains (gRPC), else None.
    """

    academy_name: str
    brains: Dict[str, BrainParameters]
    external_brain_names: List[str]
    reset_parameters: Dict[str, float]
    log_path: Optional[str] = None
    first_infos: Optional[Dict[str, BehaviorSteps]] = None


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

    Every subclass is built as ``cls(peer, port, worker_id, seed=..., engine_config=...,
    side_channels=...)`` and refuses, with a clear error, the options its protocol has no room for.
    Failures raise ``UnityException`` subclasses naming what was expected, what arrived and what
    to do; the environment closes the communicator and reaps the process on any of them.
    """

    #: The value of ``UnityEnvironment(protocol=...)`` that selects this class.
    protocol: str = ""
    #: Whether the environment declares its reset parameters in the handshake (a reset may then
    #: set only those), rather than accepting any name.
    declares_reset_parameters: bool = True
    #: Whether memories and values travel to the environment and back with every step (where
    #: they do not, the trainers keep each agent's memory).
    carries_memories: bool = True
    #: Whether ``TerminalSteps.obs`` is the ended episode's last observation; API-2 sends none,
    #: so its terminal steps repeat the observation sent with done (the next episode's first).
    reports_last_observation: bool = False
    #: Whether the environment ends its Academy episodes itself (a global done); where it does
    #: not, its agents reset one by one and a curriculum has to ask for resets.
    resets_by_itself: bool = True

    def __init__(self, peer: Peer):
        self.peer = peer
        #: Whether the environment connected (it is then told to quit on ``close``).
        self.connected = False
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
    def send_step(self, actions: Dict[str, ActionTuple], memories: Dict[str, np.ndarray],
                  values: Dict[str, np.ndarray]) -> None:
        """Send one decision per deciding agent (actions checked against each behaviour's spec), and,
        where the protocol carries them, flat memories and values per External brain."""

    @abc.abstractmethod
    def receive(self) -> Tuple[Dict[str, BehaviorSteps], bool]:
        """The answer to the last send: each brain's (``DecisionSteps``, ``TerminalSteps``), and the global done."""

    @abc.abstractmethod
    def close(self) -> None:
        """Tell the environment to quit (if connected) and release the port. Idempotent."""


#: protocol name -> "module:class" of its communicator, imported on first use (only a gRPC
#: environment needs grpcio).
COMMUNICATORS = {
    "api2": "unityagents.wire.api2:API2Communicator",
    "grpc": "unityagents.wire.grpc:GrpcCommunicator",
}


def communicator_class(protocol: str) -> Type[Communicator]:
    """The communicator of ``protocol`` (a key of ``COMMUNICATORS``)."""
    if protocol not in COMMUNICATORS:
        raise UnityEnvironmentException(
            f"Unknown protocol {protocol!r}: expected 'api2' (Unity builds of ML-Agents 0.3, 2018) or "
            "'grpc' (ML-Agents Release 19 and later, communication API 1.5.0).")
    module, _, name = COMMUNICATORS[protocol].partition(":")
    return getattr(importlib.import_module(module), name)
