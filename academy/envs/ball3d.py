"""3DBall and its variants: balance a ball on a tilting platform (``Ball3DAgent.cs``).

Each agent owns a 5×5 platform whose rotation about z and x it changes by at most 2° per decision.
The ball falls from 4 units above the platform, lands, and rolls down the slope with the
acceleration of a solid sphere (5/7 g sin θ). It is lost (−1, done) when its height relative to the
platform drops below −2 or it is more than 3 units off-centre along x or z; otherwise every decision
earns +0.1, so 1000 decisions give the maximum of 100.

One decision is Unity's 5 physics frames (frameToSkip 4 at 0.02 s), integrated in closed form with
the platform's mid-decision tilt: the acceleration is constant within a decision, so this is exact
for a rolling ball and costs one pass of array arithmetic instead of five.
"""
from __future__ import annotations

import numpy as np

from academy.scene import BrainSpec, Scene

DT = 0.1                      # seconds per decision
HALF = 2.5                    # half the platform's side
TOP = 0.25                    # platform top above its centre
MAX_TILT = 28.9               # degrees; Unity rotates only while the quaternion component is < 0.25
ROLL = 5.0 / 7.0              # rolling sphere: a = 5/7 g sin θ
ACTION_DEG = 2.0              # an action of ±1 turns the platform by ±2° per decision


def _ball_brain(name: str, state_size: int, memory_size: int = 0, brain_type: str = "external",
                n_agents: int = 12) -> BrainSpec:
    return BrainSpec(name=name, n_agents=n_agents, state_size=state_size, action_size=2,
                     memory_size=memory_size, action_descriptions=("rotate z", "rotate x"),
                     max_step=999, brain_type=brain_type)


class Ball3D(Scene):
    """12 platforms on one External brain; state cont 8, action cont 2."""

    academy_name = "Ball3DAcademy"
    brains = (_ball_brain("Ball3DBrain", 8),)
    default_reset_parameters = {"gravity": 9.81, "ball_scale": 1.0}

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self._rows = {}
        start = 0
        for spec in self.brains:
            self._rows[spec.name] = slice(start, start + spec.n_agents)
            start += spec.n_agents
        n = start
        self.tilt = np.zeros((n, 2))   # degrees: rotation about z, rotation about x
        self.pos = np.zeros((n, 3))    # ball position relative to the platform centre
        self.vel = np.zeros((n, 3))
        self._reward = np.zeros(n)
        self._lost = np.zeros(n, dtype=bool)

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        rows = np.arange(self._rows[brain].start, self._rows[brain].stop)[index]
        k = rows.size
        self.tilt[rows] = self.rng.uniform(-10.0, 10.0, (k, 2))
        self.pos[rows] = np.column_stack([self.rng.uniform(-1.5, 1.5, k), np.full(k, 4.0),
                                          self.rng.uniform(-1.5, 1.5, k)])
        self.vel[rows] = 0.0

    def step(self, actions: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        if len(self.brains) == 1:
            action = actions[self.brains[0].name]
        else:
            action = np.concatenate([actions[b.name] for b in self.brains])
        g = self.params["gravity"]
        radius = 0.5 * self.params["ball_scale"]
        old_tilt = self.tilt
        self.tilt = np.clip(old_tilt + ACTION_DEG * np.clip(action, -1.0, 1.0), -MAX_TILT, MAX_TILT)
        sin_z, sin_x = np.sin(np.radians(0.5 * (old_tilt + self.tilt))).T
        tan_z, tan_x = np.tan(np.radians(self.tilt)).T
        pos, vel = self.pos, self.vel
        x, y, z = pos.T
        vx, vy, vz = vel.T
        # Supported: on the platform's footprint and resting on (or sunk into) its surface.
        over = (np.abs(x) <= HALF) & (np.abs(z) <= HALF)
        resting = over & (y <= TOP + radius + x * tan_z - z * tan_x + 1e-6)
        # Rotation about z lifts +x, so the ball rolls towards −x; rotation about x lowers +z.
        ax = np.where(resting, -ROLL * g * sin_z, 0.0)
        az = np.where(resting, ROLL * g * sin_x, 0.0)
        ay = np.where(resting, 0.0, -g)
        new = pos + vel * DT + 0.5 * DT * DT * np.column_stack([ax, ay, az])
        nx, ny, nz = new.T
        surface = TOP + radius + nx * tan_z - nz * tan_x
        # A resting ball follows the slowly turning surface; a falling one lands when it reaches it.
        landing = (ny <= surface) & (y >= surface - 0.5)
        on = (np.abs(nx) <= HALF) & (np.abs(nz) <= HALF) & (resting | landing)
        new[:, 1] = np.where(on, surface, ny)
        vel[:, 0] = vx + ax * DT
        vel[:, 2] = vz + az * DT
        vel[:, 1] = np.where(on, (surface - y) / DT * resting, vy + ay * DT)
        self.pos = new
        lost = (new[:, 1] < -2.0) | (np.abs(nx) > 3.0) | (np.abs(nz) > 3.0)
        reward = np.where(lost, -1.0, 0.1)
        return {b.name: (reward[self._rows[b.name]], lost[self._rows[b.name]]) for b in self.brains}

    def states(self, brain: str) -> np.ndarray:
        rows = self._rows[brain]
        # Unity sends the rotation quaternion's z and x components: sin(θ/2) for a small tilt.
        rotation = np.sin(np.radians(0.5 * self.tilt[rows]))
        return np.concatenate([rotation, self.pos[rows], self.vel[rows]], axis=1)

    def heuristic(self, brain: str) -> np.ndarray:
        """A PD controller: tilt so the ball accelerates back to the centre, damped by its velocity."""
        rows = self._rows[brain]
        pos, vel, tilt = self.pos[rows], self.vel[rows], self.tilt[rows]
        accel = ROLL * self.params["gravity"]
        want_z = np.clip((1.2 * pos[:, 0] + 1.8 * vel[:, 0]) / accel, -0.45, 0.45)
        want_x = np.clip(-(1.2 * pos[:, 2] + 1.8 * vel[:, 2]) / accel, -0.45, 0.45)
        target = np.degrees(np.arcsin(np.column_stack([want_z, want_x])))
        return np.clip((target - tilt) / ACTION_DEG, -1.0, 1.0)


class Ball3DHard(Ball3D):
    """3DBall without the ball's velocity in the state (cont 5), so a policy needs memory."""

    academy_name = "Ball3DHardAcademy"
    brains = (_ball_brain("Ball3DHardBrain", 5, memory_size=32),)

    def states(self, brain: str) -> np.ndarray:
        return super().states(brain)[:, :5]


class Ball3DIL(Ball3D):
    """Imitation: a broadcasting Heuristic ``Teacher`` and an External ``Student``, 12 platforms each."""

    academy_name = "Ball3DILAcademy"
    brains = (_ball_brain("Teacher", 8, brain_type="heuristic"), _ball_brain("Student", 8))
