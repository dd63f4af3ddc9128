"""GridWorld: reach a goal square and avoid the pits, seen only through a top-down camera.

The grid is ``gridSize`` × ``gridSize`` cells inside a wall; ``numGoals`` goals (+1, done) and
``numObstacles`` pits (−1, done) are placed at random with the agent, and re-drawn on every agent
reset (Unity's ``AgentReset`` calls ``AcademyReset``). Each other step costs −0.01 and an episode
ends after 100 steps. Actions: 0 = +z (up), 1 = −z (down), 2 = −x (left), 3 = +x (right); walls
block a move. The only observation is an 84×84 RGB image, +z at the top.

Over the modern protocol the agent also has Unity's goal signal: a ``GoalSensor`` (a one-hot over
``GOAL_KINDS``, observation type GoalSignal) beside its ``RenderTextureSensor``. Unity's GridWorld
asks for a green plus or a red cross; here every goal is the green kind, so the signal is constant
and the task is unchanged. By name the goal sorts before the camera: ``obs_0`` is the goal.
"""
from __future__ import annotations

import logging
from collections import deque

import numpy as np

from academy.scene import BrainSpec, Camera, CameraSensor, Scene, VectorSensor

log = logging.getLogger("academy.gridworld")

EMPTY, GOAL, PIT = 0, 1, 2
GOAL_KINDS = ("GreenPlus", "RedEx")  # the goal signal's one-hot; this scene's goals are all GreenPlus
SIZE = 84
MOVES = np.array([(0, 1), (0, -1), (-1, 0), (1, 0)])  # (dx, dz) per action
COLOURS = {"wall": (60, 60, 60), "floor": (235, 235, 235), "goal": (40, 200, 60),
           "pit": (220, 40, 40), "agent": (40, 80, 230)}


