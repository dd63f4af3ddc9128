"""Errors raised by the Python side of the wire.

Every message says what was expected, what arrived and what the user can do about it. The
hierarchy follows the original API-2 package (``UnityException`` at the root) so that user code
catching ``UnityEnvironmentException`` or ``UnityTimeOutException`` keeps working; the finer
subclasses below let callers (and tests) tell a dead environment from a malformed message.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Optional, Set

logger = logging.getLogger("unityagents")


class UnityException(Exception):
    """Any error related to the environment or to training against it."""


class UnityEnvironmentException(UnityException):
    """Starting, configuring, resetting or closing the environment failed."""


class UnityActionException(UnityException):
    """The actions, memories or values given to ``step`` do not fit the environment."""


class UnityTimeOutException(UnityException):
    """The environment did not answer within the timeout.

    :param message: what we were waiting for.
    :param log_file_path: the environment's log file; its error blocks are appended to the
        message so the cause shows up where the user looks first.
    """

    def __init__(self, message: str, log_file_path: Optional[str] = None):
        self.log_file_path = log_file_path
        super().__init__(message + _log_hint(log_file_path))


class UnityCommunicationException(UnityEnvironmentException):
    """The connection closed, the process died, or a message did not follow the protocol."""

    def __init__(self, message: str, log_file_path: Optional[str] = None):
        self.log_file_path = log_file_path
        super().__init__(message + _log_hint(log_file_path))


class UnityProtocolException(UnityCommunicationException):
    """The other end speaks another protocol or version, or sent a message that does not parse.

    Raised, for example, when an API-2 listener receives an HTTP/2 preface (a modern build), when
    a gRPC listener receives API-2 bytes, when the communication version is not 1.x, or when a
    protobuf message is truncated.
    """


class UnityMessageException(UnityCommunicationException):
    """A message of the environment has a field of the wrong type, size or value.

    Raised at the boundary, before anything of the message reaches a trainer: a string reward, a
    ``states`` that is not a list, NaN or a float32 overflow in a state, a negative ``memorySize``,
    a frame length larger than the brain can need, JSON nested too deeply, duplicate agent ids...
    Non-finite values sent by the environment are its error, never the trainer's.

    :param brain: the brain whose message it is (None for the AcademyParameters as a whole).
    :param agent: the agent whose info it is, when one is to blame (modern protocol).
    :param field: the field, e.g. ``states`` or ``brainParameters[0].memorySize``.
    :param expected: what the protocol allows there. :param received: what arrived (shortened).
    """

    def __init__(self, message: str, log_file_path: Optional[str] = None, *, brain: Optional[str] = None,
                 field: Optional[str] = None, expected: Optional[str] = None, received: Any = None,
                 agent: Any = None):
        self.brain, self.field, self.expected, self.received = brain, field, expected, received
        self.agent = agent
        super().__init__(message, log_file_path)


class UnityObservationException(UnityMessageException):
    """An observation disagrees with its brain's parameters (its size or shape), or a camera
    frame does not decode."""


class UnityCommunicatorStoppedException(UnityCommunicationException):
    """The environment ended the exchange itself: the build quit, or the Editor left play mode."""


class UnityWorkerInUseException(UnityEnvironmentException):
    """The port of this worker id is taken (another environment or run listens on it).

    ``UnityWorkerInUseException(worker_id)`` (mlagents_envs' form) builds its message from
    ``MESSAGE_TEMPLATE``; ``UnityWorkerInUseException(message, worker_id)`` gives one.

    :param message: what happened and what to do, or the worker id alone.
    :param worker_id: the worker id whose port (base port + worker id) could not be listened on.
    """

    MESSAGE_TEMPLATE = (
        "Couldn't start socket communication because worker number {} is still in use. "
        "You may need to manually close a previously opened environment "
        "or use a different worker number."
    )

    def __init__(self, message: Any = None, worker_id: Optional[int] = None):
        if worker_id is None and message is not None and not isinstance(message, str):
            worker_id, message = message, None
        self.worker_id = 0 if worker_id is None else worker_id
        super().__init__(self.MESSAGE_TEMPLATE.format(self.worker_id) if message is None else message)


class UnitySideChannelException(UnityEnvironmentException):
    """A side channel's message cannot be written or read (mlagents_envs' name, for its scripts)."""


class UnityPolicyException(UnityException):
    """A policy cannot act on what it was given (mlagents_envs' name, for its scripts)."""


# Logs that this process created itself (a built-in scene's log in our log folder, the -logFile
# we passed to a modern build). Only these are ever read into a message: a path the environment
# names (its AcademyParameters' logPath, the gRPC initialisation's log_path) is only shown, or an
# environment could make the trainer read any file (a key, /etc/shadow) into its errors and logs.
_OWN_LOGS: Set[str] = set()
_OWN_LOGS_LOCK = threading.Lock()


def register_own_log(path: str) -> None:
    """Mark ``path`` as a log this process created, so that errors may quote its error blocks."""
    with _OWN_LOGS_LOCK:
        _OWN_LOGS.add(os.path.abspath(path))


def is_own_log(path: Optional[str]) -> bool:
    """Whether ``path`` is a log this process created (see ``register_own_log``)."""
    if not path:
        return False
    with _OWN_LOGS_LOCK:
        return os.path.abspath(path) in _OWN_LOGS


def _read_own_log(path: str, limit: int = 1 << 20) -> Optional[str]:
    """The last ``limit`` bytes of one of our logs, opened without following a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - limit))
            return f.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None


def _log_hint(log_file_path: Optional[str]) -> str:
    """The error blocks of the environment's log when we created it, else where to find it."""
    if not log_file_path:
        return ""
    if not is_own_log(log_file_path):
        return f"\nThe environment says its log is at {log_file_path}."
    if not os.path.isfile(log_file_path):
        return f"\nNo environment log was found at {log_file_path}."
    text = _read_own_log(log_file_path)
    if text is None:
        return f"\nThe environment log at {log_file_path} could not be read."
    lines = text.splitlines()
    blocks, current = [], None
    for line in lines:
        if line.strip() in ("Exception", "Error") or line.startswith("Traceback"):
            current = [line]
            blocks.append(current)
        elif current is not None:
            if not line.strip():
                current = None
            else:
                current.append(line)
    tail = "\n".join("\n".join(b) for b in blocks[-3:])
    hint = f"\nSee the environment's log for details: {log_file_path}"
    return hint + ("\n" + tail if tail else "")
