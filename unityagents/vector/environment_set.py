"""``EnvironmentSet``: the one place that knows a run has several environments.

The controller sees one (``DecisionSteps``, ``TerminalSteps``) per brain, whatever the number of
environments behind it. This module owns the N environments of a run and

* keys every agent by ``(environment index, agent id)`` (``merge_steps``), so that the
  trainers' per-agent state (trajectories, episode rewards, the imitation pairing) never mixes
  two environments;
* steps them **concurrently**: it sends each environment its slice of the actions, then
  collects the answers, so the N scenes simulate at the same time while the trainer infers once
  per brain over the agents of all of them (one ``session.run``, not N), or, overlapped, over
  those that have answered while the others still simulate;
* resets each environment on its own when its Academy is done, and reports which agents lost
  their episode, so that only their trajectories are dropped;
* holds the run's one ``Curriculum``: a lesson change reaches each environment at its next reset;
* restarts an environment that crashed, hung, closed its connection or sent malformed data,
  under the limits users know from ML-Agents (``RestartPolicy``); past a limit it raises a
  ``UnityEnvironmentException`` naming the cause and the environment's log;
* treats an environment in which no agent asks for a decision for too long as failed too:
  ``no_decision_steps`` consecutive steps, or ``no_decision_seconds`` of stepping, without one
  decision request (``unityagents.vector.restart`` says when an environment counts as failed and
  launches it again).

Where an environment runs is a backend's business: a *worker* is anything with the
``EnvironmentWorker`` interface. ``UnityEnvironment`` is the local one (a process on this
machine); ``unityagents.vector.ray_backend`` puts each one in a Ray actor on a cluster node.

Scheduling: ``LockstepStepping`` (``step``, or its halves ``send_step`` and ``receive_step``) is
synchronous (send to all, gather all, infer once); ``OverlappedStepping`` (``send``, ``collect``,
``reset_idle``) steps each environment as soon as its actions are computed, which the controller
uses with two or more environments.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import logging
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from unityagents.base_env import ActionTuple, BehaviorSpec, BehaviorSteps, DecisionSteps, TerminalSteps
from unityagents.brain import BrainParameters
from unityagents.curriculum import AnyResetParameter, Curriculum
from unityagents.exception import UnityEnvironmentException, UnityException
from unityagents.scene_facts import SceneFacts
from unityagents.vector.lockstep import LockstepStepping
from unityagents.vector.overlapped_stepping import OverlappedStepping
from unityagents.vector.restart import (
    RESTARTABLE,
    NoDecisionWatch,
    Relauncher,
    RestartPolicy,
    brains_signature,
    close_quietly,
)

logger = logging.getLogger("unityagents")


class EnvironmentWorker(Protocol):
    """One environment, wherever it runs: what ``EnvironmentSet`` needs of it.

    ``UnityEnvironment`` implements it for a process on this machine.
    """

    brains: Dict[str, BrainParameters]
    external_brain_names: List[str]
    reset_parameters: Dict[str, float]
    academy_name: str
    logfile_path: Optional[str]
    global_done: Optional[bool]
    #: The scene's custom stats sent with the last answer (modern protocol; empty for API-2).
    stats: Dict[str, List[Tuple[float, str]]]
    #: Whether it ends its Academy episodes itself (API-2); a worker without it is taken to.
    resets_by_itself: bool
    #: Whether ``TerminalSteps.obs`` is an ended episode's last observation (not with API-2).
    reports_last_observation: bool

    def reset_send(self, train_mode: bool = True, config: Optional[Dict[str, float]] = None) -> None: ...

    def step_send(self, action: Any = None, memory: Any = None, value: Any = None) -> None: ...

    def receive(self) -> Dict[str, BehaviorSteps]: ...

    def close(self) -> None: ...


#: Launches environment ``index`` (0..N-1); called again with the same index for a restart.
WorkerFactory = Callable[[int], EnvironmentWorker]


def empty_steps(spec: BehaviorSpec) -> BehaviorSteps:
    """Steps with no agents, shaped like the behaviour's (when every environment is down)."""
    return DecisionSteps.empty(spec), TerminalSteps.empty(spec)


