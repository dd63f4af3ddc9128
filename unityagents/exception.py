"""Errors raised by the Python side of the wire.

Every message says what was expected, what arrived and what the user can do about it. The
hierarchy follows the original API-2 package (``UnityException`` at the root) so that user code
catching ``UnityEnvironmentException`` or ``UnityTimeOutException`` keeps working; the finer
subclasses below let callers (and tests) tell a dead environment from a malformed message.
"""
from __future__ import annotations

import logging
import os
from typing import Optional

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


class UnityObservationException(UnityCommunicationException):
    """An observation disagrees with its brain's parameters (its size or shape), or a camera
    frame does not decode."""


def _log_hint(log_file_path: Optional[str]) -> str:
    """The error blocks of the environment's log, or where to find it."""
    if not log_file_path:
        return ""
    if not os.path.isfile(log_file_path):
        return f"\nNo environment log was found at {log_file_path}."
    try:
        with open(log_file_path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return f"\nThe environment log at {log_file_path} could not be read."
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
