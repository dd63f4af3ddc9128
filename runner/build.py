"""The trainers of a run, built from the validated configuration and the scene's brains.

Each External brain gets one trainer, built inside its graph scope of the run's one graph: no
scope with one External brain, else the brain's name. A trainer that copies another brain's model
(the ghost) is built after it, and the teams of a self-play behaviour (``<Name>?team=N``) are built
together, as one group of learners under the behaviour's base name.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Mapping, Optional

import yaml

from runner.checkpoints import write_text_atomically
from runner.run_paths import RunPaths
from runner.settings.trainer_config import BrainSettings
from trainers.trainer.base import Trainer, TrainerContext, UnityTrainerException
from unityagents.brain import BrainParameters, team_base


def graph_scope_for(brain_name: str, n_external_brains: int) -> str:
    """The seed's rule: '' with one External brain, else the name with non-alphanumerics as '-'."""
    if n_external_brains <= 1:
        return ""
    return re.sub(r"[^0-9a-zA-Z]+", "-", brain_name)


def build_trainers(sess, brains: Mapping[str, BrainParameters], external_brain_names: List[str],
                   settings: Dict[str, BrainSettings], paths: RunPaths, train: bool, seed: int,
                   built: Optional[Dict[str, Trainer]] = None) -> Dict[str, Trainer]:
    """One trainer per External brain, in ``external_brain_names``' order (each seeded ``seed + i``
    with ``i`` its place in the build order).

    :param built: filled as the trainers are built, so that a caller can close those built before
        one of them failed.
    """
    n_ext = len(external_brain_names)
    built = {} if built is None else built
    # Trainers that copy another brain's model (the ghost) are built after it.
    order = sorted(settings.values(), key=lambda s: "brain_to_copy" in s.parameters)
    for i, s in enumerate(order):
        if s.brain_name in built:  # a team of a self-play behaviour, built with the first team
            continue
        if s.parameters.get("self_play"):
            built.update(_team_trainers(sess, brains, s, settings, paths, n_ext, train, seed + i))
        else:
            built[s.brain_name] = _trainer(sess, brains, s, settings, paths, n_ext, train, seed + i)
    return {b: built[b] for b in external_brain_names}


def _trainer(sess, brains, s: BrainSettings, settings: Dict[str, BrainSettings], paths: RunPaths, n_ext: int,
             train: bool, seed: int) -> Trainer:
    scope = graph_scope_for(s.brain_name, n_ext)
    copied = s.parameters.get("brain_to_copy")
    context = TrainerContext(scope, paths.summary_dir(s.brain_name, scope),
                             None if copied is None else settings[copied].parameters,
                             "" if copied is None else graph_scope_for(copied, n_ext))
    return s.trainer_class(sess, brains, s.brain_name, s.parameters, train, seed=seed, context=context)


def _team_trainers(sess, brains, s: BrainSettings, settings: Dict[str, BrainSettings], paths: RunPaths,
                   n_ext: int, train: bool, seed: int) -> Dict[str, Trainer]:
    """One learner for every ``?team=N`` behaviour of ``s``'s base name (``trainers.ghost.team_trainer``),
    scoped and summarised under the base name."""
    from trainers.ghost.team_trainer import build_team_trainers

    base = team_base(s.brain_name)
    teams = [name for name in settings if team_base(name) == base]
    without = [name for name in teams if not settings[name].parameters.get("self_play")]
    if without:
        raise UnityTrainerException(
            f"Behaviour '{base}': {', '.join(without)} has settings without the self_play block of "
            f"{s.brain_name}, but the teams of one behaviour train together. Give the settings once, under "
            f"'{base}', or the same self_play block to every team.")
    scope = graph_scope_for(base, max(n_ext, 2))
    context = TrainerContext(scope, paths.summary_dir(base, scope))
    return build_team_trainers(sess, brains, teams, s.parameters, s.trainer_class, train, seed=seed, context=context)


def write_resolved_parameters(trainers: Mapping[str, Trainer], path: str) -> None:
    """What this run actually used (every key, defaults included), for reproducing it."""
    resolved = {name: dict(t.parameters) for name, t in trainers.items()}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text_atomically(path, yaml.safe_dump(resolved, sort_keys=True))
