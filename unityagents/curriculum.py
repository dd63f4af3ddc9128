"""Curriculum: lessons of reset parameters that advance as the agents improve.

The JSON file has five required keys (those of ML-Agents 0.3's curriculum files)::

    {"measure": "reward",            # or "progress" (fraction of max_steps done)
     "thresholds": [0.5, 0.8],       # lesson L -> L+1 once the (smoothed) measure > thresholds[L]
     "min_lesson_length": 2,         # ... and the lesson was evaluated more than this many times
     "signal_smoothing": true,       # measure = 0.25 * previous + 0.75 * new
     "parameters": {"goal_size": [3.0, 2.0, 1.0]}}   # len(thresholds) + 1 values each

``increment_lesson`` is called by the trainer controller with the current measure; the lesson
moves at most one step per call.

``load_curriculum_file`` (also ``Curriculum.validate_file``) checks a file completely without an
environment, so learn.py can refuse a broken curriculum before it launches one; the reset
parameter names are checked once the environment said which it has (``Curriculum(...)``).
"""
from __future__ import annotations

import difflib
import json
import logging
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from unityagents.exception import UnityEnvironmentException

logger = logging.getLogger("unityagents")

_REQUIRED = ("measure", "thresholds", "min_lesson_length", "signal_smoothing", "parameters")
MEASURES = ("reward", "progress")
#: A curriculum is a handful of short lists; a bigger file is the wrong file.
MAX_FILE_BYTES = 1 << 20


class CurriculumError(UnityEnvironmentException):
    """A curriculum file that cannot be used: unreadable, malformed or inconsistent with the scene."""


def load_curriculum_file(location: str) -> Dict[str, Any]:
    """Read and check a curriculum JSON file completely; needs no environment.

    Checks the structure, the types, that every number is finite, that each parameter has one
    value per lesson and that ``progress`` thresholds can be passed, so that learn.py can refuse a
    broken file before it launches the environment. Only the reset parameter names are left for
    ``check_reset_parameters``, which needs the scene.

    :return: the file's content.
    :raises CurriculumError: naming the file, the field, what was expected and what was found.
    """
    data = _read_json(location)
    _check_structure(location, data)
    return data


