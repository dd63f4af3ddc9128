"""ML-Agents Release 22's run config (``behaviors:``, ``hyperparameters:``, ``network_settings:`` ...).

``resolve`` checks such a file (merged with the command line by ``runner.settings.release22``) once,
against the Release 22 schema and each trainer's and reward signal's own declarations, fills
Release 22's defaults (``RunConfig.as_dict`` is configuration.yaml), and reads each behaviour
straight into the settings ``learn.py``'s reader produces (``runner.settings.trainer_config.BrainSettings``):
each declared key taken from where Release 22 places it.

Three kinds of key are told apart, and none is silently dropped:

* a key of the schema that this project implements: read into the trainer's settings;
* a key of the schema that it does not implement (a ``memory`` for a trainer without one,
  a trainer type that is not registered, ...): an error naming the key path and the feature that is missing,
  unless its value is the one that changes nothing;
* any other key: an error with a did-you-mean.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional

from runner.settings.trainer_config import BrainSettings, brain_settings, check_upper_bound
from trainers.imitation.bc import BC_PARAMETERS
from trainers.reward_signals import SIGNALS, complete_reward_signals
from trainers.settings.schema import (
    Coercer,
    Follows,
    Param,
    TrainerConfigError,
    check_block,
    coerce_value,
    did_you_mean,
    key_path,
    positive,
)
from trainers.settings.self_play import validate_self_play


class RunConfigError(TrainerConfigError):
    """A Release 22 run config that cannot be used; the message names the file, the key path and the fix."""


#: A block's keys: the same declarations as learn.py's (``Param``), checked by the same ``check_block``.
Schema = Dict[str, Param]


def _count(default: int) -> Param:
    """A Release 22 count of agent steps, which must be > 0."""
    return Param(int, default, check=(positive, "> 0"))


SCHEDULES = ("linear", "constant")
VIS_ENCODE_TYPES = ("simple", "nature_cnn", "resnet", "match3", "fully_connected")
#: Release 22's own trainer types; a registered trainer (built-in or plugin) is configured alike.
RELEASE22_TRAINER_TYPES = ("ppo", "sac", "poca")
#: The keys of a trainer's declaration that Release 22 places outside ``hyperparameters:`` (the
#: behaviour's own keys, ``network_settings``, ``reward_signals``, and the trainer's selection).
OUTSIDE_HYPERPARAMETERS = frozenset({
    "trainer", "is_ghost", "is_imitation",
    "max_steps", "summary_freq", "time_horizon", "threaded", "self_play", "behavioral_cloning",
    "normalize", "hidden_units", "num_layers", "vis_encode_type", "use_recurrent", "memory_size", "sequence_length",
    "gamma", "reward_signals", "init_path", "deterministic"})
#: Release 22 hyperparameters that no trainer here builds, by trainer type (``NOT_BUILT`` says why).
NOT_BUILT_HYPERPARAMETERS: Dict[str, Schema] = {"ppo": {"shared_critic": Param(bool, False)}}


def hyperparameters_schema(trainer_type: str, cls: Any) -> Schema:
    """The ``hyperparameters:`` block of ``trainer_type``: the keys its class declares (``hyperparameters``)
    that Release 22 does not place elsewhere, with the class's ``release22_defaults`` where Release 22's differ."""
    schema = {k: p for k, p in cls.hyperparameters.items() if k not in OUTSIDE_HYPERPARAMETERS}
    for key, default in getattr(cls, "release22_defaults", {}).items():  # Follows: filled in after the check
        schema[key] = replace(schema[key], default=None if isinstance(default, Follows) else default)
    schema.update(NOT_BUILT_HYPERPARAMETERS.get(trainer_type, {}))
    return schema


NETWORK: Schema = {"normalize": Param(bool, False), "hidden_units": Param(int, 128), "num_layers": Param(int, 2),
                   "vis_encode_type": Param(str, "simple", choices=VIS_ENCODE_TYPES), "memory": Param(dict),
                   "goal_conditioning_type": Param(str, "hyper", choices=("hyper", "none")),
                   "deterministic": Param(bool, False)}
MEMORY: Schema = {"sequence_length": Param(int, 64), "memory_size": Param(int, 128)}
#: The keys of ``network_settings`` that a trainer declares under the same name.
NETWORK_KEYS = ("normalize", "hidden_units", "num_layers", "vis_encode_type")
#: A signal's declared keys that Release 22 places in the signal's ``network_settings``, and their names there.
SIGNAL_NETWORK = {"encoding_size": "hidden_units", "num_layers": "num_layers", "normalize": "normalize"}


def signal_schema(cls: Any) -> Schema:
    """A reward signal's Release 22 block: the keys its class declares (``parameters``), those of its network
    under ``network_settings``, with the class's ``release22_defaults`` where Release 22's differ."""
    schema = {k: p for k, p in cls.parameters.items() if k not in SIGNAL_NETWORK}
    for key, default in getattr(cls, "release22_defaults", {}).items():
        schema[key] = replace(schema[key], default=default)
    schema["network_settings"] = Param(dict)
    if "encoding_size" in cls.parameters:  # Release 22's deprecated alias of network_settings.hidden_units
        schema["encoding_size"] = Param(int, check=(positive, "> 0"))
    return schema


#: learn.py's block, with Release 22's default of num_epoch (null: the trainer's own).
BEHAVIORAL_CLONING: Schema = {**BC_PARAMETERS, "num_epoch": replace(BC_PARAMETERS["num_epoch"], default=None)}
TRAINER: Schema = {
    "trainer_type": Param(str, "ppo"), "hyperparameters": Param(dict), "network_settings": Param(dict),
    "reward_signals": Param(dict), "init_path": Param(str), "keep_checkpoints": Param(int, 5),
    "even_checkpoints": Param(bool, False), "checkpoint_interval": _count(500000), "max_steps": _count(500000),
    "time_horizon": _count(64), "summary_freq": _count(50000), "threaded": Param(bool, False),
    "self_play": Param(dict), "behavioral_cloning": Param(dict)}
ENV_SETTINGS: Schema = {
    "env_path": Param(str), "env_args": Param(list), "base_port": Param(int, 5005), "num_envs": Param(int, 1),
    "num_areas": Param(int, 1), "timeout_wait": Param(int, 60), "seed": Param(int, -1),
    "max_lifetime_restarts": Param(int, 10), "restarts_rate_limit_n": Param(int, 1),
    "restarts_rate_limit_period_s": Param(int, 60)}
ENGINE_SETTINGS: Schema = {
    "width": Param(int, 84), "height": Param(int, 84), "quality_level": Param(int, 5), "time_scale": Param(float, 20),
    "target_frame_rate": Param(int, -1), "capture_frame_rate": Param(int, 60), "no_graphics": Param(bool, False),
    "no_graphics_monitor": Param(bool, False)}
CHECKPOINT_SETTINGS: Schema = {
    "run_id": Param(str, "ppo"), "initialize_from": Param(str), "load_model": Param(bool, False),
    "resume": Param(bool, False), "force": Param(bool, False), "train_model": Param(bool, False),
    "inference": Param(bool, False), "results_dir": Param(str, "results")}
TORCH_SETTINGS: Schema = {"device": Param(str)}
TOP: Schema = {"default_settings": Param(dict), "behaviors": Param(dict), "env_settings": Param(dict),
               "engine_settings": Param(dict), "environment_parameters": Param(dict),
               "checkpoint_settings": Param(dict), "torch_settings": Param(dict), "debug": Param(bool, False)}

#: Values of schema keys that this project does not build, and what is missing. A key given with
#: any other value than its harmless one is an error with this text.
NOT_BUILT = {
    "hyperparameters.shared_critic": "a critic shared with the policy",
    "checkpoint_settings.load_model": "--load (deprecated in Release 22: use --resume)",
}
#: The value of each NOT_BUILT key that asks for nothing missing.
HARMLESS = {"hyperparameters.shared_critic": False,
            "checkpoint_settings.load_model": False}


def check(path: str, where: str, block: Any, schema: Schema, what: str,
          coerce: Optional[Coercer] = None) -> Dict[str, Any]:
    """``check_block`` of one block of the run config, named by its key path (``behaviors.X.self_play``)."""
    return check_block(key_path(path, where), block, schema, what, error=RunConfigError, coerce=coerce)


def bounded_as_declared(declared: Mapping[str, Param]) -> Coercer:
    """The coercion of a behaviour's keys: each checked as its schema says, and a key the trainer
    declares also against its sane maximum (``runner.settings.trainer_config.SANE_MAXIMUM``)."""
    def coerce(where: str, key: str, value: Any, param: Param) -> Any:
        converted = coerce_value(where, value, param, RunConfigError)
        if key in declared and isinstance(converted, (int, float)) and not isinstance(converted, bool):
            check_upper_bound(where, key, value, converted, declared[key].kind, RunConfigError)
        return converted
    return coerce


def declared_as(schema: Schema, declared: Mapping[str, Param], keys) -> Schema:
    """``schema`` with each of ``keys`` that the trainer declares checked as it declares it, with
    Release 22's default: one declaration for the key in both formats."""
    out = dict(schema)
    for key in keys:
        if key in declared:
            out[key] = replace(declared[key], default=schema[key].default, required=False)
    return out


