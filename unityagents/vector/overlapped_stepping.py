"""Overlapped stepping: each environment steps on its own clock, the trainer infers in between.

``EnvironmentSet.step`` is synchronous: it sends every environment its actions, waits for all of
them, and the trainer then infers once over every agent. The trainer idles while the scenes
simulate, and the scenes idle while the trainer infers and decodes. The overlapped schedule
removes both waits (ML-Agents steps each worker this way; EnvPool calls it ``batch_size <
num_envs``):

* ``send(indices, ...)`` hands the environments ``indices`` their actions and returns at once;
  a thread per environment waits for its answer (``receive`` blocks on a socket, which releases
  the GIL, so the waits overlap with the trainer's inference);
* ``collect()`` blocks until at least one environment in flight has answered and returns every
  one that has, so the trainer infers once over all of them while the others still simulate.
  Each waiting thread puts its environment's answer on one queue as it arrives, so a collect
  costs the answers it takes, not the number of environments in flight;
* ``reset_idle()`` resets the environments that are due a reset (their Academy is done, they
  were lost, or a new lesson asks for it) among those not in flight; one that is in flight is
  reset when it has answered, so its last transition is kept, as with the synchronous schedule.

The data are those of the synchronous schedule: each environment receives the actions computed
from the observation it last sent, by the policy of the moment they were computed; only the
interleaving of the environments changes (which agents share an inference call, and so which
exploration noise each one draws).
"""
from __future__ import annotations

import concurrent.futures
import queue
import time
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

from unityagents.base_env import BehaviorSteps, merge_steps
from unityagents.exception import UnityEnvironmentException


def timed(receive: Callable[[], Dict[str, BehaviorSteps]]) -> Tuple[Dict[str, BehaviorSteps], float]:
    """``receive()`` and the monotonic time its answer arrived."""
    return receive(), time.monotonic()


#: One environment's answer on the answer queue: (index, (steps, arrival time) or None, its failure or None).
Answer = Tuple[int, Optional[Tuple[Dict[str, BehaviorSteps], float]], Optional[BaseException]]


def _wait_and_post(index: int, receive: Callable[[], Dict[str, BehaviorSteps]],
                   answers: "queue.SimpleQueue[Answer]") -> None:
    """A pool thread's job: wait for environment ``index``'s answer and post it (or its failure)."""
    try:
        answers.put((index, timed(receive), None))
    except BaseException as e:  # handed to the trainer's thread, which restarts or raises
        answers.put((index, None, e))


def _answer_of(answer: Answer) -> Callable[[], Tuple[Dict[str, BehaviorSteps], float]]:
    def get() -> Tuple[Dict[str, BehaviorSteps], float]:
        if answer[2] is not None:
            raise answer[2]
        return answer[1]
    return get

#: The schedules an ``EnvironmentSet`` can be driven with (``TrainerController`` reads ``schedule``).
SCHEDULES = ("overlapped", "sync")


class OverlappedStepping:
    """The overlapped schedule's half of ``EnvironmentSet`` (it needs the set's workers and state)."""

    _inflight: Dict[int, Tuple["concurrent.futures.Future[Any]", float]]
    _pool: Optional[concurrent.futures.ThreadPoolExecutor]
    #: Answers of the environments in flight, in the order they arrived (their pool threads post them).
    _answers: "queue.SimpleQueue[Answer]"

    def _init_overlap(self, schedule: str) -> None:
        if schedule not in SCHEDULES:
            raise UnityEnvironmentException(
                f"The stepping schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}. 'overlapped' "
                "steps each environment as soon as its actions are computed; 'sync' steps all of them together.")
        self.schedule = schedule
        self._inflight = {}
        self._pool = None
        self._answers = queue.SimpleQueue()

    @property
    def in_flight(self) -> List[int]:
        """The environments that were sent actions and have not answered yet (``collect`` gets them)."""
        return sorted(self._inflight)

    @property
    def needs_idle_reset(self) -> bool:
        """Some environment that is not in flight is due a reset: call ``reset_idle`` before acting on it."""
        return any(i not in self._inflight for i in self._pending)

    def merged(self, indices: Sequence[int]) -> Dict[str, BehaviorSteps]:
        """The current steps of the environments ``indices`` (live ones), merged in that order."""
        live = [(i, self._current[i]) for i in indices if self._current[i] is not None
                and self._workers[i] is not None]
        return {b: merge_steps([(i, c[b]) for i, c in live]) if live else self._empty(b)
                for b in self._brain_names}

    def send(self, indices: Sequence[int], action: Optional[Mapping[str, Any]] = None,
             memory: Optional[Mapping[str, Any]] = None, value: Optional[Mapping[str, Any]] = None) -> None:
        """Send the environments ``indices`` their rows of the decisions; their answers arrive in
        the background (``collect``).

        The rows follow ``merged(indices)``'s decision steps: each environment's agents, in the order of
        ``indices``. An environment that fails to take its actions is restarted by the next
        ``reset_idle``.
        """
        busy = [i for i in indices if i in self._inflight or i in self._pending]
        if busy:
            raise UnityEnvironmentException(
                f"Environment(s) {busy} cannot be sent actions now: they are in flight (collect() their answer "
                "first) or due a reset (reset_idle()).")
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.n_envs,
                                                               thread_name_prefix="unityagents-env")
        for i, slices in self._slices(indices, action, memory, value):
            if not self._send_one(i, slices):
                continue
            self._inflight[i] = (self._pool.submit(_wait_and_post, i, self._workers[i].receive, self._answers),
                                 time.monotonic())

    def collect(self, timeout: Optional[float] = None) -> List[int]:
        """Wait until at least one environment in flight has answered; the ones that did, in order.

        Their steps are then ``merged(indices)``; ``stats`` holds their custom stats. Environments
        that failed are left out and restarted by the next ``reset_idle``; those whose Academy is
        done are left in and due a reset (``needs_reset``). Nothing in flight: returns ``[]``.
        """
        if not self._inflight:
            return []
        self.stats = {}
        with self.timer("env_wait"):
            try:
                arrived = [self._answers.get(timeout=timeout)]
            except queue.Empty:
                return []
        while True:  # and every other answer already there
            try:
                arrived.append(self._answers.get_nowait())
            except queue.Empty:
                break
        answered = []
        for answer in sorted(arrived, key=lambda a: a[0]):
            i = answer[0]
            _, began = self._inflight.pop(i)
            if self._take_answer(i, _answer_of(answer), began):
                answered.append(i)
        return answered

    def reset_idle(self) -> Tuple[List[int], List[Hashable]]:
        """Reset the environments due a reset that are not in flight (restarting lost ones).

        :return: their indices (now acted on like any answered environment) and the keys of the
            agents whose episodes ended without a result (``Trainer.end_episode(agents)``).
        """
        held = {i: why for i, why in self._pending.items() if i in self._inflight}
        for i in held:
            del self._pending[i]
        due = sorted(self._pending)
        try:
            _, ended = self.reset_finished()
        finally:
            self._pending.update(held)
        return [i for i in due if self._current[i] is not None and self._workers[i] is not None], ended

    def _drain(self) -> None:
        """Wait for (and drop) every answer in flight, e.g. before a synchronous step or a close."""
        while self._inflight:
            index, _, _ = self._answers.get()  # a failing environment is closed or restarted by the caller
            self._inflight.pop(index, None)

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._inflight = {}
        self._answers = queue.SimpleQueue()  # answers still to come belong to no step
