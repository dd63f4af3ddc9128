"""Release 22's ``environment_parameters``: constants, samplers and curricula, each on its own lesson track.

Each parameter is a list of lessons (a constant or a sampler is one lesson). A lesson's value is a
constant or a sampler (``uniform``, ``gaussian``, ``multirangeuniform``, ``constant``). A lesson
other than the last has ``completion_criteria`` naming the behaviour that is measured:

* ``measure: progress`` -- that trainer's step / its ``max_steps`` must exceed ``threshold``;
* ``measure: reward`` -- the mean reward of the episodes that trainer finished since the last
  lesson change (the latest ``min_lesson_length`` of them; smoothed as 0.25 * previous + 0.75 *
  new with ``signal_smoothing``) must exceed ``threshold``;

and that trainer must have finished at least ``min_lesson_length`` episodes since the last lesson
change (of any parameter, as Release 22 clears every reward buffer then). The trainer controller
checks at every environment reset (API-2) or every summary of the first learner (gRPC).

``EnvironmentParameters`` has ``unityagents.curriculum.Curriculum``'s interface, so the
environment set and the controller drive it as they drive a JSON curriculum. Values are drawn in
Python, once per environment and per reset, from one generator per lesson seeded with its ``seed``
(``-1``: the run's seed + the lesson's index over all parameters, as Release 22 numbers them), and
reach the scene as constants: over gRPC through the environment-parameters side channel, over API-2
as reset parameters. A lesson change resets the environments, so the new values apply at once.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from runner.settings.run_config import RunConfigError, Schema, check
from trainers.settings.schema import Param, did_you_mean
from unityagents.brain import former_names

logger = logging.getLogger("unityagents")

SAMPLERS: Dict[str, Schema] = {
    "uniform": {"min_value": Param(float), "max_value": Param(float), "seed": Param(int, -1)},
    "gaussian": {"mean": Param(float), "st_dev": Param(float), "seed": Param(int, -1)},
    "multirangeuniform": {"intervals": Param(list), "seed": Param(int, -1)},
    "constant": {"value": Param(float), "seed": Param(int, -1)},
}
#: A lesson's value given as a mapping (``curriculum`` is there for its did-you-mean: it is read first).
SAMPLER = {"sampler_type": Param(str), "sampler_parameters": Param(dict), "curriculum": Param(list)}
CRITERIA: Schema = {"behavior": Param(str), "measure": Param(str, "reward"), "threshold": Param(float, 0.0),
                    "min_lesson_length": Param(int, 0), "signal_smoothing": Param(bool, True),
                    "require_reset": Param(bool, False)}
LESSON: Schema = {"name": Param(str), "value": Param(object), "completion_criteria": Param(dict)}


@dataclass
class Lesson:
    name: str
    sampler_type: str
    parameters: Dict[str, Any]
    criteria: Optional[Dict[str, Any]] = None
    rng: Any = None

    def draw(self) -> float:
        p, rng = self.parameters, self.rng
        if self.sampler_type == "constant":
            return float(p["value"])
        if self.sampler_type == "uniform":
            return float(rng.uniform(p["min_value"], p["max_value"]))
        if self.sampler_type == "gaussian":
            return float(rng.normal(p["mean"], p["st_dev"]))
        lengths = np.array([hi - lo for lo, hi in p["intervals"]], dtype=float)
        weights = lengths / lengths.sum() if lengths.sum() > 0 else np.full(len(lengths), 1 / len(lengths))
        lo, hi = p["intervals"][int(rng.choice(len(lengths), p=weights))]
        return float(rng.uniform(lo, hi))

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "value": {"sampler_type": self.sampler_type,
                                                            "sampler_parameters": dict(self.parameters)}}
        if self.criteria is not None:
            out["completion_criteria"] = dict(self.criteria)
        return out


@dataclass
class Track:
    """One parameter's lessons and where it stands."""

    name: str
    lessons: List[Lesson]
    lesson: int = 0
    smoothed: float = 0.0


