"""Soccer: two teams of two push one ball along a track towards the other team's goal (after SoccerTwos).

Each area is a track of ``WIDTH`` cells with a goal beyond each end. Blue (``SoccerBlue``, over the
modern protocol ``SoccerTwos?team=0``) attacks towards the last cell, purple (``SoccerPurple``,
``SoccerTwos?team=1``) towards the first; the two members of a team in one area form one multi-agent
group. Actions (discrete 3): 0 stay, 1 forward (towards the goal the agent attacks), 2 back.

The ball moves only when it is pushed: every agent standing on the ball's cell that steps forward
pushes it, and the ball moves one cell the way of the side with more pushers (equal numbers hold
it). So one attacker cannot pass one defender who pushes back, but two can: the mates have to play
together. An agent that is not pushing walks one cell (the track's ends stop it); a pusher of the
winning side moves with the ball.

Rewards are the group's (``group_reward``), as in Unity's SoccerTwos: a goal pays the scoring team
``1 - elapsed / HORIZON`` and the conceding team ``-1``, and ends the episode of all four agents of
the area; after ``HORIZON`` steps the game is a draw (0 to both). The sign of a team's last reward
therefore tells self-play who won.

Each agent sees its side the same way (the track mirrored for purple, so that forward is +): its own
cell, its mate's, the two opponents' (lower first) and the ball's, each divided by ``WIDTH - 1``,
and the game's elapsed fraction (6 floats).
"""
from __future__ import annotations

import numpy as np

from academy.envs.areas import AreaScene
from academy.scene import BrainSpec

AREAS = 8
MEMBERS = 2
WIDTH = 7                      # cells 0..WIDTH-1; the goals are at -1 and WIDTH
HORIZON = 40                   # steps before a game is a draw
BLUE, PURPLE = "SoccerBlue", "SoccerPurple"
STAY, FORWARD, BACK = 0, 1, 2


def _team_brain(name: str) -> BrainSpec:
    return BrainSpec(name=name, n_agents=AREAS * MEMBERS, state_size=6, action_size=3,
                     action_space="discrete", action_descriptions=("stay", "forward", "back"))


class Soccer(AreaScene):
    """8 areas; in each, two agents on ``SoccerBlue`` and two on ``SoccerPurple``."""

    academy_name = "SoccerAcademy"
    brains = (_team_brain(BLUE), _team_brain(PURPLE))
    behavior_names = {BLUE: "SoccerTwos?team=0", PURPLE: "SoccerTwos?team=1"}

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed, AREAS, MEMBERS)
        # Cells in blue's frame (blue attacks +): pos[team, area, member].
        self.pos = np.zeros((2, AREAS, MEMBERS), dtype=np.int64)
        self.ball = np.full(AREAS, WIDTH // 2, dtype=np.int64)
        self.timer = np.zeros(AREAS, dtype=np.int64)

    def group_ids(self, brain: str) -> np.ndarray:
        return self.area * 2 + (1 if brain == BLUE else 2)

    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        areas = self.restart_areas(index)
        if not areas.size:
            return
        half = WIDTH // 2
        self.pos[0, areas] = self.rng.integers(0, half, (areas.size, MEMBERS))
        self.pos[1, areas] = self.rng.integers(half + 1, WIDTH, (areas.size, MEMBERS))
        self.ball[areas] = half
        self.timer[areas] = 0

    def step(self, actions: dict[str, np.ndarray]):
        # Directions in blue's frame: forward is +1 for blue, -1 for purple.
        act = np.stack([np.asarray(actions[b])[:, 0].astype(np.int64).reshape(AREAS, MEMBERS) for b in (BLUE, PURPLE)])
        sign = np.array([1, -1])[:, None, None]
        move = np.where(act == FORWARD, 1, np.where(act == BACK, -1, 0)) * sign
        pushing = (act == FORWARD) & (self.pos == self.ball[None, :, None])
        pushers = pushing.sum(axis=2)                          # [team, area]
        ball_move = np.sign(pushers[0] - pushers[1])           # +1: blue wins the push
        winner = np.where(ball_move > 0, 0, 1)
        self.ball += ball_move
        won = pushing & (np.arange(2)[:, None, None] == winner[None, :, None]) & (ball_move != 0)[None, :, None]
        walks = ~pushing
        self.pos = np.where(walks, np.clip(self.pos + move, 0, WIDTH - 1), self.pos)
        self.pos = np.where(won, np.clip(self.ball[None, :, None], 0, WIDTH - 1), self.pos)
        self.timer += 1
        blue_goal = self.ball >= WIDTH
        purple_goal = self.ball < 0
        draw = (self.timer >= HORIZON) & ~blue_goal & ~purple_goal
        late = self.timer / HORIZON
        live = ~self.ended
        blue_reward = np.where(blue_goal, 1.0 - late, np.where(purple_goal, -1.0, 0.0)) * live
        purple_reward = np.where(purple_goal, 1.0 - late, np.where(blue_goal, -1.0, 0.0)) * live
        finished = (blue_goal | purple_goal | draw) & live
        self.ended |= finished
        self.ball = np.clip(self.ball, 0, WIDTH - 1)
        done = finished[self.area]
        zeros = np.zeros(AREAS * MEMBERS)
        return {BLUE: (zeros, done.copy(), blue_reward[self.area]),
                PURPLE: (zeros.copy(), done.copy(), purple_reward[self.area])}

    def _frame(self, brain: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Own team's cells, the other team's cells and the ball, in the frame where ``brain`` attacks +."""
        team = 0 if brain == BLUE else 1
        own, other, ball = self.pos[team], self.pos[1 - team], self.ball
        if team == 1:
            own, other, ball = WIDTH - 1 - own, WIDTH - 1 - other, WIDTH - 1 - ball
        return own, other, ball

    def states(self, brain: str) -> np.ndarray:
        own, other, ball = self._frame(brain)
        scale = float(WIDTH - 1)
        me = own.reshape(-1)
        mate = own[:, ::-1].reshape(-1)
        opponents = np.sort(other, axis=1)[self.area]
        return np.column_stack([me / scale, mate / scale, opponents / scale, ball[self.area] / scale,
                                self.timer[self.area] / HORIZON])

    def heuristic(self, brain: str) -> np.ndarray:
        """Both members run to the ball and push it forward together."""
        own, _, ball = self._frame(brain)
        me = own.reshape(-1)
        target = ball[self.area]
        action = np.where(me == target, FORWARD, np.where(me < target, FORWARD, BACK))
        return action[:, None].astype(float)
