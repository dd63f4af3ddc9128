"""Team self-play with ML-Agents Release 22's keys and semantics: settings, schedule, ELO.

A modern Unity build reports both sides of a symmetric game as one behaviour in two teams
(``Tennis?team=0``, ``Tennis?team=1``); the config has one entry, ``Tennis``, with a
``self_play:`` block. One policy learns, for one team at a time; the other team plays a frozen
snapshot of it. This module holds what is plain bookkeeping, without TensorFlow, so that it is
tested on its own: the block's validation (both config formats end here), the schedule of
snapshots, opponent swaps and team changes, and the ELO arithmetic. ``trainers.ghost.team_trainer``
builds the networks and drives the controller's calls with it.

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

import logging
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from trainers.settings.schema import (
    Param,
    TrainerConfigError,
    Where,
    brain_key,
    check_block,
    non_negative,
    positive,
    unit_interval,
)
from unityagents.brain import BrainParameters, same_spaces_error, team_base, team_id

logger = logging.getLogger("unityagents")

#: The keys of a ``self_play:`` block, with Release 22's defaults (``team_change``: 5 x save_steps).
SELF_PLAY_PARAMETERS: Dict[str, Param] = {
    "save_steps": Param(int, 20000, check=(positive, "> 0"), doc="learner steps between snapshots of its weights"),
    "team_change": Param(int, None, check=(positive, "> 0"),
                         doc="learner steps between changes of the learning team (default 5 x save_steps)"),
    "swap_steps": Param(int, 2000, check=(positive, "> 0"),
                        doc="opponent agent steps between swaps of the opponent's snapshot"),
    "window": Param(int, 10, check=(positive, ">= 1"), doc="snapshots kept to draw opponents from",
                    fix="Use window: 1 to always play the last snapshot."),
    "play_against_latest_model_ratio": Param(
        float, 0.5, check=(unit_interval, "a probability in [0, 1]"), doc="probability that a swap picks the latest "
        "weights", fix="Use 0 to always play a past snapshot, 1 to always play the latest weights."),
    "initial_elo": Param(float, 1200.0, check=(non_negative, ">= 0"), doc="the learner's ELO at the start"),
}

@dataclass(frozen=True)
class SelfPlaySettings:
    """A checked ``self_play:`` block."""

    save_steps: int = 20000
    team_change: int = 100000
    swap_steps: int = 2000
    window: int = 10
    play_against_latest_model_ratio: float = 0.5
    initial_elo: float = 1200.0

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def validate_self_play(value: Any, key_text: Where) -> Optional[Dict[str, Any]]:
    """The block checked and completed with defaults, or None when absent.

    :param key_text: names the block (``""``) or one of its keys in an error, e.g.
        ``trainers.settings.schema.key_path("run.yaml", "behaviors.Tennis.self_play")``.
    """
    if value is None:
        return None
    settings = check_block(key_text, value, SELF_PLAY_PARAMETERS, "self_play")
    if settings["team_change"] is None:
        settings["team_change"] = 5 * settings["save_steps"]
    if settings["team_change"] < settings["swap_steps"]:
        raise TrainerConfigError(
            f"{key_text('team_change')}: {settings['team_change']} is smaller than swap_steps "
            f"{settings['swap_steps']}, so a learning team would never meet a second opponent before the teams "
            "change. Raise team_change (Release 22's default is 5 x save_steps) or lower swap_steps.")
    return settings


def _typed_self_play(brain_name: str, value: Any) -> SelfPlaySettings:
    return SelfPlaySettings(**validate_self_play(value, brain_key(f"brain '{brain_name}'", "self_play")))


SELF_PLAY_PARAM = Param(
    dict, None, doc="nested block {save_steps, team_change, swap_steps, window, play_against_latest_model_ratio, "
                    "initial_elo}: Release 22 team self-play of a behaviour's ?team=N variants (see below)",
    view=_typed_self_play)


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


def self_play_markdown() -> List[str]:
    """The ``self_play`` block's section of ``docs/configuration.md``."""
    lines = [
        "## `self_play` (ppo, poca, sac)",
        "",
        "Release 22 team self-play, for a modern build whose behaviour has two or more teams",
        "(`Tennis?team=0`, `Tennis?team=1`; the built-in Tennis and Soccer over gRPC). The learner is the",
        "behaviour's own trainer, `ppo`, `poca` or `sac` (any trainer that can act from a snapshot of its",
        "policy: MA-POCA for teams of several agents in a group, as Release 22 trains SoccerTwos:",
        "`config/poca/SoccerTwos.yaml`); the opponent plays as the learner acts (sampled, or with the mean /",
        "most probable action when `deterministic`). One block under the name without",
        "`?team` serves every team; unityagents-learn's run config takes the same keys under",
        "`behaviors.<Name>.self_play`. One policy learns, for one team at a time; the other team plays a",
        "snapshot of it. The learning team changes every `team_change` learner steps (every environment",
        "resets then); a snapshot of the learning weights is kept every `save_steps` (the last `window`);",
        "the opponent is swapped every `swap_steps` of its own agent steps (and at each team change), to the",
        "latest weights with probability `play_against_latest_model_ratio`, else to a snapshot drawn uniformly.",
        "ELO starts at `initial_elo` and moves by the result (the sign of a game's last reward) minus the",
        "expected score, as Release 22 computes it. TensorBoard: `Self-play/ELO`, `Self-play/Learning Team`;",
        "`training_status.json` keeps the learner's ELO under `<Behaviour>.elo` at each checkpoint.",
        "The pool, the schedule and the ratings are in the checkpoint, so `--load`/`--resume` continues them.",
        "Refused before training: `team_change` below `swap_steps`, `window` < 1, a ratio outside [0, 1], a",
        "block on a behaviour without `?team=N` variants (API-2 scenes use the `ghost` trainer instead).",
        "",
        "```yaml",
        "Tennis:",
        "    self_play: {save_steps: 10000, team_change: 40000, swap_steps: 4000, window: 10}",
        "```",
        "",
        "| key | type | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    for key, p in SELF_PLAY_PARAMETERS.items():
        default = "5 x save_steps" if key == "team_change" else f"`{p.default}`"
        lines.append(f"| `{key}` | {p.kind.__name__} | {default} | {p.check[1] if p.check else ''} | {p.doc} |")
    return lines + [""]


def check_team_behaviour(brain_name: str, params: Mapping[str, Any], brains: Mapping[str, BrainParameters],
                         external_brain_names: Sequence[str]) -> None:
    """A ``self_play`` block needs two or more External ``?team=N`` behaviours of one name and spaces."""
    if not params.get("self_play"):
        return
    base = team_base(brain_name)
    teams = sorted((n for n in external_brain_names if team_base(n) == base), key=team_id)
    where = f"brain '{base}', key 'self_play'"
    if base == brain_name or len(teams) < 2:
        found = ", ".join(repr(t) for t in teams) or "none"
        raise TrainerConfigError(
            f"{where}: team self-play needs the behaviour's teams, two or more External behaviours named "
            f"'{base}?team=N', but the build has {found} (its behaviours: {', '.join(sorted(brains))}). Remove the "
            "self_play block; for an API-2 scene, train the opponent brain as a ghost (trainer: ghost, "
            "brain_to_copy: <the learning brain>).")
    for other in teams[1:]:
        difference = same_spaces_error(brains[teams[0]], brains[other])
        if difference:
            raise TrainerConfigError(
                f"{where}: the teams play one policy, so '{teams[0]}' and '{other}' need the same spaces, but they "
                f"differ: {difference}. Give both teams the same Behavior Parameters in the scene.")