def _sampler(path: str, where: str, value: Any) -> tuple:
    """``(sampler_type, parameters)`` of a lesson value: a number or a sampler mapping."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "constant", {"value": float(value), "seed": -1}
    if not isinstance(value, dict):
        raise RunConfigError(f"{path}: {where}: expected a number or a mapping with sampler_type and "
                             f"sampler_parameters, got {value!r}.")
    check(path, where, value, SAMPLER, "a sampler")
    kind = value.get("sampler_type")
    if kind not in SAMPLERS:
        raise RunConfigError(f"{path}: {where}.sampler_type: expected one of {', '.join(SAMPLERS)}, got {kind!r}."
                             f"{did_you_mean(kind, SAMPLERS)}")
    if "sampler_parameters" not in value:
        raise RunConfigError(f"{path}: {where}.sampler_parameters: missing. Give the {kind} sampler's "
                             f"{', '.join(k for k in SAMPLERS[kind] if k != 'seed')}.")
    params = check(path, f"{where}.sampler_parameters", value["sampler_parameters"], SAMPLERS[kind],
                         f"the {kind} sampler")
    for key, item in params.items():
        if item is None:
            raise RunConfigError(f"{path}: {where}.sampler_parameters.{key}: missing; the {kind} sampler needs it.")
    if kind == "uniform" and params["min_value"] > params["max_value"]:
        raise RunConfigError(f"{path}: {where}.sampler_parameters: min_value {params['min_value']} is greater than "
                             f"max_value {params['max_value']}. Swap them.")
    if kind == "gaussian" and params["st_dev"] < 0:
        raise RunConfigError(f"{path}: {where}.sampler_parameters.st_dev: must be >= 0, got {params['st_dev']}.")
    if kind == "multirangeuniform":
        intervals = value["sampler_parameters"]["intervals"]
        ok = isinstance(intervals, list) and intervals and all(
            isinstance(i, list) and len(i) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                        for x in i) for i in intervals)
        if not ok:
            raise RunConfigError(f"{path}: {where}.sampler_parameters.intervals: expected a list of [min, max] pairs, "
                                 f"got {intervals!r}.")
        for lo, hi in intervals:
            if lo > hi:
                raise RunConfigError(f"{path}: {where}.sampler_parameters.intervals: [{lo}, {hi}] has min > max. "
                                     "Swap them.")
        params["intervals"] = [[float(lo), float(hi)] for lo, hi in intervals]
    return kind, params


def parse_environment_parameters(path: str, raw: Optional[Mapping[str, Any]]) -> List[Track]:
    """Check the ``environment_parameters`` block; one track per parameter."""
    tracks: List[Track] = []
    if raw is None:
        return tracks
    if not isinstance(raw, dict):
        raise RunConfigError(f"{path}: environment_parameters: expected a mapping of name: value, got {raw!r}.")
    for name, value in raw.items():
        where = f"environment_parameters.{name}"
        if isinstance(value, dict) and "curriculum" in value:
            if set(value) != {"curriculum"}:
                extra = sorted(set(value) - {"curriculum"})
                raise RunConfigError(f"{path}: {where}.{extra[0]}: a curriculum block holds only 'curriculum'.")
            lessons_raw = value["curriculum"]
            if not isinstance(lessons_raw, list) or not lessons_raw:
                raise RunConfigError(f"{path}: {where}.curriculum: expected a list of lessons, got {lessons_raw!r}.")
            lessons = []
            for i, item in enumerate(lessons_raw):
                lw = f"{where}.curriculum[{i}]"
                block = check(path, lw, item, LESSON, "a lesson")
                if "value" not in item:
                    raise RunConfigError(f"{path}: {lw}.value: missing. Give the lesson's value (a number or a "
                                         "sampler).")
                last = i == len(lessons_raw) - 1
                criteria = block["completion_criteria"]
                if criteria is None and not last:
                    raise RunConfigError(f"{path}: {lw}.completion_criteria: missing; every lesson but the last needs "
                                         "one (behavior, measure, threshold, ...).")
                if criteria is not None and last:
                    raise RunConfigError(f"{path}: {lw}.completion_criteria: the last lesson never ends, so its "
                                         "criteria would be ignored. Remove them.")
                if criteria is not None:
                    criteria = check(path, f"{lw}.completion_criteria", criteria, CRITERIA,
                                           "completion_criteria")
                    _check_criteria(path, f"{lw}.completion_criteria", criteria)
                kind, params = _sampler(path, f"{lw}.value", item["value"])
                lessons.append(Lesson(block["name"] or f"Lesson{i}", kind, params, criteria))
        else:
            kind, params = _sampler(path, where, value)
            lessons = [Lesson(str(name), kind, params)]
        tracks.append(Track(str(name), lessons))
    return tracks


def _check_criteria(path: str, where: str, c: Dict[str, Any]) -> None:
    if not c["behavior"]:
        raise RunConfigError(f"{path}: {where}.behavior: missing. Name the behaviour whose trainer is measured.")
    if c["measure"] not in ("reward", "progress"):
        raise RunConfigError(f"{path}: {where}.measure: expected reward or progress, got {c['measure']!r}."
                             f"{did_you_mean(c['measure'], ['reward', 'progress'])}")
    if c["measure"] == "progress" and not 0.0 <= c["threshold"] <= 1.0:
        raise RunConfigError(f"{path}: {where}.threshold: progress is a fraction of max_steps, so it must be in "
                             f"[0, 1]; got {c['threshold']}.")
    if c["min_lesson_length"] < 0:
        raise RunConfigError(f"{path}: {where}.min_lesson_length: must be >= 0, got {c['min_lesson_length']}.")


@dataclass
class EnvironmentParameters:
    """The run's parameters with ``Curriculum``'s interface (see the module docstring)."""

    tracks: List[Track]
    seed: int = 0
    _trainers: Any = field(default=None, repr=False)
    _episodes_at_change: Dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        k = 0
        for track in self.tracks:
            for lesson in track.lessons:
                if lesson.parameters.get("seed", -1) == -1:
                    lesson.parameters["seed"] = self.seed + k
                lesson.rng = np.random.default_rng(lesson.parameters["seed"])
                k += 1

    # -------------------------------------------------------------- what Curriculum offers
    @property
    def data(self) -> Optional[Dict[str, Any]]:
        return {"parameters": [t.name for t in self.tracks]} if self.tracks else None

    measure = None
    max_lesson_number = 0

    @property
    def lesson_number(self) -> tuple:
        return tuple(t.lesson for t in self.tracks)

    def lesson_numbers(self) -> Dict[str, int]:
        return {t.name: t.lesson for t in self.tracks}

    def set_lesson_number(self, value: int) -> None:
        """A JSON curriculum's --lesson; the tracks start at their first lesson (or a resumed one)."""

    def get_config(self) -> Dict[str, float]:
        return {t.name: t.lessons[t.lesson].draw() for t in self.tracks}

    def get_state(self) -> Dict[str, Any]:
        return {"lessons": {t.name: {"lesson_num": t.lesson, "smoothed": t.smoothed} for t in self.tracks}}

    def set_state(self, state: Mapping[str, Any]) -> None:
        saved = state.get("lessons", {}) if isinstance(state, Mapping) else {}
        for t in self.tracks:
            if t.name in saved:
                t.lesson = min(int(saved[t.name].get("lesson_num", 0)), len(t.lessons) - 1)
                t.smoothed = float(saved[t.name].get("smoothed", 0.0))

    def check_scene(self, reset_parameters: Optional[Mapping[str, Any]]) -> None:
        """API-2 scenes declare their reset parameters: each parameter must be one of them."""
        if reset_parameters is None:
            return
        for t in self.tracks:
            if t.name not in reset_parameters:
                raise RunConfigError(
                    f"environment_parameters.{t.name}: the scene has no reset parameter {t.name!r} (it has: "
                    f"{', '.join(sorted(reset_parameters)) or 'none'}).{did_you_mean(t.name, reset_parameters)}")

    def bind(self, trainers: Any) -> None:
        """``trainers()`` returns the controller's brain name -> trainer (criteria name behaviours)."""
        self._trainers = trainers

    def increment_lesson(self, _progress: Optional[float] = None) -> bool:
        """Check every track's criteria once; True if some parameter moved to its next lesson."""
        trainers = self._trainers() if self._trainers else {}
        changed = False
        for t in self.tracks:
            c = t.lessons[t.lesson].criteria
            if c is None or t.lesson + 1 >= len(t.lessons):
                continue
            trainer = next((tr for name, tr in trainers.items() if _names(name, c["behavior"])), None)
            if trainer is None:
                continue
            name = next(n for n, tr in trainers.items() if tr is trainer)
            ended = getattr(trainer, "episodes_completed", 0) - self._episodes_at_change.get(name, 0)
            if ended < c["min_lesson_length"]:
                continue
            if c["measure"] == "progress":
                measure = trainer.get_step / max(trainer.get_max_steps, 1.0)
            else:
                recent = list(getattr(trainer, "episode_rewards", []))[-max(min(ended, c["min_lesson_length"]), 1):]
                if not recent or ended < 1:
                    continue
                measure = float(np.mean(recent))
                if c["signal_smoothing"]:
                    measure = 0.25 * t.smoothed + 0.75 * measure
                    t.smoothed = measure
            if measure > c["threshold"]:
                t.lesson += 1
                lesson = t.lessons[t.lesson]
                logger.info("Parameter '%s' is in lesson '%s' and has value '%s'.", t.name, lesson.name,
                            lesson.as_dict()["value"])
                changed = True
        if changed:  # every reward buffer starts over, as in Release 22
            self._episodes_at_change = {n: getattr(tr, "episodes_completed", 0) for n, tr in trainers.items()}
        return changed

    def as_dict(self) -> Dict[str, Any]:
        """configuration.yaml's form: every parameter as a curriculum, seeds resolved."""
        return {t.name: {"curriculum": [lesson.as_dict() for lesson in t.lessons]} for t in self.tracks}


def _names(behavior: str, named: str) -> bool:
    """Whether a criterion's ``behavior`` names ``behaviour`` (``Name?team=N``): by its name, or, for a built-in
    scene's behaviour, by the brain name it had before it carried the name of Unity's example."""
    base = behavior.split("?team=", 1)[0]
    return named == base or named in former_names(base)
