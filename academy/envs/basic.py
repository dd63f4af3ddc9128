"""Basic: walk left or right along a line of 20 cells to one of two goals (``BasicAgent.cs``).

The agent starts at cell 10. Cell 7 is the small goal (+0.1, done), cell 17 the large one (+1, done);
every other step costs −0.01. The goal step's reward replaces the step cost, as the Unity script
assigns it, so always walking right scores 6 × −0.01 + 1 = 0.94. The state is discrete: the cell
index, sent as one float.
"""
from __future__ import annotations

import numpy as np

from academy.scene import BrainSpec, Scene

START, SMALL_GOAL, LARGE_GOAL, CELLS = 10, 7, 17, 20


class Basic(Scene):
    """One agent on ``BasicBrain``: state discrete 20, action discrete 2 (0 left, 1 right)."""

    academy_name = "BasicAcademy"
    # Unity's Basic has no maxStep; 100 keeps a dithering policy from running forever.
    brains = (BrainSpec(name="BasicBrain", n_agents=1, state_size=CELLS, action_size=2,
                        state_space="discrete", action_space="discrete",
                        action_descriptions=("Left", "Right"), max_step=100),)

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.position = np.full(self.brains[0].n_agents, START)

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        self.position[index] = START

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        action = actions["BasicBrain"][:, 0].astype(int)
        move = np.where(action == 1, 1, np.where(action == 0, -1, 0))  # other values: stay, as in C#
        self.position = np.clip(self.position + move, 0, CELLS - 1)
        small, large = self.position == SMALL_GOAL, self.position == LARGE_GOAL
        reward = np.where(large, 1.0, np.where(small, 0.1, -0.01))
        return {"BasicBrain": (reward, small | large)}

    def states(self, brain: str) -> np.ndarray:
        return self.position[:, None].astype(float)

    def heuristic(self, brain: str) -> np.ndarray:
        """``BasicDecision``: always right, towards the large goal."""
        return np.ones((self.brains[0].n_agents, 1))
