"""Brain bookkeeping: how each brain is run, and the per-agent fields Unity keeps on its ``Agent``s.

Unity keeps one ``Agent`` object per agent; here a brain's agents are rows of numpy arrays
(``BrainRuntime``), which the Academy loop and the communicators read and write as wholes.
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from academy.scene import BrainSpec

#: Brain types a brain can be switched to (Unity's Player brain is replaced by the scripted Heuristic).
BRAIN_TYPES = ("external", "heuristic", "internal")


class Policy(Protocol):
    """A non-scene decision maker (the Internal brain): states, observations, memories → actions."""

    def decide(self, states: np.ndarray, observations: list[np.ndarray],
               memories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ...


@dataclasses.dataclass
class BrainConfig:
    """How a brain is run: ``kind`` in BRAIN_TYPES, its Internal ``policy``, and ``broadcast``."""

    kind: str
    policy: Policy | None = None
    broadcast: bool = True


class BrainRuntime:
    """The per-agent fields Unity keeps on each ``Agent``, as arrays over one brain's agents."""

    def __init__(self, spec: BrainSpec, index: int, config: BrainConfig) -> None:
        n = spec.n_agents
        self.spec = spec
        self.name = spec.name
        self.config = config
        # Unity sends GetInstanceID()s: stable, arbitrary and usually negative. Mimic that so a client
        # that assumes ids 0..n-1 fails here, not on a real build.
        self.ids = [-(10_000 * (index + 1) + 2 * k) for k in range(n)]
        self.reward = np.zeros(n)
        #: The group reward since the last message (scenes with groups; see ``Scene.group_ids``).
        self.group_reward = np.zeros(n)
        self.done = np.zeros(n, dtype=bool)
        self.steps = np.zeros(n, dtype=np.int64)
        self.action = np.zeros((n, spec.action_width))
        # Unity's inference keeps as many memory floats per agent as the model file says (an ONNX
        # policy's own memory_size); a .bytes policy and Python use the brain's memorySize.
        own = getattr(config.policy, "memory_size", 0) if config.kind == "internal" else 0
        self.memory = np.zeros((n, own if isinstance(own, int) and own > 0 else spec.memory_size))
        self.value = np.zeros(n)
        self.episode_reward = np.zeros(n)
        self.finished: list[float] = []

    @property
    def subscribed(self) -> bool:
        """Whether this brain talks to Python: External brains always, the others when broadcasting."""
        return self.config.kind == "external" or self.config.broadcast
