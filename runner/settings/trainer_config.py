"""``trainer_configurations.yaml``: loading, alias resolution and validation.

The file holds a ``default:`` block and one block per brain; a brain's block overrides the
default key by key. A block may instead be a string, an alias (``TurretBrain: ExampleBrain``:
use ExampleBrain's block). Each block selects its trainer with ``trainer: <name>`` or the seed's
``is_ghost: true`` / ``is_imitation: true``; PPO otherwise.

Validation happens in two stages, both before any training step (Release 22's run config is
read into the same ``BrainSettings`` by ``runner.settings.run_config``, sharing ``brain_settings``):

1. ``load_trainer_config`` (before the environment is launched): the whole file, every block,
   against the ``hyperparameters`` each trainer class declares (unknown keys, types, ranges,
   required keys, aliases, the trainer's own cross-field checks);
2. ``TrainerConfig.settings_for_environment`` (once the environment has said which brains it
   has): the checks that need the scene, e.g. a ghost's ``brain_to_copy`` must be External.

Every error is a ``TrainerConfigError`` naming the file, the brain and the key.

Stage 1 also refuses what a hostile or careless user may try: an empty file, a key given
twice in one block (``StrictLoader``), a block that is a near miss of ``default``, non-finite
numbers (``.inf``, ``.nan``, ``1e400``), values past ``SANE_MAXIMUM`` or int32, and networks that
cannot fit the machine's memory. Stage 2 adds a block that is a near miss of a brain of the scene
with no block of its own, and buffers that cannot fit the memory for the brain's sizes.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type

import yaml

from trainers.settings.schema import (
    CheckedSettings,
    Param,
    TrainerConfigError,
    UnityTrainerException,
    brain_key,
    check_block,
    coerce_value,
    did_you_mean,
    total_memory_bytes,
)
from trainers.trainer.base import COMMON_HYPERPARAMETERS, Trainer
from trainers.trainer.registry import TrainerRegistry
from unityagents.brain import BrainParameters, former_names, team_base

logger = logging.getLogger("unityagents")

#: Keys the controller adds; a user setting them would be overwritten, so they are refused.
INJECTED_KEYS = ("graph_scope", "summary_path")
#: The keys that choose a brain's trainer (checked with the trainer type, not by each trainer).
TRAINER_SELECTORS = ("trainer", "is_ghost", "is_imitation")
#: The recurrent-policy keys: a trainer that does not declare them has no memory to size.
RECURRENT_KEYS = ("use_recurrent", "memory_size", "sequence_length")

#: Largest value of any integer key: TensorFlow feeds batch sizes, sequence lengths and step
#: counters as int32, so a larger value cannot work anywhere.
INT_MAXIMUM = 2 ** 31 - 1

#: Upper bounds no sensible run goes past, by key, for every trainer type that declares the key.
#: Values beyond them hang while the graph is built (``num_layers: 100000``), exhaust memory
#: (``hidden_units: 1e12``) or make the run meaningless (``learning_rate: 5``), so they are refused
#: before the environment is launched. ``(bound, why)``; the bound is inclusive.
_DO_NOT_FIT = "{} do not fit in memory"
_STALLS = "more gradient steps per update would stall the run"
SANE_MAXIMUM: Dict[str, Tuple[float, str]] = {
    "max_steps": (1.0e12, "a trillion agent steps is decades at 1000 steps per second"),
    "learning_rate": (1.0, "a step size above 1 diverges at once"),
    "num_layers": (64, "deeper MLPs do not train and take minutes to build"),
    "max_num_models": (1000, "each snapshot is a full copy of the network's weights"),
    "num_epoch": (1000, "more passes over one buffer would stall the run at each update"),
    "batches_per_epoch": (100000, _STALLS),
    "gradient_steps": (100000, _STALLS),
    **{key: (bound, _DO_NOT_FIT.format(what)) for key, bound, what in [
        ("hidden_units", 65536, "wider layers"),
        ("buffer_size", 1.0e8, "longer buffers"),
        ("batch_size", 1.0e7, "larger minibatches"),
        ("time_horizon", 1.0e7, "longer trajectories"),
        ("sequence_length", 10000, "longer LSTM unrolls"),
    ]},
}

#: Bytes per network weight counted when a configuration is checked against the machine's memory:
#: the float32 weight, its gradient and Adam's two moments. A lower bound, so only networks that
#: surely cannot be built are refused.
BYTES_PER_WEIGHT = 16


class _DuplicateKeyError(yaml.YAMLError):
    """A mapping that gives one key twice (PyYAML would silently keep the last value)."""

    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(f"key {key!r} on line {line}")
        self.key, self.line, self.first_line = key, line, first_line


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in the same mapping.

    Plain ``safe_load`` keeps the last of two ``batch_size:`` lines of a block without a word, so
    the value a user edited may not be the one that trains. Merge keys (``<<: *anchor``) may still
    be overridden by explicit keys: that is what they are for.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
        seen: Dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                break
            if first is not None:
                raise _DuplicateKeyError(key, line, first)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class BrainSettings:
    """The resolved settings of one brain, as either format's reader made them: its trainer class and
    its checked settings (a read-only mapping of every key the class declares)."""

    brain_name: str
    trainer_type: str
    trainer_class: Type[Trainer]
    parameters: Mapping[str, Any]
    from_block: str  # which YAML block they came from ('default' when the brain has none)


@dataclass
class TrainerConfig:
    """A validated configuration file."""

    path: str
    raw: Dict[str, Any]
    registry: TrainerRegistry
    blocks: Dict[str, BrainSettings] = field(default_factory=dict)

    def block_of(self, brain_name: str) -> Optional[str]:
        """The block that configures ``brain_name``: its own, else its name's without the modern
        protocol's ``?team=N`` suffix, else (a built-in scene's behaviour, which carries the name of
        Unity's example over gRPC) the block of the brain name it had before (``Ball3DBrain`` for
        ``3DBall``); None when only the ``default`` block applies."""
        base = team_base(brain_name)
        former = former_names(base)
        for name in (brain_name, base, *(f + brain_name[len(base):] for f in former), *former):
            if name in self.blocks:
                return name
        return None

    def settings_for(self, brain_name: str) -> BrainSettings:
        """The settings of ``brain_name``: its block (``block_of``), else the ``default`` block as PPO."""
        block_name = self.block_of(brain_name)
        if block_name == brain_name:
            return self.blocks[brain_name]
        if block_name is not None:
            block = self.blocks[block_name]
            return dataclasses.replace(block, brain_name=brain_name)
        return _resolve(self.path, self.raw, brain_name, self.registry, use_default_only=True)

    def settings_for_environment(self, brains: Mapping[str, BrainParameters],
                                 external_brain_names: List[str]) -> Dict[str, BrainSettings]:
        """Settings for every External brain, checked against the scene's brains.

        Blocks that name no brain of the scene are fine (one file serves many scenes), except a near
        miss of an External brain that has no block of its own: that is a typo, and without this
        check the brain would silently train with the defaults.
        """
        self._check_block_names(brains, external_brain_names)
        result = {}
        for name in external_brain_names:
            settings = self.settings_for(name)
            if self.block_of(name) is None:
                logger.info("Brain %r has no block in %s: it uses the 'default' block.", name, self.path)
            for key in ("brain_to_copy", "brain_to_imitate"):  # a block written for 'X' names 'X?team=0' too
                target = settings.parameters.get(key)
                if isinstance(target, str) and target not in brains:
                    matches = [b for b in brains if team_base(b) == target]
                    if len(matches) == 1:
                        settings = dataclasses.replace(settings, parameters=checked_settings(
                            settings.trainer_class, name, {**settings.parameters, key: matches[0]}))
            try:
                settings.trainer_class.check_environment(name, settings.parameters, brains, external_brain_names)
            except TrainerConfigError as e:
                raise TrainerConfigError(f"{self.path}: {e}") from None
            if name in brains:
                _check_brain_memory(self.path, name, settings.parameters, brains[name])
                if getattr(brains[name], "is_hybrid", False) and not getattr(
                        settings.trainer_class, "supports_hybrid_actions", False):
                    brain = brains[name]
                    raise TrainerConfigError(
                        f"{self.path}: brain {name!r}, key 'trainer': the {settings.trainer_class.trainer_type} "
                        f"trainer cannot act for hybrid actions ({brain.action_space_size} continuous and discrete "
                        f"branches {brain.action_branches}). Train this brain with trainer: ppo, or give the "
                        "behaviour only continuous actions or only discrete branches.")
            result[name] = settings
        return result

    def _check_block_names(self, brains: Mapping[str, BrainParameters], external_brain_names: List[str]) -> None:
        alias_targets = {block for block in self.raw.values() if isinstance(block, str)}
        bases = {team_base(n) for n in brains}
        bases |= {old for b in list(bases) for old in former_names(b)}
        without_block = [n for n in external_brain_names if self.block_of(n) is None]
        for block in self.blocks:
            if block in brains or block in alias_targets or block in bases:
                continue
            close = difflib.get_close_matches(block, without_block, n=1, cutoff=0.75)
            if not close:
                close = [n for n in without_block if n.lower() == block.lower()]
            if close:
                raise TrainerConfigError(
                    f"{self.path}: block {block!r} names no brain of the scene; did you mean {close[0]!r}? "
                    f"{close[0]!r} has no block, so it would train with the 'default' block. Rename the block "
                    f"(the scene's brains: {', '.join(sorted(brains))}).")


def load_trainer_config(path: str, registry: TrainerRegistry) -> TrainerConfig:
    """Read and validate the whole file (every block), before any environment is started."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.load(f, Loader=StrictLoader)
    except FileNotFoundError:
        raise TrainerConfigError(
            f"The trainer configuration {path} could not be found. Pass an existing file with "
            "--trainer-config.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TrainerConfigError(f"The trainer configuration {path} could not be read: {e}.") from None
    except _DuplicateKeyError as e:
        raise TrainerConfigError(
            f"{path}: line {e.line}: the key {e.key!r} is given a second time in the same block (first on "
            f"line {e.first_line}); YAML would silently keep only the last value. Remove one of them.") from None
    except yaml.YAMLError as e:
        raise TrainerConfigError(f"The trainer configuration {path} is not valid YAML: {e}") from None
    if isinstance(raw, dict) and isinstance(raw.get("behaviors"), dict) and "default" not in raw:
        raise TrainerConfigError(
            f"{path} is a Release 22 run config (behaviors:), which learn.py does not read: train it with "
            f"`unityagents-learn {path} --env=<scene> --run-id=<id>`, or give learn.py a file of one block per brain.")
    return trainer_config_from_dict(path, raw, registry)


def trainer_config_from_dict(path: str, raw: Any, registry: TrainerRegistry) -> TrainerConfig:
    """Validate an already parsed file (``path`` names it in errors). Each block is checked once
    against its trainer's declarations; ``brain_settings`` then applies the checks that span keys,
    which Release 22's reader (``runner.settings.run_config``) shares."""
    if raw is None:
        raise TrainerConfigError(
            f"{path}: the file is empty (or only comments); expected a mapping with a 'default:' block and "
            "one block per brain. Copy the shipped trainer_configurations.yaml, or leave out --trainer-config "
            "to use it.")
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
        if isinstance(name, str) and name != "default" and _looks_like_default(name):
            raise TrainerConfigError(
                f"{path}: block {name!r}: did you mean 'default'? A block named {name!r} would only apply to a "
                "brain of that name, and the defaults would silently be the built-in ones. Rename it 'default'.")
    for name in raw:
        if name == "default":
            continue
        if not isinstance(name, str):
            raise TrainerConfigError(f"{path}: block names must be brain names (strings), got {name!r}.")
        config.blocks[name] = _resolve(path, raw, name, registry)
    return config


def _check_default_keys(path: str, default: Dict[str, Any], registry: TrainerRegistry) -> None:
    where = brain_key(f"{path}: block 'default'")
    for key in default:
        if key in INJECTED_KEYS:
            raise TrainerConfigError(f"{where(key)}: set by learn.py, remove it.")
    known = {k: p for name in registry.names() for k, p in registry.get(name).hyperparameters.items()}
    check_block(where, default, known, "'default'", partial=True, coerce=lambda *_: None,
                unknown=f"hyperparameter, to every trainer type ({', '.join(registry.names())})")
    # Values too, for every trainer type that declares the key: a brain with no block of its own
    # is only resolved once the scene is known, which is too late for a value that is plainly wrong.
    for name in registry.names():
        declared = registry.get(name).hyperparameters
        check_block(where, {k: v for k, v in default.items() if k in declared and k not in TRAINER_SELECTORS},
                    declared, f"the {name} trainer", partial=True, coerce=bounded)


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
                f"{path}: brain {chain[-1]!r} is an alias of {target!r}, but there is no block {target!r}."
                f"{did_you_mean(target, [str(b) for b in raw if b != chain[-1]])} "
                f"Blocks: {', '.join(sorted(map(str, raw)))}.")
        chain.append(target)
        block = raw[target]
    if block is None or isinstance(block, dict):
        return chain[-1], {} if block is None else block
    raise TrainerConfigError(
        f"{path}: brain {chain[-1]!r}: expected a block of key: value (or an alias string), got {block!r}.")