def check_reset_parameters(location: str, data: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """Every parameter of the curriculum must be one of the environment's reset parameters."""
    for key in data["parameters"]:
        if key not in defaults:
            raise CurriculumError(
                f"The parameter {key} in Curriculum {location} is not present in the Environment "
                f"(its reset parameters are: {sorted(defaults) or 'none'}).{_did_you_mean(key, defaults)} "
                "Rename or remove it.")


def _did_you_mean(key: str, candidates: Iterable[Any]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``candidates``, or nothing when none is close.

    ``trainers.settings.schema.did_you_mean`` words its hints the same way; this layer may not import
    the trainers, so it asks ``difflib`` itself.
    """
    close = difflib.get_close_matches(key, [str(c) for c in candidates], n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _read_json(location: str) -> Any:
    try:
        size = os.stat(location).st_size
        if size > MAX_FILE_BYTES:
            raise CurriculumError(
                f"The curriculum file {location} has {size} bytes, more than the {MAX_FILE_BYTES} a curriculum "
                "can need; check the --curriculum path.")
        with open(location, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CurriculumError(
            f"The curriculum file {location} could not be found. Check the --curriculum path.") from None
    except IsADirectoryError:
        raise CurriculumError(
            f"The curriculum {location} is a folder; --curriculum takes the path of a JSON file.") from None
    except OSError as e:
        raise CurriculumError(f"The curriculum file {location} could not be read: {e}.") from None
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_refuse_duplicates,
                          parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CurriculumError(
            f"There was an error decoding {location}: it must be a JSON object ({e}).") from None
    except RecursionError:
        raise CurriculumError(
            f"There was an error decoding {location}: it is nested too deeply; a curriculum is a JSON object "
            f"with the keys {', '.join(_REQUIRED)}.") from None
    except _BadJson as e:
        raise CurriculumError(f"There was an error decoding {location}: {e}") from None


class _BadJson(ValueError):
    """Valid JSON that no curriculum may contain (a duplicate key, NaN, an overflowing number)."""


def _refuse_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _BadJson(f"the key {key!r} is given twice in one object, and JSON keeps only the last one. "
                           "Remove one of them.")
        result[key] = value
    return result


def _refuse_constant(name: str) -> float:
    raise _BadJson(f"{name} is not a value a curriculum can use; every number must be finite.")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadJson(f"{text} overflows to {value}; every number must be finite.")
    return value


def _check_structure(location: str, data: Any) -> None:
    if not isinstance(data, dict):
        raise CurriculumError(
            f"The curriculum {location} must be a JSON object with the keys {', '.join(_REQUIRED)}, "
            f"not a {type(data).__name__}.")
    for key in _REQUIRED:
        if key not in data:
            raise CurriculumError(
                f"{location} does not contain a {key} field. A curriculum needs {', '.join(_REQUIRED)}.")
    for key in data:
        if key not in _REQUIRED:
            raise CurriculumError(
                f"The curriculum {location} has an unknown field {key!r}.{_did_you_mean(key, _REQUIRED)} "
                f"Its fields are {', '.join(_REQUIRED)}.")
    if data["measure"] not in MEASURES:
        raise CurriculumError(
            f"The measure of curriculum {location} must be one of {MEASURES}, not {data['measure']!r}.")
    thresholds = data["thresholds"]
    if not isinstance(thresholds, list) or not all(_is_number(t) for t in thresholds):
        raise CurriculumError(
            f"The thresholds of curriculum {location} must be a list of numbers, not {thresholds!r}.")
    if data["measure"] == "progress":
        unreachable = [t for t in thresholds if t >= 1.0]
        if unreachable:
            raise CurriculumError(
                f"The thresholds of curriculum {location} measure progress, the fraction of max_steps done, "
                f"which never exceeds 1, so {unreachable} can never be passed. Use thresholds below 1.")
    length = data["min_lesson_length"]
    if not isinstance(length, int) or isinstance(length, bool) or length < 0:
        raise CurriculumError(
            f"The min_lesson_length of curriculum {location} must be a non-negative integer, not {length!r}.")
    if not isinstance(data["signal_smoothing"], bool):
        raise CurriculumError(
            f"The signal_smoothing of curriculum {location} must be true or false, "
            f"not {data['signal_smoothing']!r}.")
    parameters = data["parameters"]
    if not isinstance(parameters, dict):
        raise CurriculumError(
            f"The parameters of curriculum {location} must be an object of name -> list of values, "
            f"not {parameters!r}.")
    for key, values in parameters.items():
        if not isinstance(values, list) or len(values) != len(thresholds) + 1:
            found = len(values) if isinstance(values, list) else repr(values)
            raise CurriculumError(
                f"The parameter {key} in Curriculum {location} must have {len(thresholds) + 1} values "
                f"(one per lesson: len(thresholds) + 1) but {found} were found.")
        if not all(_is_number(v) for v in values):
            raise CurriculumError(
                f"The values of parameter {key} in Curriculum {location} must be numbers, not {values!r}.")


class AnyResetParameter(dict):
    """The reset parameters of a modern build: it declares none (environment parameters are free
    names), so a curriculum may set any name."""

    def __contains__(self, key: object) -> bool:
        return True


class Curriculum:
    """Lessons loaded from ``location`` and checked against the Academy's reset parameters.

    :param location: path of the curriculum JSON file, or None for no curriculum.
    :param default_reset_parameters: the Academy's ``resetParameters``; every curriculum
        parameter must be one of them.
    """

    #: Check a file before any environment exists (``load_curriculum_file``).
    validate_file = staticmethod(load_curriculum_file)

    def __init__(self, location: Optional[str], default_reset_parameters: Dict[str, float]):
        self.location = location
        self.max_lesson_number = 0
        self.lesson_number = 0
        self.lesson_length = 0
        self.smoothing_value = 0.0
        self.measure_type: Optional[str] = None
        self.data: Optional[Dict[str, Any]] = None
        if location is None:
            return
        self.data = load_curriculum_file(location)
        check_reset_parameters(location, self.data, default_reset_parameters)
        self.measure_type = self.data["measure"]
        self.max_lesson_number = len(self.data["thresholds"])

    @property
    def measure(self) -> Optional[str]:
        return self.measure_type

    @property
    def get_lesson_number(self) -> int:
        return self.lesson_number

    def set_lesson_number(self, value: int) -> None:
        """Jump to lesson ``value`` (clamped to the lessons that exist)."""
        self.lesson_length = 0
        self.lesson_number = max(0, min(int(value), self.max_lesson_number))

    def increment_lesson(self, progress: Optional[float]) -> bool:
        """Feed one measurement; move up one lesson if it passes the threshold.

        :return: whether the lesson changed.
        """
        if self.data is None or progress is None:
            return False
        if self.data["signal_smoothing"]:
            progress = self.smoothing_value * 0.25 + 0.75 * progress
            self.smoothing_value = progress
        self.lesson_length += 1
        if (self.lesson_number < self.max_lesson_number
                and progress > self.data["thresholds"][self.lesson_number]
                and self.lesson_length > self.data["min_lesson_length"]):
            self.lesson_length = 0
            self.lesson_number += 1
            config = self.get_config()
            logger.info("Lesson changed. Now in Lesson %d : %s", self.lesson_number,
                        ", ".join(f"{k} -> {v}" for k, v in config.items()))
            return True
        return False

    def get_config(self, lesson: Optional[int] = None) -> Dict[str, float]:
        """Reset parameters of ``lesson`` (clamped), or of the current lesson; ``{}`` without a curriculum."""
        if self.data is None:
            return {}
        if lesson is None:
            lesson = self.lesson_number
        lesson = max(0, min(int(lesson), self.max_lesson_number))
        return {k: v[lesson] for k, v in self.data["parameters"].items()}

    def get_state(self) -> Dict[str, Any]:
        """What ``--load`` needs to continue the curriculum where it stopped."""
        return {"lesson_number": self.lesson_number, "lesson_length": self.lesson_length,
                "smoothing_value": self.smoothing_value}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.set_lesson_number(state.get("lesson_number", 0))
        self.lesson_length = int(state.get("lesson_length", 0))
        self.smoothing_value = float(state.get("smoothing_value", 0.0))


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