def deep_update(base: Dict[str, Any], update: Mapping[str, Any]) -> Dict[str, Any]:
    """Release 22's merge of a behaviour over ``default_settings``: mappings key by key, the rest replaced."""
    result = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = deep_update(dict(result[key]), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


@dataclass
class Behavior:
    """One resolved behaviour: its Release 22 settings (configuration.yaml) and its trainer's settings."""

    name: str
    settings: Dict[str, Any]
    brain: BrainSettings


@dataclass
class RunConfig:
    """A checked Release 22 run config with every default filled in (``as_dict`` is configuration.yaml)."""

    path: str
    sections: Dict[str, Any]
    behaviors: Dict[str, Behavior] = field(default_factory=dict)
    default_settings: Optional[Dict[str, Any]] = None
    #: The settings of a behaviour the config does not list (``default_settings``, else Release 22's).
    default_brain: Optional[BrainSettings] = None

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"default_settings": self.default_settings,
                               "behaviors": {n: b.settings for n, b in self.behaviors.items()}}
        out.update(self.sections)
        return out


def resolve(path: str, raw: Any, registered: Any = None) -> RunConfig:
    """Check the merged dict (file plus command line) and read each behaviour's settings; raise ``RunConfigError``.

    :param registered: the trainer registry (``trainers.trainer.registry``), whose classes declare
        each ``trainer_type``'s hyperparameters; a tuple of names or None loads the installed one.
    """
    if not hasattr(registered, "get"):
        from trainers.trainer.registry import load_registry

        registered = load_registry()
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RunConfigError(f"{path}: expected a mapping with 'behaviors:' at the top, got a {type(raw).__name__}.")
    top = check(path, "", raw, TOP, "the run config (Release 22 RunOptions)")
    env_settings = top["env_settings"]
    if isinstance(env_settings, dict) and isinstance(env_settings.get("env_args"), str):  # one string: split
        env_settings = dict(env_settings, env_args=env_settings["env_args"].split())
    sections = {
        "env_settings": check(path, "env_settings", env_settings, ENV_SETTINGS, "env_settings"),
        "engine_settings": check(path, "engine_settings", top["engine_settings"], ENGINE_SETTINGS,
                                       "engine_settings"),
        "environment_parameters": top["environment_parameters"],
        "checkpoint_settings": check(path, "checkpoint_settings", top["checkpoint_settings"],
                                           CHECKPOINT_SETTINGS, "checkpoint_settings"),
        "torch_settings": check(path, "torch_settings", top["torch_settings"], TORCH_SETTINGS,
                                      "torch_settings"),
        "debug": top["debug"],
    }
    if sections["env_settings"]["env_args"] is not None:
        sections["env_settings"]["env_args"] = [str(a) for a in sections["env_settings"]["env_args"]]
    for section in ("env_settings", "engine_settings", "checkpoint_settings"):
        for key, value in sections[section].items():
            _refuse_not_built(path, f"{section}.{key}", f"{section}.{key}", value)
    config = RunConfig(path, sections)
    default = top["default_settings"]
    # A behaviour the config does not list trains with default_settings, else with Release 22's defaults.
    default_behavior = read_behavior(path, "default", "default_settings", default or {}, registered)
    if default is not None:
        config.default_settings = default_behavior.settings
    config.default_brain = default_behavior.brain
    behaviors = top["behaviors"] or {}
    for name, block in behaviors.items():
        where = f"behaviors.{name}"
        if block is not None and not isinstance(block, dict):
            raise RunConfigError(f"{path}: {where}: expected a mapping of trainer settings, got {block!r}.")
        merged = deep_update(default, block or {}) if default is not None else (block or {})
        config.behaviors[str(name)] = read_behavior(path, str(name), where, merged, registered)
    return config


