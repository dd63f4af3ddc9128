"""Curriculum: lessons of reset parameters that advance as the agents improve.

The JSON file has five required keys (``shared/reference/api2-facts.md`` §3)::

    {"measure": "reward",            # or "progress" (fraction of max_steps done)
     "thresholds": [0.5, 0.8],       # lesson L -> L+1 once the (smoothed) measure > thresholds[L]
     "min_lesson_length": 2,         # ... and the lesson was evaluated more than this many times
     "signal_smoothing": true,       # measure = 0.25 * previous + 0.75 * new
     "parameters": {"goal_size": [3.0, 2.0, 1.0]}}   # len(thresholds) + 1 values each

``increment_lesson`` is called by the trainer controller with the current measure; the lesson
moves at most one step per call.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Dict, Optional

from .exception import UnityEnvironmentException

logger = logging.getLogger("unityagents")

_REQUIRED = ("measure", "thresholds", "min_lesson_length", "signal_smoothing", "parameters")
MEASURES = ("reward", "progress")


class Curriculum:
    """Lessons loaded from ``location`` and checked against the Academy's reset parameters.

    :param location: path of the curriculum JSON file, or None for no curriculum.
    :param default_reset_parameters: the Academy's ``resetParameters``; every curriculum
        parameter must be one of them.
    """

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
        try:
            with open(location, encoding="utf-8") as f:
                self.data = json.load(f)
        except FileNotFoundError:
            raise UnityEnvironmentException(
                f"The curriculum file {location} could not be found. Check the --curriculum path.") from None
        except OSError as e:
            raise UnityEnvironmentException(f"The curriculum file {location} could not be read: {e}.") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UnityEnvironmentException(
                f"There was an error decoding {location}: it must be a JSON object ({e}).") from None
        self._validate(location, default_reset_parameters)
        self.measure_type = self.data["measure"]
        self.max_lesson_number = len(self.data["thresholds"])

    def _validate(self, location: str, defaults: Dict[str, float]) -> None:
        data = self.data
        if not isinstance(data, dict):
            raise UnityEnvironmentException(
                f"The curriculum {location} must be a JSON object with the keys {', '.join(_REQUIRED)}.")
        for key in _REQUIRED:
            if key not in data:
                raise UnityEnvironmentException(f"{location} does not contain a {key} field.")
        if data["measure"] not in MEASURES:
            raise UnityEnvironmentException(
                f"The measure of curriculum {location} must be one of {MEASURES}, not {data['measure']!r}.")
        thresholds = data["thresholds"]
        if not isinstance(thresholds, list) or not all(_is_number(t) for t in thresholds):
            raise UnityEnvironmentException(
                f"The thresholds of curriculum {location} must be a list of numbers, not {thresholds!r}.")
        if not isinstance(data["min_lesson_length"], int) or data["min_lesson_length"] < 0:
            raise UnityEnvironmentException(
                f"The min_lesson_length of curriculum {location} must be a non-negative integer, "
                f"not {data['min_lesson_length']!r}.")
        if not isinstance(data["signal_smoothing"], bool):
            raise UnityEnvironmentException(
                f"The signal_smoothing of curriculum {location} must be true or false, "
                f"not {data['signal_smoothing']!r}.")
        parameters = data["parameters"]
        if not isinstance(parameters, dict):
            raise UnityEnvironmentException(
                f"The parameters of curriculum {location} must be an object of name -> list of values.")
        for key, values in parameters.items():
            if key not in defaults:
                raise UnityEnvironmentException(
                    f"The parameter {key} in Curriculum {location} is not present in the Environment "
                    f"(its reset parameters are: {sorted(defaults) or 'none'}).")
            if not isinstance(values, list) or len(values) != len(thresholds) + 1:
                found = len(values) if isinstance(values, list) else values
                raise UnityEnvironmentException(
                    f"The parameter {key} in Curriculum {location} must have {len(thresholds) + 1} values "
                    f"(one per lesson: len(thresholds) + 1) but {found} were found.")
            if not all(_is_number(v) for v in values):
                raise UnityEnvironmentException(
                    f"The values of parameter {key} in Curriculum {location} must be numbers, not {values!r}.")

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
