"""The checks of what the trainer sends the scene: actions, memories, values and reset parameters.

A Unity build would index past its arrays or run its physics on NaN when a message parses but does
not fit the scene, and stall or poison the trainer; so every protocol (API-2, gRPC) runs these
checks before anything is stored, and a message that fails them ends the run with an error that
says what was expected.
"""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from academy.brain import BrainRuntime
    from academy.scene import Scene

log = logging.getLogger("academy")

#: Unity holds actions, memories and reset parameters in 32-bit floats: a larger magnitude is an infinity there.
FLOAT32_MAX = float(np.finfo(np.float32).max)


class TrainerMessageError(ValueError):
    """A message from the trainer that parses but does not fit the scene: the run ends (exit 3).

    Checked here rather than in a communicator so that every protocol (API-2, gRPC) gets the same
    checks: a Unity build would index past its arrays, or run its physics on NaN, and stall or
    poison the trainer.
    """


class ActionError(TrainerMessageError):
    """The action message does not fit a brain: missing, not a list of numbers, wrong size, non-finite."""


class ResetParameterError(TrainerMessageError):
    """A reset parameter that is not a finite number in the scene's range, or that the scene cannot use."""


def checked_reset_parameters(scene: Scene, parameters: object) -> dict[str, float]:
    """The reset parameters of ``parameters`` that ``scene`` can use, as floats.

    An unknown name or a value that is not a number is logged and left out (as Unity does); NaN,
    an infinity or a value outside the scene's range raises ResetParameterError.
    """
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise ResetParameterError(f"the reset parameters must be an object of name -> number, got "
                                  f"{describe(parameters)}")
    updates = {}
    for key, value in parameters.items():
        if key not in scene.params:
            log.error("reset parameter %s is not a parameter of %s (known: %s); ignored",
                      clip(repr(key)), scene.academy_name, sorted(scene.params))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            log.error("reset parameter %r must be a number, got %s; ignored", key, describe(value))
            continue
        number = _finite(value)
        if number is None:  # a number, but NaN or infinite (in Unity's float32): it would poison the physics
            raise ResetParameterError(f"reset parameter {key!r} must be a finite number, got {value!r}; "
                                      f"send a finite value (its default is "
                                      f"{scene.default_reset_parameters.get(key)!r})")
        low, high = scene.reset_parameter_ranges.get(key, (-math.inf, math.inf))
        if not low <= number <= high:
            raise ResetParameterError(f"reset parameter {key!r} must be in [{low:g}, {high:g}] for "
                                      f"{scene.academy_name}, got {number!r}")
        updates[key] = number
    return updates


def checked_actions(brains: list[BrainRuntime], message: object) -> list[tuple[np.ndarray, np.ndarray]]:
    """The ``(target, values)`` pairs that Python's ``{"action", "memory", "value"}`` message stores
    into the External brains' arrays; ActionError when any part does not fit its brain.

    Every brain is checked before the caller stores anything, so a bad message changes nothing.
    """
    if not isinstance(message, dict):
        raise ActionError('the action message must be an object {"action": {brain: [numbers]}, '
                          f'"memory": {{...}}, "value": {{...}}}}, got {describe(message)}')
    fields = {}
    for field in ("action", "memory", "value"):
        part = message.get(field)
        if part is None:
            part = {}
        if not isinstance(part, dict):
            raise ActionError(f'"{field}" of the action message must be an object of brain name -> list of '
                              f"numbers, got {describe(part)}")
        fields[field] = part
    staged = []
    for brain in brains:
        if brain.config.kind != "external":
            continue
        n, spec = brain.spec.n_agents, brain.spec
        actions = fields["action"].get(brain.name)
        if actions is None:
            raise ActionError(f"the action message has no action for External brain {brain.name!r}; "
                              f"it must hold {n * spec.action_width} floats under \"action\"")
        choices = spec.action_size if spec.action_space == "discrete" else None
        staged.append((brain.action, _sized(actions, (n, spec.action_width), brain.name, "action", choices)))
        memory = fields["memory"].get(brain.name)
        if memory is not None and spec.memory_size:
            staged.append((brain.memory, _sized(memory, (n, spec.memory_size), brain.name, "memory")))
        value = fields["value"].get(brain.name)
        if value is not None:
            staged.append((brain.value, _sized(value, (n,), brain.name, "value")))
    return staged


def _sized(values: object, shape: tuple[int, ...], brain: str, field: str,
           choices: int | None = None) -> np.ndarray:
    """``values`` as a float array of ``shape``, or an ActionError saying what was expected.

    ``values`` must be a list of finite numbers (or a list of per-agent lists); with ``choices``
    (a discrete action) each must be a whole number in ``[0, choices)``.
    """
    expected = int(np.prod(shape))
    wanted = f"{expected} floats ({' x '.join(map(str, shape))} for its agents)"
    if not isinstance(values, list):
        raise ActionError(f"brain {brain!r}: {field} must be a list of {wanted}, got {describe(values)}")
    try:
        array = np.array(values)
    except (ValueError, TypeError, OverflowError):
        raise ActionError(f"brain {brain!r}: {field} must be a flat list of {wanted}, got a ragged or mixed "
                          f"list {describe(values)}") from None
    if array.size and array.dtype.kind not in "iuf":
        raise ActionError(f"brain {brain!r}: {field} must hold numbers only, got {describe(values)}")
    if array.ndim > 2:
        raise ActionError(f"brain {brain!r}: {field} is nested {array.ndim} levels deep; send a flat list of {wanted}")
    if array.size != expected:
        raise ActionError(f"brain {brain!r}: {field} has {array.size} floats, expected {wanted}")
    array = array.astype(float)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~(np.abs(array) <= FLOAT32_MAX))
    if bad.size:
        raise ActionError(f"brain {brain!r}: {field} must be finite as a 32-bit float, got "
                          f"{float(array.ravel()[bad[0]])} at index {bad[0]} ({bad.size} such values); the "
                          "trainer's policy has diverged")
    if choices is not None:
        wrong = np.flatnonzero((array != np.floor(array)) | (array < 0) | (array >= choices))
        if wrong.size:
            raise ActionError(f"brain {brain!r}: a discrete action must be a whole number in [0, {choices}), "
                              f"got {float(array.ravel()[wrong[0]])!r} at index {wrong[0]}")
    return array.reshape(shape)


def _finite(value: object) -> float | None:
    """``value`` as a finite float, or None when it is not a finite number (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if abs(number) <= FLOAT32_MAX else None  # False for NaN too


def clip(text: str, n: int = 200) -> str:
    """``text`` cut to ``n`` characters, its full length said: a huge message must not flood the log."""
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def describe(value: object) -> str:
    """A short description of what arrived, for error messages: its type and a clipped repr."""
    try:
        text = repr(value)
    except RecursionError:
        text = "<too deeply nested to print>"
    return f"{type(value).__name__} {clip(text, 80)}"