class _Placer:
    """A behaviour's trainer settings filled as its Release 22 block is read: every key the trainer
    declares starts at its declared default; ``place`` writes a value read from the block over it,
    or refuses a value that asks for a setting the trainer does not take."""

    def __init__(self, path: str, where: str, trainer_type: str, declared: Mapping[str, Param]) -> None:
        self.path, self.where, self.trainer_type, self.declared = path, where, trainer_type, declared
        self.values: Dict[str, Any] = {key: copy.deepcopy(param.default) for key, param in declared.items()}

    def place(self, key: str, place: str, value: Any, harmless: Any) -> None:
        """``key`` (declared name) takes ``value``, read at ``place`` (its Release 22 key path under the
        behaviour); ``harmless`` is the value that asks for nothing, and so may be given to any trainer."""
        if key in self.declared:
            self.values[key] = value
        elif value != harmless:
            raise RunConfigError(
                f"{self.path}: {self.where}.{place}: the {self.trainer_type} trainer does not take this setting "
                f"({key} is not among its keys: {', '.join(sorted(self.declared))}). Remove the key"
                f"{'' if harmless is None else f' (or set it to {_yaml(harmless)})'}.")


def read_behavior(path: str, name: str, where: str, block: Dict[str, Any], registry: Any) -> Behavior:
    """One behaviour's block read in one pass: each section checked as its trainer (and each reward
    signal) declares its keys, with Release 22's defaults, and each value placed at once under the
    key the trainer declares (``_Placer``); the completed block is what configuration.yaml holds.
    The checks that span keys end it (``brain_settings``, shared with learn.py's reader)."""
    settings = check(path, where, block, TRAINER, "a behaviour's trainer settings")
    trainer_type = settings["trainer_type"]
    cls = _trainer_class(path, where, trainer_type, registry)
    placer = _Placer(path, where, trainer_type, cls.hyperparameters)
    for key in ("max_steps", "summary_freq", "time_horizon"):
        if key in cls.hyperparameters:
            check_upper_bound(key_path(path, where)(key), key, settings[key], settings[key],
                              cls.hyperparameters[key].kind, RunConfigError)
    settings["hyperparameters"] = _hyperparameters(settings["hyperparameters"], cls, placer)
    settings["network_settings"] = _behavior_network(settings["network_settings"], placer)
    settings["reward_signals"] = _reward_signals(settings["reward_signals"], placer)
    placer.place("max_steps", "max_steps", float(settings["max_steps"]), float(TRAINER["max_steps"].default))
    for key in ("summary_freq", "time_horizon"):
        placer.place(key, key, settings[key], TRAINER[key].default)
    placer.place("threaded", "threaded", settings["threaded"], False)
    placer.place("init_path", "init_path", settings["init_path"], None)
    if settings["self_play"] is not None:
        try:  # learn.py's flat self_play block, named by this file's key path
            settings["self_play"] = validate_self_play(settings["self_play"], key_path(path, f"{where}.self_play"))
        except TrainerConfigError as e:
            raise RunConfigError(str(e)) from None
    placer.place("self_play", "self_play", None if settings["self_play"] is None else dict(settings["self_play"]),
                 None)
    bc = settings["behavioral_cloning"]
    if bc is not None:
        settings["behavioral_cloning"] = bc = check(path, f"{where}.behavioral_cloning", bc, BEHAVIORAL_CLONING,
                                                    "behavioral_cloning")
    placer.place("behavioral_cloning", "behavioral_cloning", None if bc is None else
                 {k: copy.deepcopy(p.default) if bc[k] is None else bc[k] for k, p in BC_PARAMETERS.items()}, None)
    if settings["even_checkpoints"]:
        settings["checkpoint_interval"] = int(settings["max_steps"] / max(settings["keep_checkpoints"], 1))
    if settings["checkpoint_interval"] <= 0:
        raise RunConfigError(f"{path}: {where}.even_checkpoints: max_steps {settings['max_steps']} over "
                             f"keep_checkpoints {settings['keep_checkpoints']} leaves no step between checkpoints. "
                             "Lower keep_checkpoints.")
    source = name if where.startswith("behaviors.") else "default"
    return Behavior(name, settings, brain_settings(path, name, trainer_type, cls, placer.values, source))


