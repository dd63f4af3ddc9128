"""How a run stops on a signal: SIGINT or SIGTERM set a stop request that the run takes at a safe point.

The handlers never raise at whatever bytecode the main thread happens to run (inside TensorFlow's
or NumPy's wrappers, or half-way through a buffer's bookkeeping). They only record the request;
the run takes it where stopping is safe:

* ``check_stop()`` raises ``Stop`` if a request is pending: the controller calls it between
  environment steps and after every save;
* ``stop_requested()`` (``trainers.stopping``, where the request is kept) tells long loops to end
  early without raising: the trainers' updates break between minibatches (also on the background
  update thread, where nothing may raise);
* inside ``interruptible()`` (waiting on an environment: a launch, a reset, a step's answer) a
  signal raises ``Stop`` at once, since a wait holds nothing half done;
* inside ``shielded()`` (writing checkpoints and exports) a signal only warns: the files are
  finished first, and the request is raised right after, when the outermost shield ends.

A second signal adds nothing (but a SIGTERM outranks a SIGINT not yet taken): the request
stands, and a save in progress finishes.
``learn.py`` installs the handlers once, early, in the main thread.
"""
from __future__ import annotations

import contextlib
import faulthandler
import logging
import signal
import sys

from trainers.stopping import clear_stop_request, pending_request, request_stop, stop_requested, take_request

__all__ = ["Stop", "install_signal_handlers", "report_native_crashes", "request_stop", "stop_requested",
           "clear_stop_request", "check_stop", "interruptible", "shielded"]
logger = logging.getLogger("unityagents")


class Stop(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. ``saved`` tells whether the run saved and exported before stopping."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.saved = False


#: ``shield``: depth of ``shielded()``; ``waits``: depth of ``interruptible()``.
_state = {"shield": 0, "waits": 0}


def _on_signal(signum, frame) -> None:
    first = stop_requested() is None
    request_stop(signum)
    name = signal.Signals(signum).name
    if _state["shield"]:
        logger.warning("%s received while saving: the save finishes first, then the run stops.", name)
        return
    if _state["waits"]:
        raise _take()
    if first:
        logger.info("%s received: the run stops at its next safe point (between steps or updates).", name)


def _take() -> Stop:
    return Stop(take_request())


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM request a stop (call it from the main thread, once, early); no request is pending after.

    A native crash (an abort of the C library, a segmentation fault) also prints the Python stack
    of every thread before the process dies, so that its report says where it happened."""
    clear_stop_request()
    report_native_crashes()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)
        # The kernel may deliver the signal to any thread (TensorFlow's, gRPC's): their blocking reads and
        # writes are resumed rather than failed with EINTR. The waits of interruptible() poll, and polls
        # are cut short whatever this says, so they still end at once.
        signal.siginterrupt(signum, False)


def report_native_crashes() -> bool:
    """Print every thread's Python stack to stderr on SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL
    (``faulthandler``), unless something (``python -X faulthandler``, pytest) already does; True
    when it is on. A stderr without a file descriptor (captured in-process) leaves it off."""
    if faulthandler.is_enabled():
        return True
    try:
        faulthandler.enable(file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):  # no fileno (io.UnsupportedOperation is an OSError)
        return False
    return True


def check_stop() -> None:
    """A safe point: raise ``Stop`` for a pending request (taking it), unless files are being written."""
    if pending_request() is not None and not _state["shield"]:
        raise _take()


@contextlib.contextmanager
def interruptible():
    """A wait that a signal may cut short: a pending request is raised on entry, a signal inside raises."""
    check_stop()
    _state["waits"] += 1
    try:
        yield
    finally:
        _state["waits"] -= 1


@contextlib.contextmanager
def shielded():
    """Hold SIGINT/SIGTERM back while files are written; a pending request is raised right after."""
    _state["shield"] += 1
    waits, _state["waits"] = _state["waits"], 0  # nothing raises inside a save, even within a wait
    try:
        yield
    except BaseException:  # the save's own error goes on; a pending request waits for the next safe point
        _state["waits"] = waits
        _state["shield"] -= 1
        raise
    _state["waits"] = waits
    _state["shield"] -= 1
    if _state["shield"] == 0:
        check_stop()
