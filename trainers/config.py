"""``trainer_configurations.yaml``: loading, alias resolution and validation.

The file holds a ``default:`` block and one block per brain; a brain's block overrides the
default key by key. A block may instead be a string, an alias (``TurretBrain: ExampleBrain``:
use ExampleBrain's block). Each block selects its trainer with ``trainer: <name>`` or the seed's
``is_ghost: true`` / ``is_imitation: true``; PPO otherwise.

Validation happens in two stages, both before any training step:

1. ``load_trainer_config`` (before the environment is launched): the whole file, every block,
   against the ``hyperparameters`` each trainer class declares (unknown keys, types, ranges,
   required keys, aliases, the trainer's own cross-field checks);
2. ``TrainerConfig.settings_for_environment`` (once the environment has said which brains it
   has): the checks that need the scene, e.g. a ghost's ``brain_to_copy`` must be External.

Every error is a ``TrainerConfigError`` naming the file, the brain and the key.
"""
from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type

import yaml

from unityagents.brain import BrainParameters

from .registry import TrainerRegistry
from .trainer import Param, Trainer, TrainerConfigError, UnityTrainerException

logger = logging.getLogger("unityagents")

#: Keys the controller adds; a user setting them would be overwritten, so they are refused.
INJECTED_KEYS = ("graph_scope", "summary_path")


@dataclass
class BrainSettings:
    """The resolved settings of one brain: its trainer class and its hyperparameters."""

    brain_name: str
    trainer_type: str
    trainer_class: Type[Trainer]
    parameters: Dict[str, Any]
    from_block: str  # which YAML block they came from ('default' when the brain has none)


@dataclass
class TrainerConfig:
    """A validated configuration file."""

    path: str
    raw: Dict[str, Any]
    registry: TrainerRegistry
    blocks: Dict[str, BrainSettings] = field(default_factory=dict)

    def settings_for(self, brain_name: str) -> BrainSettings:
        """The settings of ``brain_name``: its own block, else the ``default`` block as PPO."""
        if brain_name in self.blocks:
            return self.blocks[brain_name]
        return _resolve(self.path, self.raw, brain_name, self.registry, use_default_only=True)

    def settings_for_environment(self, brains: Mapping[str, BrainParameters],
                                 external_brain_names: List[str]) -> Dict[str, BrainSettings]:
        """Settings for every External brain, checked against the scene's brains."""
        result = {}
        for name in external_brain_names:
            settings = self.settings_for(name)
            if name not in self.blocks:
                logger.info("Brain %r has no block in %s: it uses the 'default' block.", name, self.path)
            try:
                settings.trainer_class.check_environment(name, settings.parameters, brains, external_brain_names)
            except TrainerConfigError as e:
                raise TrainerConfigError(f"{self.path}: {e}") from None
            result[name] = settings
        return result


