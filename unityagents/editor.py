"""Training in the Unity Editor: listen for it, wait for the Play button, and wait again when it leaves play mode.

The Editor is an environment that nobody launches: ``UnityEnvironment(file_name=None)`` listens on
127.0.0.1:5004 (the Editor's port; ``base_port`` moves it) and waits ``start_timeout`` seconds for
the user to press Play. When the Editor leaves play mode it ends the exchange with a status-400
call, as a quitting build does; ``EditorConnection``, the factory of a run's one environment, then
has the run saved (``on_leave``) and waits for Play again, so that the run goes on from where it
stopped. When the Editor does not come back within the wait, or the restart limits are used up,
it raises ``UnityEditorGoneException``: the run was saved, and ends normally.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from unityagents.exception import UnityException, UnityTimeOutException, UnityWorkerInUseException
from unityagents.vector.restart import RestartPolicy

logger = logging.getLogger("unityagents")

#: The port the Unity Editor dials when it enters play mode (ML-Agents' ``EditorPort``).
EDITOR_PORT = 5004
#: What the run's exported graph is named after, where a build would give its file name.
EXPORT_NAME = "Editor"


def listening_message(port: int) -> str:
    """What the user reads while the trainer waits for the Play button."""
    return f"Listening on port {port}. Start training by pressing the Play button in the Unity Editor."


def not_found(port: int, seconds: float) -> UnityTimeOutException:
    """The error when the Editor did not enter play mode (or did not call) within ``seconds``."""
    return UnityTimeOutException(
        f"The Unity Editor did not connect to 127.0.0.1:{port} within {seconds:.0f} s. Check that you pressed "
        "Play; that the Agents' Behavior Parameters > Behavior Type is 'Default' (not 'Heuristic Only' or "
        f"'Inference Only'); that the Editor's port (Project Settings > ML-Agents) is {port} (--base-port sets "
        "the trainer's); and that the scene uses ML-Agents Release 19 or later. Raise --timeout-wait to wait longer.")


def port_taken(port: int, error: UnityWorkerInUseException) -> UnityWorkerInUseException:
    """The error when another trainer (or program) already listens where the Editor calls."""
    return UnityWorkerInUseException(
        f"Couldn't listen for the Unity Editor on 127.0.0.1:{port}: another trainer (or program) is already "
        f"listening there. Stop it first, or listen on another port with --base-port and set the same port in the "
        f"Editor (Project Settings > ML-Agents).", error.worker_id)


class UnityEditorGoneException(UnityException):
    """The Editor left play mode and did not come back (within ``--timeout-wait``, or within the
    restart limits). The run was saved when the Editor left, so this ends the run normally."""

    #: The run is saved; the front end ends with exit status 0.
    ends_run = True


class EditorConnection:
    """The factory of a run's one environment when it is the Editor (``EnvironmentSet``'s ``factory``).

    :param connect: listens and waits for the Editor; returns the connected ``UnityEnvironment``.
    :param policy: the user's restart limits: each return to play mode counts as a restart.
    :param wait_seconds: how long each wait for Play lasts (to say so when it runs out).
    :param resume_hint: the command that continues the run, for the last line of a run the Editor left.
    """

    def __init__(self, connect: Callable[[], Any], policy: Optional[RestartPolicy], wait_seconds: float,
                 resume_hint: str = ""):
        self._connect = connect
        self.policy = policy or RestartPolicy()
        self.wait_seconds = wait_seconds
        self.resume_hint = resume_hint
        self.connections = 0
        #: Called when the Editor has left play mode, before waiting for it again (the run saves there).
        self.on_leave: Callable[[], None] = lambda: None

    def __call__(self, index: int) -> Any:
        if self.connections == 0:
            env = self._connect()
            self.connections += 1
            return env
        logger.warning("The Unity Editor left play mode (or its connection was lost).")
        self.on_leave()
        refusal = self.policy.refusal(index)
        if refusal is not None:
            raise self._gone(f"it may not come back: {refusal}")
        try:
            env = self._connect()
        except UnityTimeOutException:
            raise self._gone(f"it did not come back to play mode within {self.wait_seconds:.0f} s (--timeout-wait)") \
                from None
        self.connections += 1
        logger.info("The Unity Editor is back in play mode: training goes on.")
        return env

    def _gone(self, why: str) -> UnityEditorGoneException:
        hint = f" Continue it with: {self.resume_hint}" if self.resume_hint else " Continue it with --resume."
        return UnityEditorGoneException(f"The Unity Editor left play mode and {why}. The run is saved.{hint}")
