"""What a caller gives ``UnityEnvironment.step``, checked and shaped before any byte is sent.

``DecisionChecker`` turns the caller's actions, memories and values (a dict keyed by External
brain, or the bare array of the only one) into flat, finite float arrays of exactly the size each
brain's last ``BrainInfo`` asks for, with errors that name the brain, the size expected and the
row layout. ``AgentMemories`` keeps each agent's memory row where the protocol does not carry
memories to the environment and back (the modern one), so that a recurrent trainer reads them as
it would with API-2.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from unityagents.brain import BrainInfo, BrainParameters
from unityagents.exception import UnityActionException

ActionInput = Union[None, float, Sequence[float], np.ndarray, Dict[str, Any]]


def checked_floats(x: Any, expected: int, kind: str, brain: str, layout: str) -> np.ndarray:
    """``x`` as ``expected`` finite float64 values, or an error naming the brain and the layout."""
    try:
        flat = np.asarray(x, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise UnityActionException(
            f"The {kind} for brain {brain!r} must be numbers; got {type(x).__name__}: {x!r:.100}.") from None
    if flat.size != expected:
        raise UnityActionException(
            f"There was a mismatch between the provided {kind} and environment's expectation: "
            f"brain {brain!r} expects {expected} floats ({layout}) but got {flat.size}.")
    if not np.all(np.isfinite(flat)):
        raise UnityActionException(f"The {kind} for brain {brain!r} contains NaN or infinity: {flat[:8]}...")
    return flat


class DecisionChecker:
    """The checks of one environment's step input, against its brains and their last rows.

    :param brains: every brain of the environment, by name.
    :param external_brain_names: the brains that take input (the list is shared, so that a brain
        that connects later is taken in).
    :param kept_memories: None where memories and values go to the environment (API-2); else
        where the memory rows the caller gives are kept instead, since nothing of them is sent.
    :param takes_deciding_rows_only: whether the actions may cover only the rows that asked for a
        decision (the modern protocol).
    """

    def __init__(self, brains: Dict[str, BrainParameters], external_brain_names: List[str],
                 kept_memories: Optional["AgentMemories"], takes_deciding_rows_only: bool):
        self._brains = brains
        self._external = external_brain_names
        self._kept = kept_memories
        self._deciding_rows_only = takes_deciding_rows_only

    def by_brain(self, x: ActionInput, kind: str) -> Dict[str, Any]:
        """The input keyed by External brain: a dict as given, or the bare input of the only one."""
        if x is None:
            return {}
        if isinstance(x, dict):
            for k in x:
                if k not in self._external:
                    what = ("a broadcasting brain; only External brains take input"
                            if k in self._brains else "not a brain of this environment")
                    raise UnityActionException(
                        f"The {kind} was given for brain {k!r}, which is {what}. "
                        f"External brains: {self._external}.")
            return dict(x)
        if len(self._external) == 1:
            return {self._external[0]: x}
        if not self._external:
            raise UnityActionException(
                f"There are no external brains in the environment, step cannot take a {kind} input.")
        raise UnityActionException(
            f"You have {len(self._external)} External brains; give the {kind} as a dict "
            f"keyed by brain name ({self._external}).")

    def check(self, action: Dict[str, Any], memory: Dict[str, Any], value: Dict[str, Any],
              n_agents: Dict[str, int], n_deciding: Dict[str, int]) -> Tuple[Dict[str, Any], ...]:
        """The actions, memories and values to send, per External brain, checked against the rows of
        each brain's last ``BrainInfo`` (``n_agents``, of which ``n_deciding`` asked for a decision)."""
        actions: Dict[str, Any] = {}
        memories: Dict[str, Any] = {}
        values: Dict[str, Any] = {}
        for b in self._external:
            params = self._brains[b]
            n = n_agents.get(b, 0)
            deciding = n_deciding.get(b, n)
            if action.get(b) is None:
                if deciding == 0:
                    action[b] = np.zeros(n * params.action_width)
                else:
                    raise UnityActionException(
                        f"You need to input an action for the brain {b!r} ({n} agents, "
                        f"{params.action_width} value(s) each).")
            expected = n * params.action_width
            if (self._deciding_rows_only and deciding != n
                    and np.size(action[b]) == deciding * params.action_width):
                expected = deciding * params.action_width  # only the rows that asked for a decision
            layout = f"{n} agents x {params.action_width}"
            if params.is_hybrid:  # say how a row is laid out, which a wrong width most likely missed
                layout += (f": {params.action_space_size} continuous values, then one index per discrete branch "
                           f"{params.action_branches}")
            actions[b] = checked_floats(action[b], expected, "action", b, layout)
            m = memory.get(b)
            if self._kept is not None:  # the protocol carries no memories: keep them here
                self._kept.keep(b, m, n)
                memories[b] = []
                values[b] = []
                continue
            memories[b] = ([0.0] * (n * params.memory_space_size) if m is None else
                           checked_floats(m, n * params.memory_space_size, "memory", b,
                                          f"{n} agents x memorySize {params.memory_space_size}"))
            v = value.get(b)
            values[b] = [0.0] * n if v is None else checked_floats(v, n, "value", b, f"{n} agents x 1")
        return actions, memories, values


class AgentMemories:
    """Each agent's memory row (recurrent policies) between the step that gave it and its next report."""

    def __init__(self) -> None:
        self._rows: Dict[str, Dict[Any, np.ndarray]] = {}  # brain -> agent -> memory row
        self._last_agents: Dict[str, List[Any]] = {}

    def keep(self, brain: str, memory: Any, n: int) -> None:
        """Remember the memory rows the caller gave for the ``n`` rows of the brain's last info."""
        store = self._rows.setdefault(brain, {})
        if memory is None or n == 0:
            return
        try:
            rows = np.asarray(memory, dtype=np.float32).reshape(n, -1)
        except (TypeError, ValueError):
            raise UnityActionException(
                f"The memory for brain {brain!r} must be numbers, one row per agent of its last BrainInfo "
                f"({n} agents); got {np.size(memory)} values.") from None
        last = self._last_agents.get(brain, [])
        for agent, row in zip(last, rows):
            store[agent] = row

    def restore(self, infos: Dict[str, BrainInfo]) -> None:
        """Each row's memory as the trainer left it; zeros for new agents and after a done."""
        for b, info in infos.items():
            self._last_agents[b] = list(info.agents)
            store = self._rows.get(b)
            if not store:
                continue
            width = len(next(iter(store.values())))
            memories = np.zeros((len(info.agents), width), np.float32)
            for r, agent in enumerate(info.agents):
                if info.local_done[r]:
                    store.pop(agent, None)
                elif agent in store:
                    memories[r] = store[agent]
            info.memories = memories
