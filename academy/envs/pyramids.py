"""Pyramids: press a switch, then find the pyramid it spawns (after Unity's ``PyramidAgent.cs``).

The standard sparse-reward scene. Each agent has a room of its own, a square of ``ROOM`` x ``ROOM``
cells walled all round. It starts on a random cell, facing a random one of the four directions,
with a switch on a random cell at least ``MIN_DISTANCE`` (8) cells away (Manhattan). Walking onto
the switch turns it on and spawns a pyramid at a random place at least as far from the switch: a
plus of five cells, four bricks round the gold brick. Touching the
pyramid (trying to walk into any of its cells) ends the episode with +2. Every other step costs
−1/``MAX_STEP+1``, and the episode ends after ``MAX_STEP + 1`` (150) decisions, so an agent that
never finds the gold scores −1 and one that goes straight for the switch and then the pyramid
about 1.75. The short limit is what makes it hard: wandering, even systematically, rarely presses
the switch and then finds the pyramid in 150 decisions (random play: under 0.1 % of episodes).

Simplifications against Unity's scene, on purpose: the world is a grid; the pyramid does not have
to be toppled (touching it counts as reaching the gold brick on top); there are no stone
obstacles. What makes the task hard is unchanged: nothing but the gold pays, the switch looks like
any other object until it is pressed, and random play rarely presses it and then finds the pyramid
within the step limit.

Actions (one discrete branch of 4): 0 forward, 1 backward (one cell, unless a wall or the pyramid
is in the way), 2 turn left, 3 turn right (90 degrees, on the spot).

State (37 floats, ray-cast-like): 7 rays fanned over the front half-plane (−90° to +90° of the
heading, 30° apart), each reporting what it hits first, one-hot over (wall, switch, brick, gold
brick), and the distance to it divided by the ray's range; then the switch state (1 once pressed)
and the agent's speed (+1 after a step forward, −1 after a step back, 0 after a turn or a blocked
move). Nothing behind the agent is seen, so finding things takes turning round and wandering.
Over the modern protocol those are two sensors, as in Unity's scene: ``RayPerceptionSensor`` (the
35 ray floats) and ``VectorSensor_size2`` (switch state and speed).
"""
from __future__ import annotations

import numpy as np

from academy.scene import BrainSpec, Scene, VectorSensor

ROOM = 16             # cells per side of each room
MAX_STEP = 149        # done after 150 decisions
MIN_DISTANCE = 8      # cells (Manhattan) from the start to the switch, and from the switch to the pyramid
N_AGENTS = 16
RAY_ANGLES = np.deg2rad(np.arange(-90, 91, 30))     # relative to the heading, + is to the right
RAY_RANGE = ROOM * 1.5                              # every ray hits a wall within this distance
#: cell contents
EMPTY, SWITCH, BRICK, GOLD = 0, 1, 2, 3
WALL = 4              # what a ray reports when it leaves the room
#: ray hit types in the order of the state's one-hot
HIT_TYPES = (WALL, SWITCH, BRICK, GOLD)
#: unit steps for headings 0 (+y), 1 (+x), 2 (−y), 3 (−x); turning right adds 1
HEADINGS = np.array([(0, 1), (1, 0), (0, -1), (-1, 0)])
PLUS = np.array([(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)])   # the pyramid's cells around its centre
RAY_FLOATS = len(RAY_ANGLES) * (len(HIT_TYPES) + 1)
STATE_SIZE = RAY_FLOATS + 2


