"""The run's stop request, as the trainers read it: a long update ends early between minibatches when it is set.

The run (``runner.stopping``) sets the request on SIGINT or SIGTERM and raises it at its safe
points. A trainer, built in or a plugin, only reads ``stop_requested()``: safe from any thread,
it never raises, and stays set once the run took the request (an update on the background thread
still ends early while the run saves).
"""
from __future__ import annotations

import signal
from typing import Optional

#: ``request``: the signal number of the stop the run has not taken yet; ``stopping``: of the first
#: request, kept once taken.
_state = {"request": None, "stopping": None}


def request_stop(signum: int = signal.SIGINT) -> None:
    """Request a stop as the signal ``signum`` would (for code that stops a run without a signal).

    A SIGTERM outranks a SIGINT not yet raised: signals that arrive together are handled in the
    order of their numbers, not of their arrival, and a supervisor that sent SIGTERM expects 143."""
    if _state["request"] is None or (_state["request"] == signal.SIGINT and signum == signal.SIGTERM):
        _state["request"] = signum
    if _state["stopping"] is None:
        _state["stopping"] = signum


def stop_requested() -> Optional[int]:
    """The signal number of the run's stop request, or None: long loops end early when it is set.

    Safe from any thread; it never raises, and stays set once the request was raised (an update
    on the background thread still ends early while the run saves)."""
    return _state["stopping"]


def pending_request() -> Optional[int]:
    """The signal number of the request the run has not taken yet, or None."""
    return _state["request"]


def take_request() -> Optional[int]:
    """Take the pending request (the run raises it now); ``stop_requested()`` stays set."""
    signum, _state["request"] = _state["request"], None
    return signum


def clear_stop_request() -> None:
    """Forget the request (a new run in the same process, or a test)."""
    _state["request"] = _state["stopping"] = None
