"""A scene's training area, copied N times: what Unity's ``TrainingAreaReplicator`` does in a build.

A trainer asks for ``num_areas`` in the modern protocol's handshake (``mlagents-learn --num-areas``);
a Unity build with a ``TrainingAreaReplicator`` then instantiates its area that many times, so one
process serves that many times the agents. ``ReplicatedScene`` does the same for a built-in scene:
it runs ``areas`` independent copies of the scene (each seeded on its own) and shows them as one,
every brain's agents being copy 0's rows, then copy 1's, and so on. Multi-agent groups keep apart:
copy k's group ids are shifted past copy k-1's.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from academy.scene import Scene


class ReplicatedScene(Scene):
    """``areas`` copies of the scene that ``make(seed)`` builds, as one scene.

    :param make: builds one copy from its seed (the scene's class).
    :param seed: copy 0's seed; copy k's is derived from it.
    :param areas: how many copies (at least 1).
    """

    def __init__(self, make: Callable[[int], Scene], seed: int, areas: int) -> None:
        if areas < 1:
            raise ValueError(f"num_areas must be at least 1, got {areas}")
        self.copies = [make(seed)] + [make(int(s)) for s in
                                      np.random.SeedSequence([seed, 1]).generate_state(areas - 1)]
        base = self.copies[0]
        self.base = base
        self.areas = areas
        self.academy_name = base.academy_name
        self.brains = tuple(dataclasses.replace(b, n_agents=b.n_agents * areas) for b in base.brains)
        self.default_reset_parameters = base.default_reset_parameters
        self.reset_parameter_ranges = base.reset_parameter_ranges
        self.max_steps = base.max_steps
        self.frame_to_skip = base.frame_to_skip
        self.behavior_names = base.behavior_names
        self._agents = {b.name: b.n_agents for b in base.brains}
        self.params = base.params
        for copy in self.copies[1:]:
            copy.params = self.params  # the Academy updates this one dict before each reset
        self._group_span: dict[str, int] = {}

    # --- the attributes the Academy and the server set -------------------------------------------------
    @property
    def rng(self) -> np.random.Generator:
        return self.base.rng

    @rng.setter
    def rng(self, value: np.random.Generator) -> None:
        """``Random.InitState(seed)`` reaches every copy: copy 0 takes ``value``, the others streams drawn from it."""
        self.base.rng = value
        for copy in self.copies[1:]:
            copy.rng = np.random.default_rng(int(value.integers(2 ** 63)))

    @property
    def modern_protocol(self) -> bool:
        return self.base.modern_protocol

    @modern_protocol.setter
    def modern_protocol(self, value: bool) -> None:
        for copy in self.copies:
            copy.modern_protocol = value

    # --- one scene over the copies' rows --------------------------------------------------------------
    def _split(self, brain: str, index: np.ndarray):
        n = self._agents[brain]
        index = np.asarray(index)
        for k, copy in enumerate(self.copies):
            mine = index[(index >= k * n) & (index < (k + 1) * n)]
            if mine.size:
                yield copy, mine - k * n

    def _joined(self, brain: str, method: str, *args) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(copy, method)(brain, *args)) for copy in self.copies])

    def academy_reset(self) -> None:
        for copy in self.copies:
            copy.academy_reset()

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        for copy, rows in self._split(brain, index):
            copy.reset_agents(brain, rows)

    def step(self, actions: dict[str, np.ndarray]) -> dict:
        results = []
        for k, copy in enumerate(self.copies):
            mine = {b: a[k * self._agents[b]:(k + 1) * self._agents[b]] for b, a in actions.items()}
            results.append(copy.step(mine))
        return {b: tuple(np.concatenate(parts) for parts in zip(*(r[b] for r in results))) for b in results[0]}

    def states(self, brain: str) -> np.ndarray:
        return self._joined(brain, "states")

    def sensor(self, brain: str, name: str) -> np.ndarray:
        return self._joined(brain, "sensor", name)

    def render(self, brain: str, camera: int) -> np.ndarray:
        return self._joined(brain, "render", camera)

    def heuristic(self, brain: str) -> np.ndarray:
        return self._joined(brain, "heuristic")

    def _optional(self, brain: str, method: str):
        parts = [getattr(copy, method)(brain) for copy in self.copies]
        return None if parts[0] is None else np.concatenate([np.asarray(p) for p in parts])

    def asleep(self, brain: str) -> np.ndarray | None:
        return self._optional(brain, "asleep")

    def action_mask(self, brain: str) -> np.ndarray | None:
        return self._optional(brain, "action_mask")

    def group_ids(self, brain: str) -> np.ndarray | None:
        parts = [copy.group_ids(brain) for copy in self.copies]
        if parts[0] is None:
            return None
        span = self._group_span.setdefault(brain, int(max(np.max(p) for p in parts)) if parts else 0)
        return np.concatenate([np.where(np.asarray(p) > 0, np.asarray(p) + k * span, 0)
                               for k, p in enumerate(parts)])

    def take_stats(self) -> list[tuple[str, float]]:
        return [stat for copy in self.copies for stat in copy.take_stats()]
