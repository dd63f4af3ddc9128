"""Interact: walk to a button and press it, a task that needs hybrid actions (modern protocol only).

Each agent starts at the centre of an open plane; a button lies at a random direction, 0.5 to 1.0
away. Two continuous actions move the agent (each clamped to [-1, 1], times ``SPEED`` per step,
as Unity's example agents clamp what they receive); one discrete branch of two says whether to
press (1, the agent stands still) or not (0). Pressing within ``REACH`` of the button gives +1
and ends the episode; pressing anywhere else costs 0.2 and wastes the step. Getting closer earns
0.2 per unit of distance (guidance for the continuous part), every step costs 0.005, and an
episode lasts at most 40 decisions.

So both parts are needed to score well (means over 200 episodes of scripted policies): walking
to the button and pressing there scores about 1.09 (``heuristic``); walking there while pressing
at random about 0.31; walking without ever pressing about -0.05; never moving -0.2 at best
(waiting), -2.2 when pressing all along.

State (3 floats): the button's offset from the agent (x, y) and its distance.
Actions: continuous (move x, move y), then the branch index (0 wait, 1 press).
"""
from __future__ import annotations

import numpy as np

from academy.scene import BrainSpec, Scene

SPEED = 0.15
REACH = 0.3
MAX_STEP = 39  # done after 40 decisions
APPROACH_BONUS = 0.2
STEP_COST = 0.005
MISS_PENALTY = 0.2


class Interact(Scene):
    """8 agents on ``InteractBrain``: state cont 3, actions 2 continuous + one branch of 2."""

    academy_name = "InteractAcademy"
    brains = (BrainSpec(name="InteractBrain", n_agents=8, state_size=3, action_size=2, action_space="continuous",
                        discrete_branches=(2,), action_descriptions=("Move x", "Move y", "Press"),
                        max_step=MAX_STEP),)

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        n = self.brains[0].n_agents
        self.position = np.zeros((n, 2))
        self.button = np.zeros((n, 2))

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        angle = self.rng.uniform(0.0, 2.0 * np.pi, len(index))
        distance = self.rng.uniform(0.5, 1.0, len(index))
        self.position[index] = 0.0
        self.button[index] = np.column_stack([np.cos(angle), np.sin(angle)]) * distance[:, None]

    def _distance(self) -> np.ndarray:
        return np.linalg.norm(self.button - self.position, axis=1)

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        action = actions["InteractBrain"]
        before = self._distance()
        press = action[:, 2] >= 0.5
        reached = before <= REACH
        move = np.clip(action[:, :2], -1.0, 1.0) * SPEED
        self.position = np.where(press[:, None], self.position, np.clip(self.position + move, -2.0, 2.0))
        after = self._distance()
        reward = APPROACH_BONUS * (before - after) - STEP_COST
        reward = np.where(press, np.where(reached, 1.0, -MISS_PENALTY - STEP_COST), reward)
        return {"InteractBrain": (reward, press & reached)}

    def states(self, brain: str) -> np.ndarray:
        return np.column_stack([self.button - self.position, self._distance()])

    def heuristic(self, brain: str) -> np.ndarray:
        """Walk straight to the button, press once within reach."""
        offset = self.button - self.position
        distance = np.linalg.norm(offset, axis=1, keepdims=True)
        move = np.clip(offset / np.maximum(distance, 1e-9) * np.minimum(distance / SPEED, 1.0), -1.0, 1.0)
        press = (distance[:, 0] <= REACH).astype(float)
        return np.column_stack([move, press])