class Pyramids(Scene):
    """16 rooms on ``PyramidsBrain``: state cont 37, action discrete 4 (one branch)."""

    academy_name = "PyramidsAcademy"
    brains = (BrainSpec(name="PyramidsBrain", n_agents=N_AGENTS, state_size=STATE_SIZE, action_size=4,
                        action_space="discrete", action_descriptions=("Forward", "Backward", "Left", "Right"),
                        max_step=MAX_STEP,
                        # Unity's PyramidAgent: a ray perception sensor and CollectObservations' vector.
                        sensors=(VectorSensor("RayPerceptionSensor", RAY_FLOATS),
                                 VectorSensor("VectorSensor_size2", 2, start=RAY_FLOATS))),)

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        n = N_AGENTS
        self.cells = np.zeros((n, ROOM, ROOM), dtype=np.int8)
        self.position = np.zeros((n, 2), dtype=np.int64)
        self.heading = np.zeros(n, dtype=np.int64)
        self.switch = np.zeros((n, 2), dtype=np.int64)
        self.switch_on = np.zeros(n, dtype=bool)
        self.pyramid = np.full((n, 2), -10, dtype=np.int64)   # centre; far outside while not spawned
        self.speed = np.zeros(n)

    # --- episode -----------------------------------------------------------------------------------

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        k = len(index)
        self.cells[index] = EMPTY
        self.position[index] = self.rng.integers(0, ROOM, (k, 2))
        for i in index:   # the switch at least MIN_DISTANCE cells (Manhattan) from the start
            while True:
                switch = self.rng.integers(0, ROOM, 2)
                if np.abs(switch - self.position[i]).sum() >= MIN_DISTANCE:
                    break
            self.switch[i] = switch
        self.heading[index] = self.rng.integers(0, 4, k)
        self.cells[index, self.switch[index, 0], self.switch[index, 1]] = SWITCH
        self.switch_on[index] = False
        self.pyramid[index] = -10
        self.speed[index] = 0.0

    def _spawn_pyramids(self, index: np.ndarray) -> None:
        """A pyramid for each room in ``index``: its plus inside the room, clear of agent and switch."""
        for i in index:
            while True:
                centre = self.rng.integers(1, ROOM - 1, 2)
                cells = centre + PLUS
                far = np.abs(centre - self.switch[i]).sum() >= MIN_DISTANCE
                if far and not np.any(np.all(cells == self.position[i], axis=1)):
                    break
            self.pyramid[i] = centre
            self.cells[i, cells[:, 0], cells[:, 1]] = BRICK
            self.cells[i, centre[0], centre[1]] = GOLD

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        action = actions["PyramidsBrain"][:, 0].astype(np.int64)
        n = N_AGENTS
        self.heading = (self.heading + (action == 3) - (action == 2)) % 4
        sign = np.where(action == 0, 1, np.where(action == 1, -1, 0))
        target = self.position + sign[:, None] * HEADINGS[self.heading]
        inside = np.all((target >= 0) & (target < ROOM), axis=1)
        content = np.where(inside, self.cells[np.arange(n), np.clip(target[:, 0], 0, ROOM - 1),
                                              np.clip(target[:, 1], 0, ROOM - 1)], WALL)
        moving = sign != 0
        touched = moving & ((content == BRICK) | (content == GOLD))
        moves = moving & inside & ~touched
        self.position = np.where(moves[:, None], target, self.position)
        self.speed = np.where(moves, sign, 0).astype(float)
        pressed = moves & ~self.switch_on & np.all(self.position == self.switch, axis=1)
        if pressed.any():
            self.switch_on |= pressed
            self._spawn_pyramids(np.flatnonzero(pressed))
        reward = np.where(touched, 2.0, -1.0 / (MAX_STEP + 1))
        return {"PyramidsBrain": (reward, touched)}

    # --- observations ------------------------------------------------------------------------------

    def rays(self) -> tuple[np.ndarray, np.ndarray]:
        """What each ray hits first (a ``HIT_TYPES`` code) and how far, ``[n, rays]`` each.

        Exact ray/box intersections (slab method) against the room's walls and the at most six
        object cells (the switch and the pyramid's five), instead of marching along the rays.
        """
        angle = self.heading[:, None] * (np.pi / 2) + RAY_ANGLES[None, :]           # [n, R]
        u = np.stack([np.sin(angle), np.cos(angle)], axis=-1)                        # [n, R, 2]
        u = np.where(np.abs(u) < 1e-9, 1e-9, u)                                     # no division by 0
        origin = self.position[:, None, :] + 0.5                                     # [n, 1, 2]
        wall = np.min((np.where(u > 0, ROOM, 0.0) - origin) / u, axis=-1)           # [n, R]
        # Object cells [n, 6, 2] (lower corners) and their kinds; absent cells are far away.
        corners = np.concatenate([self.switch[:, None, :], self.pyramid[:, None, :] + PLUS[None]], axis=1)
        kinds = np.array([SWITCH, GOLD, BRICK, BRICK, BRICK, BRICK])
        low = (corners[:, None, :, :] - origin[:, :, None, :]) / u[:, :, None, :]   # [n, R, 6, 2]
        high = (corners[:, None, :, :] + 1 - origin[:, :, None, :]) / u[:, :, None, :]
        near = np.max(np.minimum(low, high), axis=-1)
        far = np.min(np.maximum(low, high), axis=-1)
        hit = (near <= far) & (near > 0)              # near <= 0: the agent stands in that cell
        t = np.where(hit, near, np.inf)
        best = np.argmin(t, axis=-1)                                                 # [n, R]
        t_best = np.take_along_axis(t, best[..., None], axis=-1)[..., 0]
        kind = np.where(t_best < wall, kinds[best], WALL)
        distance = np.minimum(t_best, wall)
        return kind, distance / RAY_RANGE

    def states(self, brain: str) -> np.ndarray:
        kind, distance = self.rays()
        one_hot = (kind[..., None] == np.array(HIT_TYPES)).astype(float)           # [n, R, 4]
        per_ray = np.concatenate([one_hot, distance[..., None]], axis=-1).reshape(N_AGENTS, -1)
        return np.column_stack([per_ray, self.switch_on.astype(float), self.speed])

    # --- scripted policy -----------------------------------------------------------------------------

    def heuristic(self, brain: str) -> np.ndarray:
        """Walk to the switch, then to the pyramid (it reads their hidden positions).

        Along the axis with the larger distance first; walks backwards instead of turning round.
        """
        goal = np.where(self.switch_on[:, None], self.pyramid, self.switch)
        delta = goal - self.position
        along_x = np.abs(delta[:, 0]) >= np.abs(delta[:, 1])
        want = np.where(along_x, np.where(delta[:, 0] > 0, 1, 3), np.where(delta[:, 1] > 0, 0, 2))
        turn = (want - self.heading) % 4
        action = np.select([turn == 0, turn == 2, turn == 1], [0, 1, 3], default=2)
        return action[:, None].astype(float)