def _trainer_class(path: str, where: str, trainer_type: str, registry: Any) -> Any:
    """The registered class of ``trainer_type``; an error that tells Release 22's types we lack from typos."""
    registered = tuple(registry.names())
    if trainer_type in getattr(registry, "broken", {}):
        try:
            registry.get(trainer_type)
        except Exception as e:  # noqa: BLE001 - the registry's message names the plugin and why it failed
            raise RunConfigError(f"{path}: {where}.trainer_type: {e}") from None
    if trainer_type not in RELEASE22_TRAINER_TYPES and trainer_type not in registered:
        raise RunConfigError(
            f"{path}: {where}.trainer_type: {trainer_type!r} is not a Release 22 trainer type (ppo, sac, poca) nor a "
            f"registered one ({', '.join(registered)})."
            f"{did_you_mean(trainer_type, [*RELEASE22_TRAINER_TYPES, *registered])}")
    if trainer_type not in registered:
        raise RunConfigError(
            f"{path}: {where}.trainer_type: {trainer_type!r} is a Release 22 trainer type that this project has "
            f"not built (registered trainer types: {', '.join(registered)}). Use trainer_type: ppo, or install a "
            "trainer plugin that registers it.")
    return registry.get(trainer_type)


def _hyperparameters(block: Any, cls: Any, placer: _Placer) -> Dict[str, Any]:
    """``hyperparameters:``, checked as the trainer declares each key (with Release 22's defaults and
    schedules that follow ``learning_rate_schedule``), each given value placed as it is."""
    path, where, trainer_type = placer.path, f"{placer.where}.hyperparameters", placer.trainer_type
    hp = check(path, where, block, hyperparameters_schema(trainer_type, cls), f"{trainer_type} hyperparameters",
               coerce=bounded_as_declared(cls.hyperparameters))
    for key, default in getattr(cls, "release22_defaults", {}).items():
        if isinstance(default, Follows) and hp.get(key) is None:
            hp[key] = hp[default.key]
    not_built = NOT_BUILT_HYPERPARAMETERS.get(trainer_type, {})
    for key, value in hp.items():
        if key in not_built:
            _refuse_not_built(path, f"hyperparameters.{key}", f"{where}.{key}", value)
        elif value is not None:
            placer.values[key] = value
    return hp