def _trainer_type(path: str, name: str, block: Dict[str, Any], default: Dict[str, Any]) -> str:
    ghost, imitation = (coerce_value(f"{path}: brain {name!r}, key {key!r}", block.get(key, False),
                                     COMMON_HYPERPARAMETERS[key]) for key in ("is_ghost", "is_imitation"))
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
    for key, value in block.items():
        if key in INJECTED_KEYS:
            raise TrainerConfigError(f"{path}: brain {name!r}, key {key!r}: set by learn.py, remove it.")
        if key not in declared and key in RECURRENT_KEYS and value not in (False, None):
            raise TrainerConfigError(
                f"{path}: brain {name!r}, key {key!r}: the {trainer_type} trainer has no recurrent policy (no "
                "memory), so it cannot use this setting. Remove use_recurrent, memory_size and sequence_length "
                "from this brain, or train it with trainer: ppo, which keeps an LSTM memory per agent.")
    # default keys meant for other trainer types are not this brain's business
    merged = {**{key: value for key, value in default.items() if key in declared}, **block}
    params = check_block(brain_key(f"{path}: brain {name!r}"), merged, declared, f"the {trainer_type} trainer",
                         unknown=f"hyperparameter for the {trainer_type} trainer", coerce=bounded)
    return brain_settings(path, name, trainer_type, cls, params, source)


