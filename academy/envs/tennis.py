"""Tennis: two agents per area keep a ball in play over a net (after ``TennisAgent.cs``/``hitWall.cs``).

A vertical 2-D court: x from −8 to 8 with the net (height 1) at x = 0, ground at y = 0. Left agents
are on ``TennisBrain``, right agents on ``ghost-TennisBrain`` (the self-play opponent). An agent runs
along its half (action 0, ±8 units/s) and jumps when action 1 > 0.5. A ball within 0.9 of the
racket (1 unit above the agent) is returned with a fixed loft; running towards the net while hitting
adds pace, so an eager hit can go long.

Rewards: +0.1 to the hitter when its return clears the net; −0.1 to an agent that lets the ball
land on its half, and to a hitter whose ball hits the net or lands beyond the far baseline. A dead
ball ends the point: both agents of the area are done and the area is re-served (from a random
side). A rally also ends after 1000 decisions.

Over the modern protocol the scene is today's Unity Tennis: both sides are one behaviour in two
teams (``Tennis?team=0`` on the left, ``Tennis?team=1`` on the right), and the point's result is
paid as Unity's example pays it, +1 to the side that wins it and −1 to the side that loses it
(instead of the −0.1), so that the sign of each side's last reward tells self-play who won.

Each agent sees its own side the same way (x mirrored so that +x points at the net): own x, y,
vx, vy, then the ball's x, y, vx, vy, positions divided by the half-court length.
"""
from __future__ import annotations

import numpy as np

from academy.envs.areas import AreaScene
from academy.scene import BrainSpec

HALF = 8.0          # half-court length
NET = 1.0           # net height
G = 9.81
DT = 0.05           # two substeps per 0.1 s decision, so a fast ball cannot pass through a racket
SUBSTEPS = 2
RUN = 8.0           # agent speed, units/s
JUMP = 5.0          # jump speed
REACH = 0.9         # racket radius
LOFT = (6.0, 6.0)   # (forward, up) speed of a return
RALLY = 1000        # decisions before a rally is ended
LEFT, RIGHT = "TennisBrain", "ghost-TennisBrain"


def _tennis_brain(name: str) -> BrainSpec:
    return BrainSpec(name=name, n_agents=8, state_size=8, action_size=2,
                     action_descriptions=("move", "jump"), decision_period=5)