def load_trainer_config(path: str, registry: TrainerRegistry) -> TrainerConfig:
    """Read and validate the whole file (every block), before any environment is started."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except FileNotFoundError:
        raise TrainerConfigError(
            f"The trainer configuration {path} could not be found. Pass an existing file with "
            "--trainer-config.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TrainerConfigError(f"The trainer configuration {path} could not be read: {e}.") from None
    except yaml.YAMLError as e:
        raise TrainerConfigError(f"The trainer configuration {path} is not valid YAML: {e}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TrainerConfigError(
            f"{path}: expected a mapping with a 'default:' block and one block per brain, "
            f"got a {type(raw).__name__}.")
    default = raw.get("default", {})
    if default is not None and not isinstance(default, dict):
        raise TrainerConfigError(f"{path}: the 'default' block must be a mapping of key: value, got {default!r}.")
    config = TrainerConfig(path, raw, registry)
    config.raw.setdefault("default", {})
    if config.raw["default"] is None:
        config.raw["default"] = {}
    _check_default_keys(path, config.raw["default"], registry)
    for name in raw:
        if name == "default":
            continue
        if not isinstance(name, str):
            raise TrainerConfigError(f"{path}: block names must be brain names (strings), got {name!r}.")
        config.blocks[name] = _resolve(path, raw, name, registry)
    return config


def _check_default_keys(path: str, default: Dict[str, Any], registry: TrainerRegistry) -> None:
    known = {k for name in registry.names() for k in registry.get(name).hyperparameters}
    for key in default:
        if key in INJECTED_KEYS:
            raise TrainerConfigError(f"{path}: block 'default', key {key!r}: set by learn.py, remove it.")
        if key not in known:
            raise TrainerConfigError(
                f"{path}: block 'default', key {key!r}: unknown to every trainer type "
                f"({', '.join(registry.names())}).{_did_you_mean(key, known)}")


def _follow_aliases(path: str, raw: Dict[str, Any], name: str) -> Tuple[str, Dict[str, Any]]:
    chain = [name]
    block = raw[name]
    while isinstance(block, str):
        target = block
        if target in chain:
            raise TrainerConfigError(
                f"{path}: brain {name!r}: alias cycle {' -> '.join(chain + [target])}. "
                "An alias must lead to a block of keys.")
        if target not in raw:
            raise TrainerConfigError(
                f"{path}: brain {chain[-1]!r} is an alias of {target!r}, but there is no block {target!r}. "
                f"Blocks: {', '.join(sorted(map(str, raw)))}.")
        chain.append(target)
        block = raw[target]
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise TrainerConfigError(
            f"{path}: brain {chain[-1]!r}: expected a block of key: value (or an alias string), "
            f"got {block!r}.")
    return chain[-1], block


def _trainer_type(path: str, name: str, block: Dict[str, Any], default: Dict[str, Any]) -> str:
    ghost = block.get("is_ghost", False)
    imitation = block.get("is_imitation", False)
    for key, value in (("is_ghost", ghost), ("is_imitation", imitation)):
        if not isinstance(value, bool):
            raise TrainerConfigError(f"{path}: brain {name!r}, key {key!r}: expected true or false, got {value!r}.")
    if ghost and imitation:
        raise TrainerConfigError(f"{path}: brain {name!r}: is_ghost and is_imitation cannot both be true.")
    implied = "ghost" if ghost else "imitation" if imitation else None
    explicit = block.get("trainer")
    if explicit is not None and not isinstance(explicit, str):
        raise TrainerConfigError(f"{path}: brain {name!r}, key 'trainer': expected a trainer name, got {explicit!r}.")
    if explicit is not None and implied is not None and explicit != implied:
        raise TrainerConfigError(
            f"{path}: brain {name!r}: 'trainer: {explicit}' contradicts 'is_{implied}: true'; keep one of them.")
    return explicit or implied or default.get("trainer") or "ppo"


def _resolve(path: str, raw: Dict[str, Any], name: str, registry: TrainerRegistry,
             use_default_only: bool = False) -> BrainSettings:
    default = raw.get("default") or {}
    source, block = ("default", {}) if use_default_only else _follow_aliases(path, raw, name)
    trainer_type = _trainer_type(path, name, block, default)
    try:
        cls = registry.get(trainer_type)
    except UnityTrainerException as e:
        raise TrainerConfigError(f"{path}: brain {name!r}, key 'trainer': {e}") from None
    declared = cls.hyperparameters
    merged: Dict[str, Any] = {}
    for key, value in default.items():
        if key in declared:  # default keys meant for other trainer types are not this brain's business
            merged[key] = value
    for key, value in block.items():
        if key in INJECTED_KEYS:
            raise TrainerConfigError(f"{path}: brain {name!r}, key {key!r}: set by learn.py, remove it.")
        if key not in declared:
            raise TrainerConfigError(
                f"{path}: brain {name!r}, key {key!r}: unknown hyperparameter for the {trainer_type} trainer."
                f"{_did_you_mean(key, declared)} Its keys are: {', '.join(sorted(declared))}.")
        merged[key] = value
    params: Dict[str, Any] = {}
    for key, param in declared.items():
        if key in merged:
            params[key] = coerce(path, name, key, merged[key], param)
        elif param.required:
            raise TrainerConfigError(
                f"{path}: brain {name!r}, key {key!r}: required by the {trainer_type} trainer but missing. "
                f"Add it to the brain's block{f' ({param.doc})' if param.doc else ''}.")
        else:
            params[key] = param.default
    params["trainer"] = trainer_type
    try:
        cls.check_parameters(name, params)
    except TrainerConfigError as e:
        raise TrainerConfigError(f"{path}: {e}") from None
    return BrainSettings(name, trainer_type, cls, params, source)


_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list"}


def coerce(path: str, brain: str, key: str, value: Any, param: Param) -> Any:
    """Check ``value`` against ``param``; return it in the declared type.

    YAML 1.1 reads ``1.0e6`` (no sign in the exponent) as a string, so numeric strings are
    accepted for numbers; integral floats are accepted for integers.
    """
    where = f"{path}: brain {brain!r}, key {key!r}"
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
        raise TrainerConfigError(
            f"{where}: expected {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r} ({type(value).__name__}).")
    if param.check is not None:
        predicate, description = param.check
        if not predicate(converted):
            raise TrainerConfigError(f"{where}: must be {description}, got {value!r}.")
    return converted


def _did_you_mean(key: str, candidates) -> str:
    close = difflib.get_close_matches(str(key), list(candidates), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def hyperparameters_markdown(registry: TrainerRegistry, names: Tuple[str, ...] = ("ppo", "ghost", "imitation")) -> str:
    """Reference tables of the built-in trainers' keys (``docs/configuration.md`` is this text)."""
    lines = [
        "# Trainer configuration reference",
        "",
        "Generated from the trainers' declarations by `python -m trainers.config`; a test keeps it in",
        "step with the code. `trainer_configurations.yaml` has a `default:` block and one block per",
        "brain; a brain's block overrides the default key by key, and a block may be a string naming",
        "another block (an alias). Steps count agent steps. Numbers such as `1.0e6` are accepted.",
        "",
    ]
    for name in names:
        cls = registry.get(name)
        lines += [f"## `{name}` ({cls.__module__}.{cls.__name__})", ""]
        doc = (cls.__doc__ or "").strip().splitlines()
        if doc:
            lines += [doc[0], ""]
        lines += ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        for key, p in sorted(cls.hyperparameters.items()):
            default = "required" if p.required else ("-" if p.default is None else f"`{p.default}`")
            allowed = p.check[1] if p.check else ""
            lines.append(f"| `{key}` | {p.kind.__name__} | {default} | {allowed} | {p.doc} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    from .registry import load_registry

    print(hyperparameters_markdown(load_registry()))
