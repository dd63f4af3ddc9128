"""Self-play's plain bookkeeping, shared by both doors: ELO, the ring of snapshots, Release 22's schedule.

Both the seed's ghost brain and Release 22's team self-play keep their snapshots, draw their
opponents and rate their games with a :class:`SnapshotRing` (the weights themselves live in
``trainers.ghost.snapshot.SnapshotPool``); Release 22's :class:`SelfPlaySchedule` adds when to
snapshot, swap and change the learning team. It holds no TensorFlow, so it is tested on its own; the
``self_play:`` block itself is declared and checked in ``trainers.settings.self_play``.

Release 22's semantics, as this schedule applies them (every comparison strictly greater):

* ``save_steps``: learner steps between snapshots of the learning weights, kept in a ring of
  ``window`` slots (the oldest overwritten first); one snapshot is taken before the first action;
* ``swap_steps``: opponent steps (the agent steps of the team that does not learn) between
  opponent swaps; a swap also happens at each team change. At a swap the opponent is the latest
  weights with probability ``play_against_latest_model_ratio``, else a ring snapshot drawn
  uniformly;
* ``team_change``: learner steps between changes of the learning team (the teams take turns);
  a change resets every environment, so that no game mixes two learning teams;
* ``initial_elo``: the learner's rating at the start (a resumed run keeps the saved one).

ELO: each finished, uninterrupted game of the learning team is scored by the sign of its last
reward (1 win, 0.5 draw, 0 loss). With ``E = 10^(R/400) / (10^(R/400) + 10^(R_o/400))`` the
learner's rating gains ``result - E`` and the opponent's slot loses as much (Release 22 applies
no K factor). Each snapshot starts from the learner's rating when it is taken; a game against
the latest weights moves nothing, since the opponent slot is then the learner's own.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

# The self_play block's settings live with the other settings; these names stay importable from here.
from trainers.settings.self_play import (  # noqa: F401
    SelfPlaySettings,
    check_team_behavior,
    self_play_markdown,
    validate_self_play,
)

check_team_behaviour = check_team_behavior  # the name this module gave it first


def game_result(final_reward: float) -> float:
    """A game's score for the learner from its last reward: 1 won, 0.5 drawn, 0 lost."""
    return 1.0 if final_reward > 0 else 0.0 if final_reward < 0 else 0.5


def expected_score(rating: float, opponent: float) -> float:
    """The learner's expected score against ``opponent``: ``10^(R/400) / (10^(R/400) + 10^(R_o/400))``."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def elo_change(rating: float, opponent: float, result: float, k: float = 1.0) -> float:
    """What one game adds to the learner's rating: ``k * (result - E)``; Release 22 applies no K factor
    (``k`` 1), the seed's ghost rates with ``k`` 16."""
    return k * (result - expected_score(rating, opponent))


LATEST = -1  # the opponent plays the learner's current weights


class SnapshotRing:
    """The bookkeeping of a pool of snapshots, shared by both self-plays: its slots, the opponent, ELO.

    ``size`` ring slots are filled in turn (the oldest overwritten first); each starts from the
    learner's rating when its snapshot is taken. A swap draws the opponent: ``LATEST`` with
    probability ``latest_ratio`` (Release 22; None: never, as the seed's ghost), else a filled slot
    uniformly, from ``rng``. A game moves the learner's rating by :func:`elo_change`; with
    ``rate_opponent`` the opponent's slot loses as much (Release 22), so a game against ``LATEST``,
    whose rating is the learner's own, moves nothing. ``trainers.ghost.snapshot.SnapshotPool``
    holds the weights of the slots; this holds what is plain Python.
    """

    def __init__(self, size: int, initial_elo: float, rng: np.random.Generator,
                 latest_ratio: Optional[float] = None, k: float = 1.0, rate_opponent: bool = True):
        self.size = size
        self.rng = rng
        self.latest_ratio = latest_ratio
        self.k = k
        self.rate_opponent = rate_opponent
        self.snapshots_taken = 0
        #: Ratings: one per ring slot, then the learner's.
        self.elos: List[float] = [float(initial_elo)] * (size + 1)
        self.current_opponent = 0

    @property
    def filled(self) -> int:
        return min(self.snapshots_taken, self.size)

    @property
    def elo(self) -> float:
        return self.elos[-1]

    @property
    def opponent_elo(self) -> float:
        return self.elos[self.current_opponent]

    def record_snapshot(self) -> int:
        """The ring slot the next snapshot goes to (now taken); it starts at the learner's ELO."""
        slot = self.snapshots_taken % self.size
        self.elos[slot] = self.elo
        self.snapshots_taken += 1
        return slot

    def choose_opponent(self) -> int:
        """``LATEST`` with the ratio's probability, else a filled ring slot drawn uniformly."""
        if self.latest_ratio is not None and (self.rng.random() < self.latest_ratio or self.filled == 0):
            self.current_opponent = LATEST
        else:
            self.current_opponent = int(self.rng.integers(self.filled))
        return self.current_opponent

    def record_game(self, result: float) -> float:
        """Rate one game against the current opponent (``result`` 1 won, 0.5 drawn, 0 lost); returns the change."""
        change = elo_change(self.elo, self.opponent_elo, result, self.k)
        self.elos[-1] += change
        if self.rate_opponent:
            self.elos[self.current_opponent] -= change
        return change


