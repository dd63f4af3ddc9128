"""When an environment of a set counts as failed, and how it is restarted.

An environment fails when it crashes, hangs, closes its connection or sends malformed data
(``RESTARTABLE``), and also when none of its agents asks for a decision for too long
(``NoDecisionWatch``: a modern build answers every step, so a scene whose agents were disabled
would otherwise keep a run going forever without learning anything). A failed environment is
closed and launched again under the limits users know from ML-Agents (``RestartPolicy``);
``Relauncher`` keeps each environment's last error, so that the error raised past a limit names
the cause and the environment's log.
"""
from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, Optional, Tuple

import numpy as np

from unityagents.brain import BrainParameters
from unityagents.exception import (
    UnityCommunicationException,
    UnityEnvironmentException,
    UnityException,
    UnityTimeOutException,
)

logger = logging.getLogger("unityagents")

#: Failures of an environment (not of the trainer) that a restart can cure.
RESTARTABLE = (UnityCommunicationException, UnityTimeOutException, UnityEnvironmentException)


@dataclass
class RestartPolicy:
    """How often a crashed environment may be restarted (per environment, as in ML-Agents).

    :param max_lifetime_restarts: restarts over the whole run; -1 for no limit.
    :param rate_limit_n: at most this many restarts ...; -1 for no limit.
    :param rate_limit_period_s: ... within this many seconds.
    """

    max_lifetime_restarts: int = 10
    rate_limit_n: int = 1
    rate_limit_period_s: float = 60.0
    _history: Dict[int, Deque[float]] = field(default_factory=dict, repr=False)
    _lifetime: Dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_lifetime_restarts", "rate_limit_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < -1:
                raise UnityEnvironmentException(f"{name} must be an integer >= -1 (-1: no limit), got {value!r}.")
        period = self.rate_limit_period_s
        if isinstance(period, bool) or not isinstance(period, (int, float)) or not np.isfinite(period) or period <= 0:
            raise UnityEnvironmentException(f"rate_limit_period_s must be a number of seconds > 0, got {period!r}.")

    def refusal(self, index: int, now: Optional[float] = None) -> Optional[str]:
        """Why environment ``index`` may not restart now, or None (and the restart is counted)."""
        now = time.monotonic() if now is None else now
        lifetime = self._lifetime.get(index, 0)
        if 0 <= self.max_lifetime_restarts <= lifetime:
            return (f"it already restarted {lifetime} time(s), the limit of --max-lifetime-restarts "
                    f"{self.max_lifetime_restarts}")
        recent = self._history.setdefault(index, collections.deque())
        while recent and now - recent[0] >= self.rate_limit_period_s:
            recent.popleft()
        if 0 <= self.rate_limit_n <= len(recent):
            return (f"it restarted {len(recent)} time(s) in the last {self.rate_limit_period_s:g} s, the limit of "
                    f"--restarts-rate-limit-n {self.rate_limit_n} per --restarts-rate-limit-period-s "
                    f"{self.rate_limit_period_s:g}")
        recent.append(now)
        self._lifetime[index] = lifetime + 1
        return None

    def restarts(self, index: int) -> int:
        return self._lifetime.get(index, 0)


def close_quietly(worker: Any, what: str) -> None:
    """Close ``worker``; a dead worker may fail to close, and it is gone either way."""
    try:
        worker.close()
    except Exception:
        logger.debug("closing %s raised", what, exc_info=True)


def brains_signature(brains: Dict[str, BrainParameters]) -> Dict[str, Dict[str, Any]]:
    """What two environments must share to be the same scene: every brain's parameters."""
    return {b: p.to_dict() for b, p in brains.items()}