def reported_agents(steps: BehaviorSteps) -> List[Hashable]:
    """Every agent a brain's steps name, once: the deciding ones, then those that only ended."""
    decisions, terminals = steps
    deciding = decisions.agent_id.tolist()
    if not len(terminals):
        return deciding
    known = set(deciding)
    return deciding + [a for a in terminals.agent_id.tolist() if a not in known]


def _rows(x: Any, start: int, stop: int) -> Any:
    if isinstance(x, ActionTuple):
        return x.rows(start, stop)
    return None if x is None else np.asarray(x)[start:stop]


class EnvironmentSet(SceneFacts, LockstepStepping, OverlappedStepping):
    """N environments of the same scene or build, seen as one by the controller.

    :param factory: launches environment ``i``; called with ``0..n_envs-1`` at start (in
        parallel threads: start-up is mostly waiting) and again with ``i`` to restart it.
    :param n_envs: how many environments.
    :param curriculum: path of a curriculum JSON file, or None; checked against the reset
        parameters of the environments. Or an object with ``Curriculum``'s interface, whose
        ``get_config()`` is asked once per environment reset.
    :param restart_policy: limits on restarts; None: a failing environment ends the run.
    :param workers: already running workers instead of ``factory`` (they cannot be restarted
        unless ``factory`` is also given).
    :param no_decision_steps: consecutive steps of an environment without any agent asking for a
        decision after which it counts as failed (-1: never).
    :param no_decision_seconds: the same, in seconds spent stepping (the trainers' updates do not
        count); None: no time limit.
    :param schedule: how ``TrainerController`` steps the set: ``"overlapped"`` (each environment
        is sent its actions as soon as they are computed, ``unityagents.vector.overlapped_stepping``) or
        ``"sync"`` (every environment together, ``step``: the interleaving of one run repeats
        exactly in the next). One environment is always stepped synchronously.
    """

    def __init__(self, factory: Optional[WorkerFactory], n_envs: int = 1, curriculum: Optional[str] = None,
                 restart_policy: Optional[RestartPolicy] = None,
                 workers: Optional[Sequence[EnvironmentWorker]] = None, no_decision_steps: int = 10_000,
                 no_decision_seconds: Optional[float] = None, schedule: str = "overlapped"):
        self._init_overlap(schedule)
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise UnityEnvironmentException(f"The number of environments must be an integer >= 1, got {n_envs!r}.")
        self._watch = NoDecisionWatch(no_decision_steps, no_decision_seconds)
        self._factory = factory
        self.restart_policy = restart_policy
        self._relauncher = Relauncher(factory)
        self._workers: List[Optional[EnvironmentWorker]] = list(workers) if workers else self._start(n_envs)
        self.n_envs = len(self._workers)
        try:
            first = self._workers[0]
            self._check_same_scene()
            self._brains: Dict[str, BrainParameters] = dict(first.brains)
            self._brain_names: List[str] = list(first.brains)
            self._external_brain_names: List[str] = list(first.external_brain_names)
            self._reset_parameters = dict(first.reset_parameters)
            if curriculum is None or isinstance(curriculum, str):
                self._curriculum = Curriculum(curriculum, self._reset_parameters if self.resets_by_itself
                                              else AnyResetParameter())
            else:  # an object with Curriculum's interface (the Release 22 environment parameters)
                self._curriculum = curriculum
                if hasattr(curriculum, "check_scene"):
                    curriculum.check_scene(self._reset_parameters if self.resets_by_itself else None)
        except BaseException:
            self.close()
            raise
        self.train_mode = True
        #: ``timer(name)`` gives a context manager that times a phase (the controller's timers); no-op by default.
        self.timer: Callable[[str], Any] = lambda name: contextlib.nullcontext()
        self._current: List[Optional[Dict[str, BehaviorSteps]]] = [None] * self.n_envs
        self._pending: Dict[int, str] = {}  # environments to reset before the next step: index -> why
        self._sent = None  # a send_step not received yet (LockstepStepping)
        #: The scenes' custom stats of the last step, over every environment: ``{key: [(value, aggregation)]}``.
        self.stats: Dict[str, List[Tuple[float, str]]] = {}
        self._closed = False

    @classmethod
    def of(cls, env: EnvironmentWorker) -> "EnvironmentSet":
        """One running environment as a set (for scripts and tests that built it themselves).

        The set shares ``env``'s curriculum; a failure of ``env`` is raised, not restarted.
        """
        envs = cls(None, workers=[env])
        if getattr(env, "curriculum", None) is not None:
            envs._curriculum = env.curriculum
        return envs

    # ------------------------------------------------------------------ start-up
    def _start(self, n_envs: int) -> List[Optional[EnvironmentWorker]]:
        if self._factory is None:
            raise UnityEnvironmentException("EnvironmentSet needs a factory or running workers.")
        if n_envs == 1:
            return [self._factory(0)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(n_envs, 16)) as pool:
            futures = [pool.submit(self._factory, i) for i in range(n_envs)]
            concurrent.futures.wait(futures)
        started = [f.result() for f in futures if f.exception() is None]
        failed = [(i, f.exception()) for i, f in enumerate(futures) if f.exception() is not None]
        if failed:
            for w in started:
                w.close()
            index, error = failed[0]
            if not isinstance(error, UnityException):
                raise error
            others = f" ({len(failed) - 1} other environment(s) failed too)" if len(failed) > 1 else ""
            raise type(error)(f"Environment {index} of {n_envs} could not start{others}, so none was kept "
                              f"running: {error}") from error
        return started

    def _check_same_scene(self) -> None:
        first = self._workers[0]
        reference = brains_signature(first.brains)
        for i, w in enumerate(self._workers[1:], start=1):
            if brains_signature(w.brains) != reference:
                raise UnityEnvironmentException(
                    f"Environment {i} has other brains than environment 0 "
                    f"({sorted(w.brains)} vs {sorted(first.brains)}, or different sizes). "
                    "Every environment of a run must be the same scene or build.")

    # ------------------------------------------------------------------ what the controller reads
    @property
    def no_decision_steps(self) -> int:
        return self._watch.no_decision_steps

    @property
    def no_decision_seconds(self) -> Optional[float]:
        return self._watch.no_decision_seconds

    @property
    def academy_name(self) -> str:
        return self._workers[0].academy_name if self._workers[0] is not None else ""

    @property
    def logfile_paths(self) -> List[Optional[str]]:
        return [w.logfile_path if w is not None else None for w in self._workers]

    @property
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        """Each brain's sensors (in ``DecisionSteps.obs`` order) and actions."""
        return {name: params.behavior_spec for name, params in self._brains.items()}

    @property
    def needs_reset(self) -> bool:
        """Some environment is done (its Academy) or was lost: call ``reset_finished`` before ``step``."""
        return bool(self._pending)

    @property
    def resets_by_itself(self) -> bool:
        """Whether the environments end their Academy episodes (API-2's global done). Modern builds
        never do: their agents reset one by one, so a curriculum has to ask for resets."""
        return all(getattr(w, "resets_by_itself", True) for w in self._workers if w is not None)

    @property
    def reports_last_observation(self) -> bool:
        """Whether ``TerminalSteps.obs`` is an ended episode's last observation (not with API-2)."""
        return all(getattr(w, "reports_last_observation", False) for w in self._workers if w is not None)

    def reset_all(self, why: str) -> None:
        """Have every environment reset before the next step (e.g. for a new curriculum lesson)."""
        for i in range(self.n_envs):
            self._pending.setdefault(i, why)

    def restarts(self) -> int:
        """Restarts so far, over all environments."""
        return sum(self.restart_policy.restarts(i) for i in range(self.n_envs)) if self.restart_policy else 0

    # ------------------------------------------------------------------ reset / step
    def reset(self, train_mode: bool = True) -> Dict[str, BehaviorSteps]:
        """Reset every environment with the curriculum's current lesson; the first merged steps."""
        self.train_mode = bool(train_mode)
        self._pending = {i: "the run starts" for i in range(self.n_envs)}
        info, _ = self.reset_finished()
        return info

    def reset_finished(self) -> Tuple[Dict[str, BehaviorSteps], List[Hashable]]:
        """Reset the environments that are done or were lost (restarting the lost ones).

        :return: the merged steps to act on next (the other environments' agents keep their
            state), and the keys of the agents (of every brain) whose episodes ended without a
            result: their trajectories are to be dropped (``Trainer.end_episode(agents)``). All
            of them belong to the environments that were reset.
        """
        ended: List[Hashable] = []
        while self._pending:
            pending, self._pending = self._pending, {}
            for i in sorted(pending):
                if self._current[i] is not None:
                    for steps in self._current[i].values():
                        ended.extend((i, a) for a in reported_agents(steps))
                    self._current[i] = None
                if self._workers[i] is None:
                    self._restart(i, pending[i])
            sent = []
            for i in sorted(pending):
                config = self._curriculum.get_config()  # drawn again for each environment (samplers)
                try:
                    self._workers[i].reset_send(self.train_mode, config)
                    sent.append(i)
                except RESTARTABLE as e:
                    self._lost(i, e)
            for i in sent:
                try:
                    self._current[i] = self._workers[i].receive()
                except RESTARTABLE as e:
                    self._lost(i, e)
        return self._merged(), ended

    def _slices(self, indices: Sequence[int], action: Optional[Mapping[str, Any]], memory: Optional[Mapping[str, Any]],
                value: Optional[Mapping[str, Any]]) -> List[Tuple[int, Tuple[Dict[str, Any], ...]]]:
        """Each live environment of ``indices`` with its rows of the decisions, in ``merged(indices)`` order."""
        action, memory, value = dict(action or {}), dict(memory or {}), dict(value or {})
        out = []
        start = {b: 0 for b in self._external_brain_names}
        for i in indices:
            current = self._current[i]
            if current is None or self._workers[i] is None:  # lost and not yet restarted
                continue
            slices: Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]] = ({}, {}, {})
            for b in self._external_brain_names:
                n = len(current[b][0])
                lo, hi = start[b], start[b] + n
                start[b] = hi
                for part, given in zip(slices, (action, memory, value)):
                    if b in given and given[b] is not None:
                        part[b] = _rows(given[b], lo, hi)
            out.append((i, slices))
        return out

    def _send_one(self, i: int, slices: Tuple[Dict[str, Any], ...]) -> bool:
        try:
            self._workers[i].step_send(*slices)
            return True
        except RESTARTABLE as e:
            self._lost(i, e)
            return False

    def _take_answer(self, i: int, receive: Callable[[], Tuple[Dict[str, BehaviorSteps], float]],
                     began: float) -> bool:
        """Store environment ``i``'s answer to a step sent at ``began``; False if it failed (it is then lost).

        ``receive()`` gives the answer and when it arrived (``timed``), so that the time an
        answer waits for the trainer does not count as time without decisions.
        """
        try:
            self._current[i], arrived = receive()
        except RESTARTABLE as e:
            self._lost(i, e)
            return False
        worker = self._workers[i]
        quiet = self._watch.fault(i, any(len(decisions) for decisions, _ in self._current[i].values()),
                                  arrived - began, worker.logfile_path if worker is not None else None)
        if quiet is not None:
            self._current[i] = None
            self._lost(i, quiet)
            return False
        for key, entries in (getattr(self._workers[i], "stats", None) or {}).items():
            self.stats.setdefault(key, []).extend(entries)
        if self._workers[i].global_done:
            self._pending[i] = "its Academy is done"
        return True

    def _empty(self, brain: str) -> BehaviorSteps:
        return empty_steps(self._brains[brain].behavior_spec)

    def _merged(self) -> Dict[str, BehaviorSteps]:
        return self.merged(range(self.n_envs))

    # ------------------------------------------------------------------ failures
    def _lost(self, index: int, error: UnityException) -> None:
        """Environment ``index`` failed: close it; ``reset_finished`` restarts it (or gives up)."""
        if self._factory is None or self.restart_policy is None:
            raise error
        worker = self._workers[index]
        self._workers[index] = None
        # Its agents' trajectories are dropped at the next reset_finished (they are "ended").
        self._pending[index] = f"it failed ({type(error).__name__}: {str(error).splitlines()[0]})"
        self._relauncher.retire(index, worker, error)

    def _restart(self, index: int, why: str) -> None:
        """Launch environment ``index`` again, within the restart policy, retrying failed starts."""
        self._workers[index] = self._relauncher.relaunch(index, why, self.restart_policy, self._brains)
        self._watch.restarted(index)

    # ------------------------------------------------------------------ close
    def close(self) -> None:
        """Close every environment. Safe to call more than once."""
        self._stop_pool()
        for w in getattr(self, "_workers", []):
            if w is not None:
                close_quietly(w, "an environment")
        self._closed = True

    def __enter__(self) -> "EnvironmentSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
