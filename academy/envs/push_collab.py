"""PushCollab: three agents per area push blocks that need one, two or three pushers (after PushBlockCollab).

Each area is a row of four cells: cell 0 is a pit (the hazard), cells 1, 2 and 3 are stations in
front of blocks A, B and C, which need 1, 2 and 3 agents pushing together to move one cell towards
their goal, ``DISTANCE`` cells away. The three agents of an area form one multi-agent group (group id
= area + 1). Actions (discrete 3): 0 push the block at the agent's station, 1 step left (from
station 1: into the pit), 2 step right.

Rewards are the group's (``group_reward``): +1, +2 or +3 when block A, B or C reaches its goal, and
an existential penalty of ``-PENALTY`` per step to every member still in play. An agent that steps
into the pit is done at once and is out of play (``asleep``: it asks for no decision) until the
group's episode ends, which happens when every block has scored, when every member is in the pit,
or after ``HORIZON`` steps. A member that left therefore misses the rewards and penalties of the
rest of the episode: an independent learner that only sees its own stream learns to jump into the
pit to escape the penalty, which leaves the mates unable to move block C; a learner with a group
critic (MA-POCA) credits the leaver with what the group earned after it left.

Each agent sees (11 floats, in [0, 1]): its station (one-hot, 3), each block's remaining distance
/ ``DISTANCE`` (3), how many mates in play stand at each station / 2 (3), the mates in play / 2, and
the episode's elapsed fraction (so a timeout is part of the state, and is terminal). The scene runs
over the modern protocol (group ids need it); over API-2 the group reward is added to each agent's
own reward and an agent in the pit stands idle with no reward until its group's next episode.
"""
from __future__ import annotations

import numpy as np

from academy.envs.areas import AreaScene
from academy.scene import BrainSpec

AREAS = 16
MEMBERS = 3
WEIGHTS = np.array([1, 2, 3])   # pushers each block needs
DISTANCE = 2                    # pushes to bring a block to its goal
HORIZON = 25                    # steps per group episode at most
PENALTY = 0.1                   # existential penalty per step and member in play
BRAIN = "PushCollabBrain"
PUSH, LEFT, RIGHT = 0, 1, 2


class PushCollab(AreaScene):
    """16 areas x 3 agents on ``PushCollabBrain``: state continuous 11, action discrete 3."""

    academy_name = "PushCollabAcademy"
    brains = (BrainSpec(name=BRAIN, n_agents=AREAS * MEMBERS, state_size=11, action_size=3,
                        action_space="discrete", action_descriptions=("push", "left", "right")),)

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed, AREAS, MEMBERS)
        n = AREAS * MEMBERS
        self.cell = np.ones(n, dtype=np.int64)              # 0 = in the pit
        self.remaining = np.full((AREAS, 3), DISTANCE)      # per block; 0 = scored
        self.timer = np.zeros(AREAS, dtype=np.int64)
        self.group_total = np.zeros(AREAS)
        self._stats: list[tuple[str, float]] = []

    # --- groups -----------------------------------------------------------------------------------
    def group_ids(self, brain: str) -> np.ndarray:
        return self.area + 1

    def asleep(self, brain: str) -> np.ndarray:
        return self.cell == 0

    def take_stats(self) -> list[tuple[str, float]]:
        stats, self._stats = self._stats, []
        return stats

    # --- the Scene contract -----------------------------------------------------------------------
    def reset_agents(self, brain: str, index: np.ndarray) -> None:
        """Restart the areas of ``index`` whose episode ended: blocks back, every member in play."""
        areas = self.restart_areas(index)
        if not areas.size:
            return
        rows = np.flatnonzero(np.isin(self.area, areas))
        self.cell[rows] = self.rng.integers(1, 4, rows.size)
        self.remaining[areas] = DISTANCE
        self.timer[areas] = 0
        self.group_total[areas] = 0.0

    def step(self, actions: dict[str, np.ndarray]):
        action = np.asarray(actions[BRAIN])[:, 0].astype(np.int64)
        n = self.cell.size
        playing = self.cell > 0
        pushing = playing & (action == PUSH)
        # Pushers per (area, block): block k sits in front of station k + 1.
        pushers = np.zeros((AREAS, 3), dtype=np.int64)
        np.add.at(pushers, (self.area[pushing], self.cell[pushing] - 1), 1)
        moves = (pushers >= WEIGHTS) & (self.remaining > 0)
        self.remaining -= moves
        scored = moves & (self.remaining == 0)
        area_reward = (scored * WEIGHTS).sum(axis=1) - PENALTY
        step = np.where(action == LEFT, -1, np.where(action == RIGHT, 1, 0))
        self.cell = np.where(playing & ~pushing, np.clip(self.cell + step, 0, 3), self.cell)
        self.timer += 1
        group_reward = np.where(playing, area_reward[self.area], 0.0)
        in_play = np.zeros(AREAS, dtype=np.int64)
        np.add.at(in_play, self.area, self.cell > 0)
        over = (self.remaining.sum(axis=1) == 0) | (in_play == 0) | (self.timer >= HORIZON)
        over &= ~self.ended
        self.group_total += np.where(self.ended, 0.0, area_reward)
        for a in np.flatnonzero(over):
            self._stats.append((f"Academy/{BRAIN} Group Reward", float(self.group_total[a])))
            self._stats.append((f"Academy/{BRAIN} Members Lost", float(MEMBERS - in_play[a])))
        self.ended |= over
        fell = playing & (self.cell == 0)
        done = fell | (playing & over[self.area])
        return {BRAIN: (np.zeros(n), done, group_reward)}

    def states(self, brain: str) -> np.ndarray:
        n = self.cell.size
        playing = self.cell > 0
        station = np.zeros((n, 3))
        station[np.flatnonzero(playing), self.cell[playing] - 1] = 1.0
        at = np.zeros((AREAS, 3))
        np.add.at(at, (self.area[playing], self.cell[playing] - 1), 1.0)
        mates_at = at[self.area] - station
        in_play = at.sum(axis=1)[self.area] - playing
        return np.column_stack([station, self.remaining[self.area] / DISTANCE, mates_at / 2.0, in_play / 2.0,
                                self.timer[self.area] / HORIZON])

    def heuristic(self, brain: str) -> np.ndarray:
        """Everyone goes to the heaviest block still out and pushes it together."""
        target = 3 - np.argmax(self.remaining[:, ::-1] > 0, axis=1)  # station of the heaviest block left
        goal = target[self.area]
        action = np.where(self.cell == goal, PUSH, np.where(self.cell < goal, RIGHT, LEFT))
        return action[:, None].astype(float)
