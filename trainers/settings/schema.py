"""The one settings schema: ``Param`` declarations, the coercer, the block checker and the typed views.

Every configuration path checks its keys here: learn.py's ``trainer_configurations.yaml`` (each
brain's block and its nested ``reward_signals``, ``behavioral_cloning`` and ``self_play`` blocks),
Release 22's run config (every block, down to ``environment_parameters``) and the command-line
options of both front ends. So every error reads alike: where the key sits (file, brain or key
path), what was expected, what arrived, and, where one exists, the fix; an unknown key gets the
closest known one as a "did you mean".

Where a key sits is a function ``where(sub) -> str`` that names the block (``sub == ""``) or one
of its keys; ``brain_key`` and ``key_path`` make the two styles the front ends use, and
``nested`` descends into a sub-block. A checked block becomes a frozen dataclass with
``settings_type`` / ``settings_view``.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Type

from unityagents.exception import UnityException

#: Names a block (``""``) or one of its keys (dotted below the block) in an error message.
Where = Callable[[str], str]


class UnityTrainerException(UnityException):
    """A trainer was misconfigured or asked to do something it cannot do."""


class TrainerConfigError(UnityTrainerException):
    """The trainer configuration is invalid. The message names the file, brain and key."""


@dataclass(frozen=True)
class Param:
    """One key a settings block accepts.

    :param kind: ``int``, ``float``, ``bool``, ``str``, ``list``, ``dict`` (a block) or ``object``
        (anything). Floats accept ints and YAML-1.1 strings such as ``1.0e6``; ints accept
        integral floats (``1.0e6`` again).
    :param default: used when the block does not set the key; ``None`` with ``required=True``
        means the key must be given. A key whose default is ``None`` also accepts ``null``.
    :param check: ``(predicate, description)``; the description completes "must be ...".
    :param choices: the values a string key may take (an error lists them, with a did-you-mean).
    :param fix: what to do when ``check`` or ``choices`` fails, appended to its error.
    :param view: turns a checked value into its typed form in a settings view (``(brain_name, value)
        -> typed``); nested blocks declare it, scalars need none.
    :param block: a nested block's own check, ``(where, value) -> the block checked and completed with
        its defaults`` (``where`` names the block's keys): the one place its keys are checked, applied
        by ``check_block`` to the block it sits in (and by ``Trainer`` to what a direct caller passes).
    """

    kind: type
    default: Any = None
    required: bool = False
    doc: str = ""
    check: Optional[Tuple[Callable[[Any], bool], str]] = None
    choices: Tuple[str, ...] = ()
    fix: str = ""
    view: Optional[Callable[[str, Any], Any]] = None
    block: Optional[Callable[[Where, Any], Any]] = None


@dataclass(frozen=True)
class Follows:
    """A default that is the value of another key of the same block, as a declaration states it
    (``release22_defaults``: Release 22 gives an omitted ``beta_schedule`` the ``learning_rate_schedule``)."""

    key: str


_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list",
               dict: "a block of key: value"}


def did_you_mean(key: Any, candidates) -> str:
    """`` Did you mean 'x'?`` for the closest of ``candidates``, or nothing when none is close."""
    close = difflib.get_close_matches(str(key), [str(c) for c in candidates], n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def positive(x) -> bool:
    return x > 0


def non_negative(x) -> bool:
    return x >= 0


def unit_interval(x) -> bool:
    return 0.0 <= x <= 1.0


def positive_fraction(x) -> bool:
    """In (0, 1]: a share of something that must not be empty (a soft update's step, a schedule's length)."""
    return 0.0 < x <= 1.0


def brain_key(prefix: str, key: str = "") -> Where:
    """learn.py's style: ``config.yaml: brain 'B', key 'reward_signals.rnd.strength'``.

    :param prefix: ``"config.yaml: brain 'B'"`` (or ``"brain 'B'"`` where the file is added later).
    :param key: the block's key in the brain's block (``""``: the brain's block itself).
    """
    def where(sub: str) -> str:
        dotted = f"{key}.{sub}" if key and sub else key or sub
        return f"{prefix}, key '{dotted}'" if dotted else prefix
    return where


def key_path(prefix: str, path: str) -> Where:
    """Release 22's style: ``run.yaml: behaviors.B.self_play.window`` (``path`` may be empty: the top)."""
    def where(sub: str) -> str:
        dotted = f"{path}.{sub}" if path and sub else path or sub
        return f"{prefix}: {dotted}" if prefix and dotted else prefix or dotted
    return where


def nested(where: Where, key: str) -> Where:
    """The naming of the block under ``key`` of the block ``where`` names."""
    return lambda sub: where(f"{key}.{sub}" if sub else str(key))


def coerce_value(where: str, value: Any, param: Param, error: Type[TrainerConfigError] = TrainerConfigError) -> Any:
    """``value`` checked against ``param`` and returned in the declared type; errors start with ``where``.

    The one coercion of every settings key, flat or nested, file or command line. YAML 1.1 reads
    ``1.0e6`` (no sign in the exponent) as a string, so numeric strings are accepted for numbers;
    integral floats are accepted for integers; numbers must be finite.
    """
    kind = param.kind
    converted: Any = None
    if value is None and not param.required and param.default is None:
        return None
    if kind is bool:
        converted = value if isinstance(value, bool) else None
    elif kind in (int, float) and not isinstance(value, bool):
        number: Optional[float] = None
        if isinstance(value, (int, float)):
            number = value
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if number is not None:
            if not math.isfinite(number):
                raise error(
                    f"{where}: expected a finite number, got {value!r}, which is {float(number)}. Give a finite "
                    f"value{f' ({param.doc})' if param.doc else ''}.")
            if kind is float:
                converted = float(number)
            elif float(number).is_integer():
                converted = int(number)
    elif kind is str:
        converted = value if isinstance(value, str) else None
    elif kind is list:
        converted = list(value) if isinstance(value, (list, tuple)) else None
    else:
        converted = value if isinstance(value, kind) else None
    if converted is None:
        raise error(
            f"{where}: expected {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r} ({type(value).__name__}).")
    fix = f" {param.fix}" if param.fix else ""
    if param.choices and converted not in param.choices:
        raise error(f"{where}: expected one of {', '.join(param.choices)}, got {value!r}."
                    f"{did_you_mean(value, param.choices)}{fix}")
    if param.check is not None:
        predicate, description = param.check
        if not predicate(converted):
            raise error(f"{where}: must be {description}, got {value!r}.{fix}")
    return converted


#: ``(where, key, value, param) -> value``: how ``check_block`` coerces one key (``coerce_value`` by default).
Coercer = Callable[[str, str, Any, Param], Any]


def check_block(where: Where, value: Any, params: Mapping[str, Param], owner: str, *,
                unknown: Optional[str] = None, error: Type[TrainerConfigError] = TrainerConfigError,
                coerce: Optional[Coercer] = None, partial: bool = False) -> Dict[str, Any]:
    """The mapping ``value`` checked against ``params``: every key known, of its type and in range;
    the required ones present and the defaults of the others filled in (``None`` reads as ``{}``).

    :param owner: names the block in errors ("unknown key of {owner}", "required by {owner}").
    :param unknown: replaces "key of {owner}" in the unknown-key error ("hyperparameter for the ppo trainer").
    :param error: the exception raised (a front end's own subclass).
    :param coerce: replaces ``coerce_value`` for each key (a front end's extra bounds).
    :param partial: the block is merged with others later (learn.py's ``default:``) or lists only
        what it uses (``reward_signals``): no key is required and no default filled in, and nested
        blocks (a ``Param.block``) are checked once the merged block is.
    :return: the checked values, in the declaration's order.
    """
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise error(f"{where('')}: expected a block of key: value ({', '.join(map(str, params))}), got {value!r} "
                    f"({type(value).__name__}).")
    for key in value:
        if key not in params:
            raise error(f"{where(str(key))}: unknown {unknown or 'key of ' + owner}.{did_you_mean(key, params)} "
                        f"Its keys are: {', '.join(sorted(map(str, params)))}.")
    out: Dict[str, Any] = {}
    for key, param in params.items():
        if key in value:
            if coerce is None:
                out[key] = coerce_value(where(key), value[key], param, error)
            else:
                out[key] = coerce(where(key), key, value[key], param)
            if param.block is not None and not partial and out[key] is not None:
                out[key] = param.block(nested(where, key), out[key])
        elif partial:
            continue
        elif param.required:
            raise error(f"{where(key)}: required by {owner} but missing. "
                        f"Add it{f' ({param.doc})' if param.doc else ''}.")
        else:
            out[key] = copy.deepcopy(param.default)
    return out


class CheckedSettings(Mapping):
    """One behaviour's checked settings as a reader made them: a read-only mapping of every key its
    trainer declares, and the same values in their frozen typed form (``typed``, a
    ``settings_type``), made once, which the trainer takes as its ``settings``.

    :param declared: the declaration the values were checked against (a trainer's ``hyperparameters``).
    """

    __slots__ = ("_values", "declared", "typed")

    def __init__(self, values: Mapping[str, Any], declared: Mapping[str, Param], name: str, brain_name: str = ""):
        self._values = dict(values)
        self.declared = declared
        self.typed = settings_view(declared, self._values, name, brain_name)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"CheckedSettings({self._values!r})"


#: The kinds a settings view holds as they are; other keys need a ``view`` to be in it.
_SCALAR_KINDS = (int, float, bool, str)
_SETTINGS_TYPES: Dict[int, Tuple[Mapping[str, Param], type]] = {}


def _in_view(key: str, param: Param) -> bool:
    return key.isidentifier() and (param.kind in _SCALAR_KINDS or param.view is not None)


def settings_type(params: Mapping[str, Param], name: str = "TrainerSettings") -> type:
    """The frozen dataclass of ``params``: one field per scalar key (its declared kind) and per key
    with a ``view`` (a nested block's own frozen dataclass).

    Made once per declaration dictionary, so that every trainer (or block) of a type shares one class.
    """
    cached = _SETTINGS_TYPES.get(id(params))
    if cached is not None and cached[0] is params:
        return cached[1]
    fields = [(key, Optional[param.kind] if param.view is None else Any, dataclasses.field(default=None))
              for key, param in params.items() if _in_view(key, param)]
    made = dataclasses.make_dataclass(name, fields, frozen=True)
    _SETTINGS_TYPES[id(params)] = (params, made)
    return made


def settings_view(params: Mapping[str, Param], values: Mapping[str, Any], name: str = "TrainerSettings",
                  brain_name: str = "") -> Any:
    """``values`` (a checked block) as a ``settings_type(params)``: each scalar converted to its declared
    kind once (``1.0e6`` read as a string becomes ``1000000.0``), each nested block through its
    ``view``; missing keys take their declared defaults; None stays None.

    :param brain_name: names the brain in the errors of a ``view`` (which checks what a direct caller passed).
    """
    made = settings_type(params, name)
    converted = {}
    for f in dataclasses.fields(made):
        param = params[f.name]
        value = values.get(f.name, param.default)
        if value is None:
            converted[f.name] = None
        elif param.view is not None:
            converted[f.name] = param.view(brain_name, value)
        else:
            kind = param.kind
            converted[f.name] = kind(float(value) if kind is int and isinstance(value, str) else value)
    return made(**converted)


def total_memory_bytes() -> Optional[int]:
    """Physical memory of this machine, or None where the OS does not say (no check then)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