class Tennis(AreaScene):
    """8 areas; the left agent of each on ``TennisBrain``, the right on ``ghost-TennisBrain``."""

    academy_name = "TennisAcademy"
    brains = (_tennis_brain(LEFT), _tennis_brain(RIGHT))
    behavior_names = {LEFT: "Tennis?team=0", RIGHT: "Tennis?team=1"}

    def __init__(self, seed: int = 0) -> None:
        n = self.brains[0].n_agents
        super().__init__(seed, areas=n, members=1)
        # Row 0: left agent, row 1: right agent; side[k] is the sign of agent k's half.
        self.side = np.array([-1.0, 1.0])[:, None]
        self.pos = np.zeros((2, n, 2))      # agent (x, y)
        self.vel = np.zeros((2, n, 2))
        self.ball = np.zeros((n, 2))
        self.ball_vel = np.zeros((n, 2))
        self.last_hitter = np.full(n, -1)
        self.timer = np.zeros(n, dtype=np.int64)

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        """Re-serve in the areas of ``index`` whose rally ended."""
        areas = self.restart_areas(index)
        k = areas.size
        if not k:
            return
        self.pos[:, areas] = np.stack([np.column_stack([self.side[i] * self.rng.uniform(3.0, 6.0, k), np.zeros(k)])
                                       for i in range(2)])
        self.vel[:, areas] = 0.0
        server = self.rng.integers(0, 2, k)
        self.ball[areas] = np.column_stack([self.pos[server, areas, 0], np.full(k, 4.0)])
        self.ball_vel[areas] = 0.0
        self.last_hitter[areas] = -1
        self.timer[areas] = 0

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        n = self.ball.shape[0]
        action = np.clip(np.stack([actions[LEFT], actions[RIGHT]]), -1.0, 1.0)
        # Mirrored action: +1 runs towards the net on either side.
        self.vel[..., 0] = -self.side * RUN * action[..., 0]
        grounded = self.pos[..., 1] <= 0.0
        self.vel[..., 1] = np.where(grounded & (action[..., 1] > 0.5), JUMP, self.vel[..., 1])
        reward = np.zeros((2, n))
        dead = np.zeros(n, dtype=bool)
        areas = np.arange(n)
        for _ in range(SUBSTEPS):
            self.pos += self.vel * DT
            self.vel[..., 1] -= G * DT
            landed = self.pos[..., 1] <= 0.0
            self.pos[..., 1][landed] = 0.0
            self.vel[..., 1][landed] = 0.0
            # Each agent stays on its half.
            self.pos[..., 0] = np.where(self.side < 0, np.clip(self.pos[..., 0], -HALF, -0.5),
                                        np.clip(self.pos[..., 0], 0.5, HALF))
            old_x = self.ball[:, 0].copy()
            self.ball += self.ball_vel * DT + np.array([0.0, -0.5 * G * DT * DT])
            self.ball_vel[:, 1] -= G * DT
            live = ~dead
            # Hits: a racket reaches a ball it did not hit last.
            for k in range(2):
                racket = self.pos[k] + np.array([0.0, 1.0])
                hit = live & (np.hypot(*(self.ball - racket).T) < REACH) & (self.last_hitter != k)
                if hit.any():
                    pace = np.maximum(0.0, -self.side[k] * self.vel[k, :, 0])   # running towards the net
                    self.ball_vel[hit, 0] = -self.side[k] * (LOFT[0] + 0.4 * pace[hit])
                    self.ball_vel[hit, 1] = LOFT[1]
                    self.last_hitter[hit] = k
            # Crossing x = 0: over the net pays the hitter, below its top is a net ball.
            crossing = live & (np.sign(old_x) != np.sign(self.ball[:, 0]))
            into_net = crossing & (self.ball[:, 1] < NET)
            over = crossing & ~into_net & (self.last_hitter >= 0)
            reward[self.last_hitter[over], areas[over]] += 0.1
            # Landing: in a half (that side failed) or beyond a baseline (the hitter hit out).
            lands = live & ~into_net & (self.ball[:, 1] <= 0.0)
            out = lands & (np.abs(self.ball[:, 0]) > HALF)
            blame_hitter = (into_net | out) & (self.last_hitter >= 0)
            owner = (self.ball[:, 0] > 0).astype(int)
            blame_side = (lands & ~out) | ((into_net | out) & (self.last_hitter < 0))
            loser = np.where(blame_hitter, self.last_hitter, owner)
            lost = blame_hitter | blame_side
            if self.modern_protocol:  # the point's result: +1 to the winner, -1 to the loser
                reward[loser[lost], areas[lost]] -= 1.0
                reward[1 - loser[lost], areas[lost]] += 1.0
            else:
                reward[loser[lost], areas[lost]] -= 0.1
            dead |= into_net | lands
        self.timer += 1
        dead |= self.timer >= RALLY
        self.ended |= dead
        return {LEFT: (reward[0], dead.copy()), RIGHT: (reward[1], dead.copy())}

    def states(self, brain: str) -> np.ndarray:
        k = 0 if brain == LEFT else 1
        mirror = -self.side[k]
        return np.column_stack([mirror * self.pos[k, :, 0] / HALF, self.pos[k, :, 1] / HALF,
                                mirror * self.vel[k, :, 0] / HALF, self.vel[k, :, 1] / HALF,
                                mirror * self.ball[:, 0] / HALF, self.ball[:, 1] / HALF,
                                mirror * self.ball_vel[:, 0] / HALF, self.ball_vel[:, 1] / HALF])

    def heuristic(self, brain: str) -> np.ndarray:
        """Run to where the incoming ball falls to racket height, a little behind it; never jump."""
        k = 0 if brain == LEFT else 1
        mirror = -self.side[k]
        x = mirror * self.pos[k, :, 0]
        bx, by = mirror * self.ball[:, 0], self.ball[:, 1]
        bvx, bvy = mirror * self.ball_vel[:, 0], self.ball_vel[:, 1]
        # Time until the ball comes down to racket height (y = 1).
        t = (bvy + np.sqrt(np.maximum(bvy * bvy + 2 * G * (by - 1.0), 0.0))) / G
        incoming = (self.last_hitter != k) & ((bvx < 0) | (bx < 0))
        target = np.where(incoming, np.clip(bx + bvx * t - 0.3, -HALF, -0.5), -HALF / 2)
        move = np.clip((target - x) / (RUN * 0.1), -1.0, 1.0)
        return np.column_stack([move, np.zeros_like(move)])
