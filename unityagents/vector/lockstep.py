"""Lock-step stepping: every environment is sent its actions, then every answer is gathered.

``step`` does both; its halves ``send_step`` and ``receive_step`` let the caller work while the
environments simulate (the controller updates its ``threaded`` trainers there). The overlapped
schedule (``unityagents.vector.overlapped_stepping``) is the other way to drive an ``EnvironmentSet``.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from unityagents.base_env import BehaviorSteps
from unityagents.exception import UnityEnvironmentException
from unityagents.vector.overlapped_stepping import timed


class LockstepStepping:
    """The lock-step schedule's half of ``EnvironmentSet`` (it needs the set's workers and state)."""

    #: A ``send_step`` whose answers were not received yet: (when it was sent, the environments sent to).
    _sent: Optional[Tuple[float, List[int]]]

    def step(self, action: Optional[Mapping[str, Any]] = None, memory: Optional[Mapping[str, Any]] = None,
             value: Optional[Mapping[str, Any]] = None) -> Dict[str, BehaviorSteps]:
        """Send each environment its rows of the decisions, then collect every answer.

        The arguments are dicts keyed by External brain: an ``ActionTuple`` (and, for API-2,
        memories and values) with one row per agent of the ``DecisionSteps`` last returned
        (``reset``, ``reset_finished`` or ``step``), in its order. Environments that
        fail are left out of the result and restarted by the next ``reset_finished``; so are
        the next states of environments whose Academy is done (``needs_reset``).
        """
        self.send_step(action, memory, value)
        return self.receive_step()

    def send_step(self, action: Optional[Mapping[str, Any]] = None, memory: Optional[Mapping[str, Any]] = None,
                  value: Optional[Mapping[str, Any]] = None) -> None:
        """The first half of ``step``: send every environment its rows of the decisions. They
        simulate until ``receive_step``, so the caller can work in the meantime (a trainer's update)."""
        if self._inflight:
            raise UnityEnvironmentException(
                f"Environment(s) {self.in_flight} are in flight (overlapped schedule): collect() their answers "
                "before a synchronous step().")
        if self._pending:
            raise UnityEnvironmentException(
                f"Environment(s) {sorted(self._pending)} must be reset first: call reset_finished() when "
                "needs_reset is set.")
        if self._sent is not None:
            raise UnityEnvironmentException(
                f"Environment(s) {self._sent[1]} were sent a step whose answers were not received yet: call "
                "receive_step() before sending the next one.")
        began = time.monotonic()
        self._sent = (began, [i for i, slices in self._slices(range(self.n_envs), action, memory, value)
                              if self._send_one(i, slices)])

    def receive_step(self) -> Dict[str, BehaviorSteps]:
        """The second half of ``step``: every answer to ``send_step``, merged as ``step`` returns them."""
        if self._sent is None:
            raise UnityEnvironmentException("receive_step() has no step to receive: call send_step() first.")
        (began, sent), self._sent = self._sent, None
        self.stats = {}
        with self.timer("env_wait"):  # the environments simulate; what is left is waiting and decoding
            for i in sent:
                self._take_answer(i, functools.partial(timed, self._workers[i].receive), began)
        return self._merged()
