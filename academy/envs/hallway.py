"""Hallway: a T-maze that needs memory (after ``HallwayAgent.cs`` of v0.3, on a grid).

Each agent walks a corridor of 6 cells to a junction with a goal on either side. A coloured cue,
visible only in the first two cells, says which goal is right (cue A: left, cue B: right). At the
junction, turning to the right goal gives +1, to the wrong one −0.1; both end the episode. Every
other step costs −1/100 and an episode lasts at most 100 decisions. Nothing in the state after the
first two cells depends on the cue, so a policy without memory gets the goal right only half the
time (about 0.4 on average) while one that remembers reaches about 0.94.

Actions: 0 forward, 1 back, 2 turn left, 3 turn right (left/right do nothing before the junction).
State (6 floats): progress z/6, at-junction flag, cue A seen, cue B seen, free distance ahead
(a forward ray, 1 = the whole corridor), elapsed fraction of the episode. Over the modern protocol
the first five are a ``RayPerceptionSensor`` and the last a ``VectorSensor_size1``, as Unity's
agent has a ray sensor and collects its step count.
"""
from __future__ import annotations

import numpy as np

from academy.scene import BrainSpec, Scene, VectorSensor

LENGTH = 6        # the junction is cell LENGTH
CUE_CELLS = 2     # the cue can be seen from cells 0 and 1
MAX_STEP = 99     # done after 100 decisions


class Hallway(Scene):
    """8 agents on ``HallwayBrain`` (memorySize 32): state cont 6, action discrete 4."""

    academy_name = "HallwayAcademy"
    brains = (BrainSpec(name="HallwayBrain", n_agents=8, state_size=6, action_size=4, action_space="discrete",
                        memory_size=32, action_descriptions=("Forward", "Back", "Left", "Right"),
                        max_step=MAX_STEP,
                        # Unity's HallwayAgent: a ray perception sensor and the elapsed fraction it collects.
                        sensors=(VectorSensor("RayPerceptionSensor", 5), VectorSensor("VectorSensor_size1", 1, 5))),)

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        n = self.brains[0].n_agents
        self.z = np.zeros(n, dtype=np.int64)
        self.cue = np.zeros(n, dtype=np.int64)     # 0: go left, 1: go right
        self.elapsed = np.zeros(n)

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        self.z[index] = 0
        self.cue[index] = self.rng.integers(0, 2, len(index))
        self.elapsed[index] = 0

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        action = actions["HallwayBrain"][:, 0].astype(int)
        junction = self.z == LENGTH
        turn = junction & ((action == 2) | (action == 3))
        correct = turn & ((action == 3) == (self.cue == 1))
        self.z = np.clip(self.z + (action == 0) - (action == 1), 0, LENGTH)
        self.elapsed += 1
        reward = np.where(correct, 1.0, np.where(turn, -0.1, -1.0 / (MAX_STEP + 1)))
        return {"HallwayBrain": (reward, turn)}

    def states(self, brain: str) -> np.ndarray:
        visible = self.z < CUE_CELLS
        return np.column_stack([self.z / LENGTH, self.z == LENGTH, visible & (self.cue == 0),
                                visible & (self.cue == 1), (LENGTH - self.z) / LENGTH,
                                self.elapsed / (MAX_STEP + 1)]).astype(float)

    def heuristic(self, brain: str) -> np.ndarray:
        """Walk to the junction, then turn to the side the cue named (it reads the hidden cue)."""
        return np.where(self.z < LENGTH, 0, 2 + self.cue)[:, None].astype(float)