def brain_settings(path: str, name: str, trainer_type: str, cls: Type[Trainer], params: Dict[str, Any],
                   source: str) -> BrainSettings:
    """One brain's settings from its checked block (either format's reader ends here): the checks that
    span keys (the network's size, a brain naming itself, the trainer's ``check_parameters``)."""
    params["trainer"] = trainer_type
    _check_network_size(path, name, params)
    for key in ("brain_to_copy", "brain_to_imitate"):  # needs no scene, so found before the launch
        if params.get(key) == name:
            raise TrainerConfigError(
                f"{path}: brain {name!r}, key {key!r}: names the brain itself; a brain cannot learn from its "
                "own policy. Name the other brain of the scene.")
    try:
        checked = cls.check_parameters(name, params)
    except TrainerConfigError as e:
        raise TrainerConfigError(f"{path}: {e}") from None
    return BrainSettings(name, trainer_type, cls, checked_settings(cls, name, params if checked is None else checked),
                         source)


def checked_settings(cls: Type[Trainer], name: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
    """A brain's checked block as the trainer takes it: with its frozen typed form made here, once
    (``CheckedSettings``), when it holds exactly the keys its class declares; as it is otherwise."""
    if set(params) == set(cls.hyperparameters):
        return CheckedSettings(params, cls.hyperparameters, f"{cls.__name__}Settings", name)
    return MappingProxyType(dict(params))


def coerce(path: str, brain: str, key: str, value: Any, param: Param) -> Any:
    """``bounded`` for a key of a brain's block (``brain == "default"``: of the default block)."""
    where = f"{path}: block 'default', key {key!r}" if brain == "default" else f"{path}: brain {brain!r}, key {key!r}"
    return bounded(where, key, value, param)


def bounded(where: str, key: str, value: Any, param: Param) -> Any:
    """Check ``value`` against ``param`` (``coerce_value``), then against the key's sane maximum."""
    converted = coerce_value(where, value, param)
    if param.kind in (int, float) and isinstance(converted, (int, float)):
        check_upper_bound(where, key, value, converted, param.kind)
    return converted


def check_upper_bound(where: str, key: str, value: Any, number: float, kind: type,
                      error: Type[TrainerConfigError] = TrainerConfigError) -> None:
    """Refuse a value past ``SANE_MAXIMUM[key]`` (or, for integers, past int32)."""
    bound, why = SANE_MAXIMUM.get(key, (None, ""))
    if bound is not None and number > bound:
        raise error(
            f"{where}: must be at most {short_number(bound)} ({why}), got {value!r}. Use a smaller value.")
    if kind is int and abs(number) > INT_MAXIMUM:
        raise error(
            f"{where}: must be at most {INT_MAXIMUM} in size (TensorFlow counts it in int32), got {value!r}. "
            "Use a smaller value.")


def short_number(x: float) -> str:
    """``1e7`` rather than ``1e+07``; small integers as they are."""
    if float(x).is_integer() and abs(x) < 1e6:
        return str(int(x))
    mantissa, _, exponent = f"{x:.6g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def _check_network_size(path: str, name: str, params: Dict[str, Any], input_size: int = 0) -> None:
    """Refuse ``hidden_units`` x ``num_layers`` that cannot be built in this machine's memory.

    Counts only the weights that surely exist: ``num_layers - 1`` square hidden layers, plus the
    first layer when ``input_size`` (known once the scene is) is given, in one network.
    """
    hidden, layers = params.get("hidden_units"), params.get("num_layers")
    if not isinstance(hidden, int) or not isinstance(layers, int) or layers <= 0:
        return
    weights = (layers - 1) * hidden * hidden + input_size * hidden
    memory = total_memory_bytes()
    if memory is None or weights * BYTES_PER_WEIGHT <= memory:
        return
    raise TrainerConfigError(
        f"{path}: brain {name!r}, keys 'hidden_units' and 'num_layers': {layers} layers of {hidden} units make at "
        f"least {weights:.3g} weights, {weights * BYTES_PER_WEIGHT / 2 ** 30:.1f} GiB with their gradients and "
        f"optimizer state, more than this machine's {memory / 2 ** 30:.1f} GiB of memory: the graph cannot be "
        "built. Use fewer or narrower layers (the defaults are 2 x 128).")


def _check_brain_memory(path: str, name: str, params: Dict[str, Any], brain: BrainParameters) -> None:
    """Refuse a network or a buffer that cannot fit this machine's memory for this brain's sizes.

    Counts 4 bytes per float of what each stored step surely holds (state, camera pixels, memory,
    action), so only configurations that cannot possibly fit are refused.
    """
    input_size = brain.state_width if brain.state_space_type == "continuous" else 0
    _check_network_size(path, name, params, input_size=input_size)
    steps = params.get("buffer_size")
    memory = total_memory_bytes()
    if not isinstance(steps, int) or memory is None:
        return
    pixels = 0
    for camera in brain.camera_resolutions:
        try:
            channels = 1 if camera.get("blackAndWhite") else 3
            pixels += int(camera.get("width", 0)) * int(camera.get("height", 0)) * channels
        except (AttributeError, TypeError, ValueError):
            continue  # the environment's own validation names a malformed camera
    floats = brain.state_width + pixels + brain.memory_space_size + max(brain.action_space_size, 1)
    needed = steps * floats * 4
    if needed > memory:
        raise TrainerConfigError(
            f"{path}: brain {name!r}, key 'buffer_size': {steps} steps of {floats} floats each (states, "
            f"{pixels} camera values, memory, actions) need at least {needed / 2 ** 30:.1f} GiB, more than this "
            f"machine's {memory / 2 ** 30:.1f} GiB of memory. Use a smaller buffer_size.")


def _looks_like_default(name: str) -> bool:
    """A block name that is a near miss of 'default' ('Default', 'defualt', 'defaults')."""
    return name.lower() == "default" or bool(difflib.get_close_matches(name.lower(), ["default"], n=1, cutoff=0.8))
