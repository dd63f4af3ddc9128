"""What a caller gives ``UnityEnvironment.step``, checked and shaped before any byte is sent.

``DecisionChecker`` checks the caller's actions (an ``ActionTuple`` per External brain, in a dict
keyed by brain, or the bare one of the only one) against each behaviour's action spec and the
agents of its last ``DecisionSteps``, and, where the protocol carries them (API-2), its memories
and values as flat, finite float arrays of exactly the size each brain asks for; the errors name
the brain, the size expected and what arrived.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from unityagents.base_env import ActionTuple
from unityagents.brain import BrainParameters
from unityagents.exception import UnityActionException

ActionInput = Union[None, float, Sequence[float], np.ndarray, Dict[str, Any]]
#: What ``step`` takes as actions: the ``ActionTuple`` of the only External brain, or one per brain.
Actions = Union[None, ActionTuple, Dict[str, ActionTuple]]


def checked_floats(x: Any, expected: Optional[int], kind: str, brain: str, layout: str) -> np.ndarray:
    """``x`` as ``expected`` (None: any number of) finite float64 values, or an error naming the brain."""
    try:
        flat = np.asarray(x, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise UnityActionException(
            f"The {kind} for brain {brain!r} must be numbers; got {type(x).__name__}: {x!r:.100}.") from None
    if expected is not None and flat.size != expected:
        raise UnityActionException(
            f"There was a mismatch between the provided {kind} and environment's expectation: "
            f"brain {brain!r} expects {expected} floats ({layout}) but got {flat.size}.")
    if not np.all(np.isfinite(flat)):
        raise UnityActionException(f"The {kind} for brain {brain!r} contains NaN or infinity: {flat[:8]}...")
    return flat


class DecisionChecker:
    """The checks of one environment's step input, against its brains and their last steps.

    :param brains: every brain of the environment, by name.
    :param external_brain_names: the brains that take input (the list is shared, so that a brain
        that connects later is taken in).
    :param carries_memories: whether memories and values go to the environment (API-2); where
        they do not, what the caller gives of them is not sent.
    """

    def __init__(self, brains: Dict[str, BrainParameters], external_brain_names: List[str], carries_memories: bool):
        self._brains = brains
        self._external = external_brain_names
        self._carries_memories = carries_memories

    def by_brain(self, x: Any, kind: str) -> Dict[str, Any]:
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
              n_deciding: Dict[str, int]) -> Tuple[Dict[str, Any], ...]:
        """The actions (an ``ActionTuple`` per External brain), memories and values to send, checked
        against the ``n_deciding`` agents of each brain's last ``DecisionSteps``."""
        actions: Dict[str, ActionTuple] = {}
        memories: Dict[str, Any] = {}
        values: Dict[str, Any] = {}
        for b in self._external:
            params = self._brains[b]
            spec = params.behavior_spec.action_spec
            n = n_deciding.get(b, 0)
            given = action.get(b)
            if given is None:
                if n:
                    raise UnityActionException(
                        f"You need to input an action for the brain {b!r}: an ActionTuple for its {n} deciding "
                        f"agents ({spec}).")
                given = spec.empty_action(0)
            elif not isinstance(given, ActionTuple):
                raise UnityActionException(
                    f"The action for brain {b!r} must be an ActionTuple(continuous, discrete) for its {n} deciding "
                    f"agents ({spec}); got {type(given).__name__}. Build it with ActionTuple(...), or from rows of "
                    "continuous values then branch indices with the brain's behavior_spec.action_spec.tuple_of(rows).")
            actions[b] = spec.validate(given, n, b)
            if not self._carries_memories:
                memories[b], values[b] = [], []
                continue
            m = memory.get(b)
            memories[b] = ([0.0] * (n * params.memory_space_size) if m is None else
                           checked_floats(m, n * params.memory_space_size, "memory", b,
                                          f"{n} agents x memorySize {params.memory_space_size}"))
            v = value.get(b)
            values[b] = [0.0] * n if v is None else checked_floats(v, n, "value", b, f"{n} agents x 1")
        return actions, memories, values
