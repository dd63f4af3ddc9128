"""Updates that run beside acting: one background thread for the ``threaded`` trainers of a run.

A ``threaded`` trainer whose update can be split (its ``prepare_update`` returns the work, as
``OnPolicyTrainer``'s does) has its update run here while the controller's thread keeps acting,
stepping the environments and collecting. Both threads use the run's one Session, which
TensorFlow allows; the kernels of ``Session.run`` release the GIL, so on two cores the update's
arithmetic and the acting loop's Python overlap. Acting reads the weights while the update
writes them, so a threaded run is not bit-reproducible.

At most one update per trainer is in flight: the next one first waits for the previous one, so
a trainer never falls more than one update behind its data. Every error of an update is raised
on the controller's thread, at the trainer's next update or at the next ``wait`` (every save and
export waits first, so a checkpoint never holds weights halfway through an update).
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, Optional

from trainers.trainer.base import Trainer


class BackgroundUpdates:
    """The updates in flight (one per trainer at most) and the thread that runs them.

    Updates of different trainers run one after the other on the same thread: on the few cores
    a run has, two updates at once would only slow each other and the acting loop down.
    """

    def __init__(self) -> None:
        self._executor: Optional[ThreadPoolExecutor] = None
        self._in_flight: Dict[str, Future] = {}
        #: Seconds the background thread spent in updates since the run began, and how many it ran.
        self.seconds = 0.0
        self.count = 0

    def start(self, trainer: Trainer, work: Callable[[], None]) -> None:
        """Run ``work`` (from ``trainer.prepare_update()``) once the trainer's previous update is done."""
        self.wait(trainer.brain_name)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainer-update")
        self._in_flight[trainer.brain_name] = self._executor.submit(self._timed, work)

    def _timed(self, work: Callable[[], None]) -> None:
        start = time.perf_counter()
        try:
            work()
        finally:
            self.seconds += time.perf_counter() - start
            self.count += 1

    def wait(self, brain: Optional[str] = None) -> None:
        """Block until the update of ``brain`` (None: of every trainer) is done; raise its error."""
        names = [brain] if brain is not None else list(self._in_flight)
        for name in names:
            future = self._in_flight.get(name)
            if future is None:
                continue
            try:
                future.result()
            finally:  # an interrupted wait keeps the update in flight, so that the next wait finds it
                if future.done():
                    self._in_flight.pop(name, None)

    def close(self) -> None:
        """Wait for every update (their errors are raised), then stop the thread."""
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None


__all__ = ["BackgroundUpdates"]