def _behavior_network(block: Any, placer: _Placer) -> Dict[str, Any]:
    """``network_settings:``, checked as the trainer declares its keys; its memory, when given, makes
    the trainer's policy recurrent (an LSTM of ``memory_size`` floats trained on ``sequence_length`` steps)."""
    path, where, trainer_type, declared = placer.path, f"{placer.where}.network_settings", placer.trainer_type, \
        placer.declared
    net = _network(path, where, block, declared=declared)
    memory = net["memory"]
    if memory is not None and trainer_type not in ("ppo", "sac") and (
            trainer_type == "poca" or "use_recurrent" not in declared):
        raise RunConfigError(f"{path}: {where}.memory: the {trainer_type} trainer has no recurrent policy here, so "
                             "it cannot keep a memory. Remove the memory block, or use trainer_type: ppo.")
    for key in NETWORK_KEYS:
        placer.place(key, f"network_settings.{key}", net[key], NETWORK[key].default)
    placer.place("deterministic", "network_settings.deterministic", net["deterministic"], False)
    if memory is not None:
        placer.place("use_recurrent", "network_settings.memory", True, False)
        placer.place("memory_size", "network_settings.memory.memory_size", memory["memory_size"], None)
        placer.place("sequence_length", "network_settings.memory.sequence_length", memory["sequence_length"], None)
    return net


