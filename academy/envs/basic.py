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
#: Per cell: the reward of a step that ends there, and whether that ends the episode (a goal).
CELL_REWARD = np.full(CELLS, -0.01)
CELL_REWARD[SMALL_GOAL], CELL_REWARD[LARGE_GOAL] = 0.1, 1.0
CELL_IS_GOAL = CELL_REWARD > 0


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
        move = (action == 1).astype(int) - (action == 0)  # other values: stay, as in C#
        # Table lookups and min/max: on a few agents each numpy call costs more than its arithmetic, and
        # np.clip or nested np.where take several times as long as these.
        self.position = np.minimum(np.maximum(self.position + move, 0), CELLS - 1)
        return {"BasicBrain": (CELL_REWARD[self.position], CELL_IS_GOAL[self.position])}

    def states(self, brain: str) -> np.ndarray:
        return self.position[:, None].astype(float)

    def heuristic(self, brain: str) -> np.ndarray:
        """``BasicDecision``: always right, towards the large goal."""
        return np.ones((self.brains[0].n_agents, 1))
