"""How a run stops on a signal: SIGINT or SIGTERM raise ``Stop``, and a save in progress finishes first.

``learn.py`` installs the handlers once, early, in the main thread; the controller wraps every
write of checkpoints and exports in ``shielded()``, so that a signal arriving while files are
written waits until they are whole and is raised right after.
"""
from __future__ import annotations

import contextlib
import logging
import signal

logger = logging.getLogger("unityagents")


class Stop(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. ``saved`` tells whether the run saved and exported before stopping."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.saved = False


_shield = {"depth": 0, "deferred": None}


def _on_signal(signum, frame) -> None:
    if _shield["depth"]:
        if _shield["deferred"] is None:
            _shield["deferred"] = signum
        logger.warning("%s received while saving: the save finishes first, then the run stops.",
                       signal.Signals(signum).name)
        return
    raise Stop(signum)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise ``Stop`` in the main thread (call it from there, once, early)."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


@contextlib.contextmanager
def shielded():
    """Hold SIGINT/SIGTERM back while files are written; a held signal is raised right after."""
    _shield["depth"] += 1
    try:
        yield
    finally:
        _shield["depth"] -= 1
        if _shield["depth"] == 0 and _shield["deferred"] is not None:
            signum, _shield["deferred"] = _shield["deferred"], None
            raise Stop(signum)