def _reward_signals(block: Any, placer: _Placer) -> Dict[str, Dict[str, Any]]:
    """``reward_signals:`` (none given: the extrinsic reward), each signal checked as its class declares
    its keys. The plain extrinsic reward is the trainer's ``gamma``; any other set is its
    ``reward_signals``, each signal's network keys under the names the signal declares."""
    path, where = placer.path, f"{placer.where}.reward_signals"
    signals = check_block(key_path(path, where), {"extrinsic": {}} if block is None else block,
                          {n: Param(dict) for n in SIGNALS}, "reward_signals", unknown="reward signal",
                          error=RunConfigError, partial=True)
    if not signals:
        raise RunConfigError(f"{path}: {where}: the block is empty; list at least one signal "
                             f"({', '.join(SIGNALS)}), or remove the key to train on the extrinsic reward.")
    resolved = {}
    for name, given in signals.items():
        cls = SIGNALS[name]
        sig = check(path, f"{where}.{name}", given, signal_schema(cls), f"the {name} signal")
        sig["network_settings"] = _network(  # its width and depth checked as the signal declares them
            path, f"{where}.{name}.network_settings", sig["network_settings"], memory_allowed=False,
            declared={SIGNAL_NETWORK[k]: p for k, p in cls.parameters.items() if k in SIGNAL_NETWORK}, bounded=False)
        for key, value in ((given or {}).get("network_settings") or {}).items():
            if key not in ("hidden_units", "num_layers", "memory", *_network_keys(cls)) \
                    and value != NETWORK[key].default:
                raise RunConfigError(
                    f"{path}: {where}.{name}.network_settings.{key}: {value!r} asks for a configurable "
                    f"{name} network, which this project does not build (its inputs are fixed; hidden_units "
                    f"sets its width and num_layers its depth). Remove the key (or set it to "
                    f"{_yaml(NETWORK[key].default)}).")
        if sig.get("encoding_size") is not None and given and "network_settings" not in given:
            sig["network_settings"]["hidden_units"] = sig["encoding_size"]  # Release 22's deprecated alias
        resolved[name] = sig
    extrinsic = resolved.get("extrinsic")
    if list(resolved) == ["extrinsic"] and extrinsic["strength"] == 1.0:
        placer.place("gamma", "reward_signals.extrinsic.gamma", extrinsic["gamma"], None)
    else:
        declared: Dict[str, Any] = {}
        for name, sig in resolved.items():
            entry = {k: v for k, v in sig.items() if k not in ("network_settings", "encoding_size") and v is not None}
            for key in _network_keys(SIGNALS[name]):  # what the signal declares of its network, as it names it
                entry[next(k for k, v in SIGNAL_NETWORK.items() if v == key)] = sig["network_settings"][key]
            declared[name] = entry
        placer.place("reward_signals", "reward_signals", complete_reward_signals(declared), None)
    return resolved


def _network(path: str, where: str, block: Any, memory_allowed: bool = True,
             declared: Mapping[str, Param] = MappingProxyType({}), bounded: bool = True) -> Dict[str, Any]:
    """A ``network_settings`` block; the keys the trainer ``declared`` are checked as it declares them
    (``bounded``: and against their sane maxima)."""
    coerce = bounded_as_declared(declared if bounded else {})
    # vis_encode_type keeps Release 22's list of choices (the same encoders), for its did-you-mean.
    net = check(path, where, block, declared_as(NETWORK, declared, NETWORK_KEYS[:3]), "network_settings", coerce)
    if net["memory"] is not None:
        if not memory_allowed:
            net["memory"] = None  # Release 22 drops it from reward signals' networks (with a warning)
        else:
            net["memory"] = check(path, f"{where}.memory", net["memory"], declared_as(MEMORY, declared, MEMORY),
                                  "memory", coerce)
    return net


def _network_keys(cls: Any) -> List[str]:
    """The ``network_settings`` keys a signal's class declares (under its own names, ``SIGNAL_NETWORK``)."""
    return [SIGNAL_NETWORK[k] for k in cls.parameters if k in SIGNAL_NETWORK]


def _yaml(value: Any) -> str:
    """A value as the YAML file would spell it (null, false, 'constant')."""
    return {None: "null", False: "false", True: "true"}.get(value, repr(value)) if not isinstance(value, (int, float)) \
        or isinstance(value, bool) else repr(value)


def _refuse_not_built(path: str, key: str, where: str, value: Any) -> None:
    if key in NOT_BUILT and value != HARMLESS[key]:
        shown = "a block" if isinstance(value, dict) else repr(value)
        raise RunConfigError(f"{path}: {where}: {shown} asks for {NOT_BUILT[key]}, which this project does not "
                             f"build. Remove the key (or set it to {_yaml(HARMLESS[key])}).")