class GridWorld(Scene):
    """One agent on ``GridWorldBrain``: no vector state, one 84×84 RGB camera, action discrete 4."""

    academy_name = "GridAcademy"
    brains = (BrainSpec(name="GridWorldBrain", n_agents=1, state_size=0, action_size=4,
                        action_space="discrete", cameras=(Camera(SIZE, SIZE, False),),
                        action_descriptions=("Up", "Down", "Left", "Right"), max_step=99,
                        sensors=(VectorSensor("GoalSensor", len(GOAL_KINDS), from_state=False, goal=True),
                                 CameraSensor("RenderTextureSensor", 0))),)
    default_reset_parameters = {"gridSize": 5.0, "numObstacles": 1.0, "numGoals": 1.0}

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self._n = self.brains[0].n_agents
        #: Actions that came back although the mask sent with the agent's last decision disabled
        #: them (a trainer that ignores masks walks into walls); each one is logged as a warning.
        self.masked_actions = 0
        self._sent_mask: np.ndarray | None = None
        self._first_wall_logged = False
        self.academy_reset()

    def academy_reset(self) -> None:
        """Re-size the grid from the reset parameters (they may have changed)."""
        size = max(2, int(round(self.params["gridSize"])))
        goals = max(1, int(round(self.params["numGoals"])))
        pits = max(0, int(round(self.params["numObstacles"])))
        if 1 + goals + pits > size * size:
            raise ValueError(f"GridWorld: gridSize {size} has {size * size} cells, too few for the agent, "
                             f"{goals} goal(s) and {pits} pit(s); lower numGoals/numObstacles")
        self.size, self.goals, self.pits = size, goals, pits
        self.cells = np.zeros((self._n, size, size), dtype=np.int8)   # [agent, x, z]
        self.agent = np.zeros((self._n, 2), dtype=np.int64)           # (x, z)
        self._distance = np.zeros((self._n, size, size))
        # Pixel → cell of the walled grid, so rendering is one fancy-indexing gather.
        cell = SIZE // (size + 2)
        offset = (SIZE - cell * (size + 2)) // 2
        self._pixel_cell = np.clip((np.arange(SIZE) - offset) // cell, 0, size + 1)

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        size = self.size
        for i in index:
            cells = self.rng.permutation(size * size)
            self.agent[i] = divmod(cells[0], size)
            grid = np.zeros(size * size, dtype=np.int8)
            grid[cells[1:1 + self.goals]] = GOAL
            grid[cells[1 + self.goals:1 + self.goals + self.pits]] = PIT
            self.cells[i] = grid.reshape(size, size)
            self._distance[i] = _distance_to_goal(self.cells[i])

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        action = np.clip(actions["GridWorldBrain"][:, 0].astype(int), 0, 3)
        self._count_masked(action)
        self.agent = np.clip(self.agent + MOVES[action], 0, self.size - 1)
        cell = self.cells[np.arange(self._n), self.agent[:, 0], self.agent[:, 1]]
        reward = np.where(cell == GOAL, 1.0, np.where(cell == PIT, -1.0, -0.01))
        return {"GridWorldBrain": (reward, cell != EMPTY)}

    def states(self, brain: str) -> np.ndarray:
        return np.zeros((self._n, 0))

    def sensor(self, brain: str, name: str) -> np.ndarray:
        """``GoalSensor``: the one-hot of the goal kind to reach (always the first, GreenPlus)."""
        goal = np.zeros((self._n, len(GOAL_KINDS)))
        goal[:, 0] = 1.0
        return goal

    def action_mask(self, brain: str) -> np.ndarray:
        """Moves into the wall are disabled (over the modern protocol; API-2 has no masks).

        The mask is remembered until the next frame, which counts the actions it disabled.
        """
        targets = self.agent[:, None, :] + MOVES[None, :, :]
        mask = ((targets < 0) | (targets >= self.size)).any(axis=2)
        if not self._first_wall_logged and mask.any():
            self._first_wall_logged = True
            i = int(np.flatnonzero(mask.any(axis=1))[0])
            log.info("GridWorld: the first wall mask went out (agent %d at cell %s: %s disabled); actions a mask "
                     "disables are counted and logged", i, tuple(int(v) for v in self.agent[i]),
                     ", ".join(np.array(self.brains[0].action_descriptions)[mask[i]]))
        self._sent_mask = mask
        return mask

    def _count_masked(self, action: np.ndarray) -> None:
        """Count (and log) the actions that the mask sent for this decision disabled."""
        mask, self._sent_mask = self._sent_mask, None
        if mask is None:  # no mask went out (API-2, stand-alone, or a frame between decisions)
            return
        for i in np.flatnonzero(mask[np.arange(self._n), action]):
            self.masked_actions += 1
            log.warning("GridWorld: agent %d at cell %s took the masked action %d (%s); %d masked action(s) so far",
                        i, tuple(int(v) for v in self.agent[i]), action[i],
                        self.brains[0].action_descriptions[action[i]], self.masked_actions)

    def render(self, brain: str, camera: int) -> np.ndarray:
        size = self.size
        palette = np.array([COLOURS["floor"], COLOURS["goal"], COLOURS["pit"], COLOURS["agent"],
                            COLOURS["wall"]], dtype=np.uint8)
        # Walled grid of palette indices, rows from +z (top) to −z, columns from −x to +x.
        board = np.full((self._n, size + 2, size + 2), 4, dtype=np.int8)
        board[:, 1:-1, 1:-1] = self.cells.transpose(0, 2, 1)[:, ::-1, :]
        board[np.arange(self._n), size - self.agent[:, 1], 1 + self.agent[:, 0]] = 3
        pixels = board[:, self._pixel_cell[:, None], self._pixel_cell[None, :]]
        return palette[pixels]

    def heuristic(self, brain: str) -> np.ndarray:
        """Step along a shortest path to a goal that avoids the pits (BFS distances from reset)."""
        actions = np.zeros((self._n, 1))
        for i in range(self._n):
            targets = np.clip(self.agent[i] + MOVES, 0, self.size - 1)
            distance = self._distance[i][targets[:, 0], targets[:, 1]]
            actions[i, 0] = int(np.argmin(distance))
        return actions


def _distance_to_goal(cells: np.ndarray) -> np.ndarray:
    """Steps from each cell to the nearest goal without entering a pit (inf on pits)."""
    size = cells.shape[0]
    distance = np.full(cells.shape, np.inf)
    queue = deque()
    for x, z in zip(*np.nonzero(cells == GOAL)):
        distance[x, z] = 0
        queue.append((x, z))
    while queue:
        x, z = queue.popleft()
        for dx, dz in MOVES:
            nx, nz = x + dx, z + dz
            if 0 <= nx < size and 0 <= nz < size and cells[nx, nz] != PIT and distance[nx, nz] == np.inf:
                distance[nx, nz] = distance[x, z] + 1
                queue.append((nx, nz))
    # Unreachable floor still beats a pit, so a boxed-in agent waits instead of jumping in.
    distance[(distance == np.inf) & (cells != PIT)] = 1e6
    return distance
