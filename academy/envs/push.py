"""Push: shove a block onto a goal pad (after ``PushAgent.cs``/``GoalInteract.cs``, top-down 2-D).

Each agent has its own 16×16 area with a block of side ``block_size`` and a goal pad of side
``goal_size``. The agent (a unit square) moves 0.5 per decision along ±x or ±z; walking into the
block pushes it along. The block's centre on the pad gives +1 and done; the agent or block leaving
the area (|x| or |z| > 8) gives −1 and done; every step costs −0.005. The block starts within
``x_variation`` of the centre line, so the curriculum (``curricula/push.json``) can make the task
harder by shrinking the goal and the block and spreading the start.

The Academy's ``max_steps`` (3000 decisions) ends the episode globally, which is when a curriculum
lesson may advance (see ``unityagents/curriculum.py``).

Actions (discrete 5): 0 stay, 1 −x, 2 +x, 3 −z, 4 +z. State (12 floats, divided by 8): agent x, z;
block x, z; goal x, z; block − agent x, z; goal − block x, z; then block_size and goal_size.
"""
from __future__ import annotations

import numpy as np

from academy.scene import BrainSpec, Scene

AREA = 8.0
STRIDE = 0.5
MOVES = np.array([(0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0)])


class Push(Scene):
    """8 areas on ``PushBrain``: state cont 12, action discrete 5; Academy maxSteps 3000."""

    academy_name = "PushAcademy"
    brains = (BrainSpec(name="PushBrain", n_agents=8, state_size=12, action_size=5, action_space="discrete",
                        action_descriptions=("Stay", "-x", "+x", "-z", "+z"), max_step=299),)
    default_reset_parameters = {"block_size": 1.0, "goal_size": 1.0, "x_variation": 2.5}
    max_steps = 3000

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        n = self.brains[0].n_agents
        self.agent = np.zeros((n, 2))
        self.block = np.zeros((n, 2))
        self.goal = np.zeros((n, 2))

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        k = index.size
        spread = self.params["x_variation"]
        self.agent[index] = np.column_stack([self.rng.uniform(-2, 2, k), np.full(k, -5.0)])
        self.block[index] = np.column_stack([self.rng.uniform(-spread, spread, k), np.full(k, -1.5)])
        self.goal[index] = np.column_stack([self.rng.uniform(-4, 4, k), self.rng.uniform(2.5, 5.0, k)])

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        move = MOVES[np.clip(actions["PushBrain"][:, 0].astype(int), 0, 4)] * STRIDE
        self.agent = self.agent + move
        # Walking into the block pushes it so that the two squares just touch.
        reach = 0.5 * (1.0 + self.params["block_size"])
        offset = self.block - self.agent
        overlap = np.all(np.abs(offset) < reach, axis=1) & np.any(move != 0, axis=1)
        direction = np.sign(move)
        pushed = np.where(direction != 0, self.agent + direction * reach, self.block)
        self.block = np.where(overlap[:, None], pushed, self.block)
        scored = np.all(np.abs(self.block - self.goal) < 0.5 * self.params["goal_size"], axis=1)
        fell = np.any(np.abs(self.agent) > AREA, axis=1) | np.any(np.abs(self.block) > AREA, axis=1)
        reward = np.where(scored, 1.0, np.where(fell, -1.0, -0.005))
        return {"PushBrain": (reward, scored | fell)}

    def states(self, brain: str) -> np.ndarray:
        n = len(self.agent)
        sizes = np.tile([self.params["block_size"], self.params["goal_size"]], (n, 1))
        return np.concatenate([self.agent, self.block, self.goal, self.block - self.agent,
                               self.goal - self.block, sizes], axis=1) / AREA

    def heuristic(self, brain: str) -> np.ndarray:
        """Push the block along z until it is level with the goal, then along x.

        To push along an axis the agent first walks to the spot behind the block, taking at each
        step the free move (one that does not touch the block) that best closes the distance.
        """
        reach = 0.5 * (1.0 + self.params["block_size"])
        actions = np.zeros((len(self.agent), 1))
        for i, (agent, block, goal) in enumerate(zip(self.agent, self.block, self.goal)):
            gap = goal - block
            axis = 1 if abs(gap[1]) >= 0.25 else 0
            sign = 1.0 if gap[axis] > 0 else -1.0
            behind = (agent[axis] - block[axis]) * sign < 0
            if behind and abs(agent[1 - axis] - block[1 - axis]) < 0.3:
                actions[i] = 1 + 2 * axis + (sign > 0)
                continue
            spot = block.copy()
            spot[axis] -= sign * (reach + 0.25)
            to_spot, away = spot - agent, agent - block
            best, best_score = 0, -np.inf
            for action in range(1, 5):
                step = MOVES[action] * STRIDE
                if np.all(np.abs(block - agent - step) < reach):
                    continue  # would push the block the wrong way
                score = step @ to_spot + 0.01 * (step @ away)
                if score > best_score:
                    best, best_score = action, score
            actions[i] = best
        return actions