class SelfPlaySchedule(SnapshotRing):
    """When to snapshot, swap the opponent and change the learning team; the ratings.

    Driven with the learner's step (its agent steps) and the opponent's agent steps; it says what
    is due and the caller does it (copies weights, resets environments) and then records it.

    :param n_teams: the teams of the behaviour (they learn in turn, team 0 first).
    """

    def __init__(self, settings: SelfPlaySettings, n_teams: int = 2, seed: int = 0):
        super().__init__(settings.window, settings.initial_elo, np.random.default_rng(seed),
                         latest_ratio=settings.play_against_latest_model_ratio)
        self.settings = settings
        self.n_teams = n_teams
        self.learning_team = 0
        self.last_team_change = 0
        self.last_save = 0
        self.last_swap = 0
        self.ghost_step = 0
        self.team_changes: List[int] = []  # learner steps at which the learning team changed

    # ---------------------------------------------------------------- snapshots
    def snapshot_due(self, learner_step: int) -> bool:
        return self.snapshots_taken == 0 or learner_step - self.last_save > self.settings.save_steps

    def record_snapshot(self, learner_step: int) -> int:
        """The ring slot the next snapshot goes to (now taken), at ``learner_step``."""
        self.last_save = learner_step
        return super().record_snapshot()

    # ---------------------------------------------------------------- opponents
    def add_opponent_steps(self, n: int) -> bool:
        """Count the opponent's agent steps; True when a swap is due."""
        self.ghost_step += int(n)
        return self.ghost_step - self.last_swap > self.settings.swap_steps

    def choose_opponent(self) -> int:
        """Swap: ``LATEST`` with the ratio's probability, else a filled ring slot drawn uniformly."""
        self.last_swap = self.ghost_step
        return super().choose_opponent()

    # ---------------------------------------------------------------- teams
    def team_change_due(self, learner_step: int) -> bool:
        return learner_step - self.last_team_change > self.settings.team_change

    def change_team(self, learner_step: int) -> int:
        """The next team learns; returns it (the caller resets the environments and swaps)."""
        self.learning_team = (self.learning_team + 1) % self.n_teams
        self.last_team_change = learner_step
        self.team_changes.append(int(learner_step))
        return self.learning_team

    # ---------------------------------------------------------------- ratings
    def record_game(self, final_reward: float) -> float:
        """Score one finished game of the learning team by its last reward; returns the learner's rating change."""
        return super().record_game(game_result(final_reward))

    # ---------------------------------------------------------------- checkpoint
    def get_state(self) -> Dict[str, Any]:
        return {"learning_team": self.learning_team, "last_team_change": self.last_team_change,
                "last_save": self.last_save, "last_swap": self.last_swap, "ghost_step": self.ghost_step,
                "snapshots_taken": self.snapshots_taken, "elos": list(self.elos),
                "current_opponent": self.current_opponent, "team_changes": list(self.team_changes),
                "rng": self.rng.bit_generator.state}

    def set_state(self, state: Mapping[str, Any]) -> None:
        for key in ("learning_team", "last_team_change", "last_save", "last_swap", "ghost_step", "snapshots_taken",
                    "current_opponent"):
            setattr(self, key, int(state.get(key, getattr(self, key))))
        elos = state.get("elos")
        if elos is not None and len(elos) == len(self.elos):
            self.elos = [float(e) for e in elos]
        self.team_changes = [int(s) for s in state.get("team_changes", self.team_changes)]
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]