class Relauncher:
    """Launches failed environments again, within a ``RestartPolicy``, retrying failed starts.

    :param factory: launches environment ``i``.
    """

    def __init__(self, factory: Callable[[int], Any]):
        self.factory = factory
        self._last_errors: Dict[int, Tuple[Optional[UnityException], Optional[str]]] = {}

    def retire(self, index: int, worker: Any, error: UnityException) -> None:
        """Environment ``index`` failed with ``error``: remember it for the message past a limit, close it."""
        logger.warning("Environment %d failed and will be restarted: %s: %s", index, type(error).__name__,
                       str(error).splitlines()[0])
        self._last_errors[index] = (error, worker.logfile_path if worker is not None else None)
        if worker is not None:
            close_quietly(worker, f"the failed environment {index}")

    def relaunch(self, index: int, why: str, policy: RestartPolicy, brains: Dict[str, BrainParameters]) -> Any:
        """Environment ``index`` running again with ``brains`` (those the trainers were built for)."""
        while True:
            error, log_path = self._last_errors.get(index, (None, None))
            refusal = policy.refusal(index)
            if refusal is not None:
                raise UnityEnvironmentException(
                    f"Environment {index} failed and cannot be restarted: {refusal}. Its last error: "
                    f"{type(error).__name__ if error else 'unknown'}: {error}"
                    + (f"\nIts log: {log_path}" if log_path else "")
                    + "\nRaise the limits (--max-lifetime-restarts, --restarts-rate-limit-n) if the environment "
                      "crashes rarely, or fix the crash.")
            logger.warning("Restarting environment %d (restart %d; %s).", index, policy.restarts(index), why)
            try:
                worker = self.factory(index)
                self._check_same_brains(index, worker, brains)
                return worker
            except RESTARTABLE as e:
                self._last_errors[index] = (e, getattr(e, "log_file_path", log_path))
                why = f"its restart failed ({type(e).__name__})"
                logger.warning("Environment %d did not start again: %s", index, str(e).splitlines()[0])

    @staticmethod
    def _check_same_brains(index: int, worker: Any, brains: Dict[str, BrainParameters]) -> None:
        """A restarted environment must have the brains the trainers were built for."""
        if brains_signature(worker.brains) == brains_signature(brains):
            return
        close_quietly(worker, f"the restarted environment {index}")
        raise UnityEnvironmentException(
            f"Environment {index} came back with other brains than the run's ({sorted(worker.brains)} vs "
            f"{sorted(brains)}, or different sizes); the trainers were built for the first ones. Every "
            "environment of a run must be the same scene or build.")


class NoDecisionWatch:
    """Counts, per environment, the steps and seconds of stepping since an agent last asked for a decision.

    :param no_decision_steps: consecutive steps without any decision request after which the
        environment counts as failed (-1: never).
    :param no_decision_seconds: the same, in seconds spent stepping; None: no time limit.
    """

    def __init__(self, no_decision_steps: int, no_decision_seconds: Optional[float]):
        if isinstance(no_decision_steps, bool) or not isinstance(no_decision_steps, int) or no_decision_steps < -1 \
                or no_decision_steps == 0:
            raise UnityEnvironmentException(
                f"no_decision_steps must be an integer >= 1 (-1: no limit), got {no_decision_steps!r}.")
        if no_decision_seconds is not None and not (isinstance(no_decision_seconds, (int, float))
                                                    and np.isfinite(no_decision_seconds) and no_decision_seconds > 0):
            raise UnityEnvironmentException(
                f"no_decision_seconds must be a number of seconds > 0 (or None), got {no_decision_seconds!r}.")
        self.no_decision_steps = no_decision_steps
        self.no_decision_seconds = no_decision_seconds
        self._quiet: Dict[int, Tuple[int, float]] = {}  # index -> (steps, seconds) without a decision

    def restarted(self, index: int) -> None:
        self._quiet[index] = (0, 0.0)

    def fault(self, index: int, decided: bool, seconds: float,
              log_path: Optional[str]) -> Optional[UnityTimeOutException]:
        """The fault of environment ``index`` after a step of ``seconds`` in which an agent asked for a
        decision (``decided``) or none did, if none has for too long; else None."""
        if decided:
            self._quiet[index] = (0, 0.0)
            return None
        steps, total = self._quiet.get(index, (0, 0.0))
        steps, total = steps + 1, total + seconds
        self._quiet[index] = (steps, total)
        if not (0 < self.no_decision_steps <= steps
                or (self.no_decision_seconds is not None and total >= self.no_decision_seconds)):
            return None
        return UnityTimeOutException(
            f"Environment {index}: no agent asked for a decision in {steps} consecutive environment steps "
            f"({total:.0f} s of stepping): is the scene running, are its agents enabled? (Each agent needs a "
            f"Decision Requester or calls to RequestDecision, and Behavior Type 'Default'.) The limits are "
            f"{self.no_decision_steps} steps"
            + (f" or {self.no_decision_seconds:g} s (--timeout)" if self.no_decision_seconds is not None else "")
            + ".", log_path)
