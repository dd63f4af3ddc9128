"""Sorter: visit numbered tiles in ascending order, a task whose number of entities varies per episode.

After Unity's Sorter example (a BufferSensor of numbered tiles, visited in order). Each agent lives
on its own ``GRID`` x ``GRID`` board of cells; at each episode start 1 to ``MAX_TILES`` tiles (drawn
uniformly) are laid on distinct cells other than the agent's, numbered 0 to n-1. The agent moves
one cell per decision (four discrete actions: +x, -x, +y, -y; a wall keeps it in place). Stepping
onto the tile that comes next earns ``1 / n`` and marks it visited; stepping onto any other tile
does nothing; every decision costs ``STEP_COST``; the episode ends when every tile is visited, or
after ``MAX_STEP + 1`` decisions. A perfect episode scores about 0.9 (1 minus the walk).

Sensors (as a modern Unity agent reports them, sorted by name):

* ``BufferSensor``: one row per tile, ``[dx, dy, one-hot of its number (MAX_TILES), visited]``
  (``ENTITY_SIZE`` = 8 floats; the offsets in cells over ``GRID - 1``), in an order shuffled at
  each episode start, the rows beyond n all zeros: shape ``[MAX_TILES, ENTITY_SIZE]`` with the
  dimension properties ``[VariableSize, None]``.
* ``VectorSensor_size7``: the agent's position (x, y in [-1, 1]) and the one-hot of the number to
  visit next.

The policy has to find, among a varying number of rows in any order, the one whose number is the
next, and walk to it: the same function for every row, which attention learns once for all rows
while a network over the padded and flattened rows learns it once per slot. ``SorterFlat`` is the
same scene with the buffer sent as a plain vector sensor of ``MAX_TILES * ENTITY_SIZE`` floats:
that baseline (``bench/variable_length.py``). Over API-2 both send the whole state
(vector then rows), so they are the same there.
"""
from __future__ import annotations

import numpy as np

from academy.buffer_sensor import buffer_sensor
from academy.scene import BrainSpec, Scene, VectorSensor

GRID = 5
MAX_TILES = 5
ENTITY_SIZE = 2 + MAX_TILES + 1
VECTOR_SIZE = 2 + MAX_TILES
MAX_STEP = 49    # done after 50 decisions
STEP_COST = 0.01
#: Action index -> cell move (x, y).
MOVES = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]])
N_AGENTS = 16
BRAIN = "SorterBrain"


def _spec(buffer) -> BrainSpec:
    return BrainSpec(name=BRAIN, n_agents=N_AGENTS, state_size=VECTOR_SIZE + MAX_TILES * ENTITY_SIZE, action_size=4,
                     action_space="discrete", action_descriptions=("+x", "-x", "+y", "-y"), max_step=MAX_STEP,
                     sensors=(VectorSensor(f"VectorSensor_size{VECTOR_SIZE}", VECTOR_SIZE), buffer))


class Sorter(Scene):
    """16 agents on ``SorterBrain``: a BufferSensor of up to 5 tiles plus a vector sensor; 4 discrete actions."""

    academy_name = "SorterAcademy"
    brains = (_spec(buffer_sensor("BufferSensor", MAX_TILES, ENTITY_SIZE, start=VECTOR_SIZE)),)

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        n = N_AGENTS
        self.position = np.zeros((n, 2), np.int64)
        self.tiles = np.zeros((n, MAX_TILES, 2), np.int64)   # tile k's cell, by number
        self.count = np.ones(n, np.int64)                    # tiles this episode
        self.visited = np.zeros(n, np.int64)                 # tiles visited = the next number
        self.slots = np.tile(np.arange(MAX_TILES), (n, 1))   # the buffer row of tile k

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        cells = np.array([(x, y) for x in range(GRID) for y in range(GRID)])
        for i in index:
            chosen = self.rng.choice(len(cells), MAX_TILES + 1, replace=False)
            self.position[i] = cells[chosen[0]]
            self.tiles[i] = cells[chosen[1:]]
            self.count[i] = self.rng.integers(1, MAX_TILES + 1)
            self.slots[i] = self.rng.permutation(MAX_TILES)
        self.visited[index] = 0

    def _next_tile(self) -> np.ndarray:
        """``[n, 2]``: the cell of the tile to visit next (the last tile's once all are visited)."""
        k = np.minimum(self.visited, self.count - 1)
        return self.tiles[np.arange(N_AGENTS), k]

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        action = np.clip(np.asarray(actions[BRAIN])[:, 0].astype(np.int64), 0, 3)
        self.position = np.clip(self.position + MOVES[action], 0, GRID - 1)
        reached = np.all(self.position == self._next_tile(), axis=1) & (self.visited < self.count)
        self.visited += reached
        reward = np.where(reached, 1.0 / self.count, 0.0) - STEP_COST
        return {BRAIN: (reward, self.visited >= self.count)}

    def states(self, brain: str) -> np.ndarray:
        n = N_AGENTS
        vector = np.zeros((n, VECTOR_SIZE))
        vector[:, :2] = self.position / (GRID - 1) * 2.0 - 1.0
        vector[np.arange(n), 2 + np.minimum(self.visited, MAX_TILES - 1)] = 1.0
        rows = np.zeros((n, MAX_TILES, ENTITY_SIZE))
        for k in range(MAX_TILES):
            present = k < self.count
            slot = self.slots[:, k]
            offset = (self.tiles[:, k] - self.position) / (GRID - 1)
            entity = np.zeros((n, ENTITY_SIZE))
            entity[:, :2] = offset
            entity[:, 2 + k] = 1.0
            entity[:, -1] = k < self.visited
            rows[np.arange(n)[present], slot[present]] = entity[present]
        return np.concatenate([vector, rows.reshape(n, -1)], axis=1)

    def heuristic(self, brain: str) -> np.ndarray:
        """Walk to the next tile, along x first (it reads the hidden tile order)."""
        delta = self._next_tile() - self.position
        action = np.where(delta[:, 0] > 0, 0, np.where(delta[:, 0] < 0, 1, np.where(delta[:, 1] > 0, 2, 3)))
        return action[:, None].astype(float)


class SorterFlat(Sorter):
    """Sorter with its tiles padded and flattened into one vector sensor (no variable-length dimension)."""

    brains = (_spec(VectorSensor("BufferSensor", MAX_TILES * ENTITY_SIZE, VECTOR_SIZE)),)
