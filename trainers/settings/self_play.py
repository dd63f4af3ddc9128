"""The ``self_play:`` block of Release 22's team self-play: its keys, their check, its documentation.

A modern Unity build reports both sides of a symmetric game as one behaviour in two teams
(``Tennis?team=0``, ``Tennis?team=1``); the config has one entry, ``Tennis``, with a ``self_play:``
block. Both config formats check the block here, and every learner that can play from a snapshot
(PPO, MA-POCA, SAC) declares it, so they need nothing of the self-play machinery itself
(``trainers.ghost``) to take their settings.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from trainers.settings.schema import (
    Param,
    TrainerConfigError,
    Where,
    check_block,
    non_negative,
    positive,
    unit_interval,
)
from unityagents.brain import BrainParameters, same_spaces_error, team_base, team_id

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


def _typed_self_play(brain_name: str, value: Mapping[str, Any]) -> SelfPlaySettings:
    return SelfPlaySettings(**value)


SELF_PLAY_PARAM = Param(
    dict, None, doc="nested block {save_steps, team_change, swap_steps, window, play_against_latest_model_ratio, "
                    "initial_elo}: Release 22 team self-play of a behaviour's ?team=N variants (see below)",
    view=_typed_self_play, block=lambda where, value: validate_self_play(value, where))


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


def check_team_behavior(brain_name: str, params: Mapping[str, Any], brains: Mapping[str, BrainParameters],
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
