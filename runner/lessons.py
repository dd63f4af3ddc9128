"""The curriculum as the training loop sees it: which lesson each parameter is at, and when it moves on.

The curriculum objects themselves (the JSON curriculum, Release 22's environment parameters)
decide from a measure; this module computes that measure from the learners and writes the
lesson numbers to their summaries when a lesson changes.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

from trainers.trainer.base import Trainer
from trainers.trainer.summaries import lesson_tags


def lesson_numbers(curriculum) -> Optional[Dict[str, int]]:
    """Parameter -> lesson index of the run's curriculum (None without one).

    A curriculum with its own lesson track per parameter says so with ``lesson_numbers()``; the
    JSON curriculum moves all its parameters together, so each of them has its one lesson number.
    """
    if hasattr(curriculum, "lesson_numbers"):
        return curriculum.lesson_numbers()
    if getattr(curriculum, "data", None) is None:
        return None
    return {name: curriculum.lesson_number for name in curriculum.data["parameters"]}


def curriculum_progress(curriculum, trainers: Mapping[str, Trainer]) -> Optional[float]:
    """The curriculum's measure over the learners: their mean share of ``max_steps`` done
    (``progress``), the sum of their last mean rewards (``reward``), or None."""
    learners = [t for t in trainers.values() if t.is_learner]
    if curriculum.measure == "progress" and learners:
        return float(np.mean([min(t.get_step / t.get_max_steps, 1.0) for t in learners]))
    if curriculum.measure == "reward":
        return float(sum(t.get_last_reward for t in learners))
    return None


def advance_curriculum(curriculum, trainers: Mapping[str, Trainer]) -> None:
    """Maybe move to the next lesson (it reaches the environments at their next reset); a new
    lesson is written to every trainer's summaries."""
    if curriculum.increment_lesson(curriculum_progress(curriculum, trainers)):
        for t in trainers.values():
            t.stats_reporter.write(t.get_step, lesson_tags(lesson_numbers(curriculum)))


def check_curriculum_between_resets(env, trainers: Mapping[str, Trainer], checked_step: int) -> int:
    """Advance the curriculum at each summary of the first learner; return the learner step checked last.

    Modern builds have no Academy-wide done to advance it at, so the check follows the first
    learner's ``summary_freq`` instead; a new lesson resets every environment (``env.reset_all``)
    with its parameters.
    """
    learner = next((t for t in trainers.values() if t.is_learner), None)
    if learner is None or env.curriculum.data is None:
        return checked_step
    freq = int(getattr(learner.settings, "summary_freq", 10000))
    if learner.get_step // freq <= checked_step // freq:
        return checked_step
    before = env.curriculum.lesson_number
    advance_curriculum(env.curriculum, trainers)
    if env.curriculum.lesson_number != before:
        env.reset_all(f"the curriculum moved to lesson {env.curriculum.lesson_number}")
    return learner.get_step
