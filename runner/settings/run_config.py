"""ML-Agents Release 22's run config (``behaviors:``, ``hyperparameters:``, ``network_settings:`` ...).

``load_run_config`` reads such a file, checks it against the Release 22 schema (every key, type
and value), fills Release 22's defaults, and translates each behaviour into the flat per-brain
block that ``trainer_configurations.yaml`` would hold. That block then goes through the same
validation as ``learn.py``'s file (``runner.settings.trainer_config.trainer_config_from_dict``), so both front
ends build the same trainers from the same settings.

Three kinds of key are told apart, and none is silently dropped:

* a key of the schema that this project implements: translated;
* a key of the schema that it does not implement (a ``memory`` for a trainer without one,
  a trainer type that is not registered, ...): an error naming the key path and the feature that is missing,
  unless its value is the one that changes nothing;
* any other key: an error with a did-you-mean.

The precedence of the command line over the file is applied by the caller (``learn_r22``, the
``unityagents-learn`` front end) before ``resolve`` runs: ``resolve`` gets the merged dict.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional

from trainers.ghost.self_play import validate_self_play
from trainers.imitation.bc import BC_PARAMETERS
from trainers.reward_signals import SIGNALS
from trainers.settings.schema import Param, TrainerConfigError, check_block, did_you_mean, key_path, positive


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
    for key, default in getattr(cls, "release22_defaults", {}).items():
        schema[key] = replace(schema[key], default=default)
    schema.update(NOT_BUILT_HYPERPARAMETERS.get(trainer_type, {}))
    return schema


NETWORK: Schema = {"normalize": Param(bool, False), "hidden_units": Param(int, 128), "num_layers": Param(int, 2),
                   "vis_encode_type": Param(str, "simple", choices=VIS_ENCODE_TYPES), "memory": Param(dict),
                   "goal_conditioning_type": Param(str, "hyper", choices=("hyper", "none")),
                   "deterministic": Param(bool, False)}
MEMORY: Schema = {"sequence_length": Param(int, 64), "memory_size": Param(int, 128)}
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


def check(path: str, where: str, block: Any, schema: Schema, what: str) -> Dict[str, Any]:
    """``check_block`` of one block of the run config, named by its key path (``behaviors.X.self_play``)."""
    return check_block(key_path(path, where), block, schema, what, error=RunConfigError)


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
    """One resolved behaviour: its Release 22 settings and the flat block the trainers get."""

    name: str
    settings: Dict[str, Any]
    block: Dict[str, Any]


@dataclass
class RunConfig:
    """A checked Release 22 run config with every default filled in (``as_dict`` is configuration.yaml)."""

    path: str
    sections: Dict[str, Any]
    behaviors: Dict[str, Behavior] = field(default_factory=dict)
    default_settings: Optional[Dict[str, Any]] = None
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"default_settings": self.default_settings,
                               "behaviors": {n: b.settings for n, b in self.behaviors.items()}}
        out.update(self.sections)
        return out

    def flat_config(self) -> Dict[str, Any]:
        """What ``trainer_configurations.yaml`` would hold for this run."""
        flat: Dict[str, Any] = {"default": self.default_block or {}}
        flat.update({name: b.block for name, b in self.behaviors.items()})
        return flat

    default_block: Optional[Dict[str, Any]] = None


def resolve(path: str, raw: Any, registered: Any = None) -> RunConfig:
    """Check the merged dict (file plus command line) and translate it; raise ``RunConfigError``.

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
    if default is not None:
        config.default_settings = _trainer_settings(path, "default_settings", default, registered, config.warnings)
        config.default_block = translate(path, "default_settings", config.default_settings, registered)
    else:  # a behaviour the config does not list trains with Release 22's defaults
        config.default_block = translate(path, "default_settings",
                                         _trainer_settings(path, "default_settings", {}, registered, config.warnings),
                                         registered)
    behaviors = top["behaviors"] or {}
    for name, block in behaviors.items():
        where = f"behaviors.{name}"
        if block is not None and not isinstance(block, dict):
            raise RunConfigError(f"{path}: {where}: expected a mapping of trainer settings, got {block!r}.")
        merged = deep_update(default, block or {}) if default is not None else (block or {})
        settings = _trainer_settings(path, where, merged, registered, config.warnings)
        config.behaviors[str(name)] = Behavior(str(name), settings, translate(path, where, settings, registered))
    return config


def _trainer_settings(path: str, where: str, block: Dict[str, Any], registry: Any,
                      warnings: List[str]) -> Dict[str, Any]:
    """One TrainerSettings block, checked, with Release 22's defaults."""
    settings = check(path, where, block, TRAINER, "a behaviour's trainer settings")
    trainer_type = settings["trainer_type"]
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
    hp_spec = hyperparameters_schema(trainer_type, registry.get(trainer_type))
    hp = check(path, f"{where}.hyperparameters", settings["hyperparameters"], hp_spec,
                     f"{trainer_type} hyperparameters")
    for key in ("beta_schedule", "epsilon_schedule"):
        if key in hp and hp[key] is None:
            hp[key] = hp["learning_rate_schedule"]  # as Release 22: an omitted one follows the learning rate's
    if hp.get("steps_per_update") is not None and "reward_signal_steps_per_update" in hp \
            and hp["reward_signal_steps_per_update"] is None:
        hp["reward_signal_steps_per_update"] = hp["steps_per_update"]
    settings["hyperparameters"] = hp
    settings["network_settings"] = _network(path, f"{where}.network_settings", settings["network_settings"])
    signals = settings["reward_signals"]
    if signals is None:
        signals = {"extrinsic": {}}
    signals = check_block(key_path(path, f"{where}.reward_signals"), signals, {n: Param(dict) for n in SIGNALS},
                          "reward_signals", unknown="reward signal", error=RunConfigError, partial=True)
    if not signals:
        raise RunConfigError(f"{path}: {where}.reward_signals: the block is empty; list at least one signal "
                             f"({', '.join(SIGNALS)}), or remove the key to train on the extrinsic reward.")
    resolved = {}
    for name, block in signals.items():
        cls = SIGNALS[name]
        sig = check(path, f"{where}.reward_signals.{name}", block, signal_schema(cls), f"the {name} signal")
        sig["network_settings"] = _network(path, f"{where}.reward_signals.{name}.network_settings",
                                           sig["network_settings"], memory_allowed=False)
        for key, value in ((block or {}).get("network_settings") or {}).items():
            if key not in ("hidden_units", "num_layers", "memory", *_network_keys(cls)) \
                    and value != NETWORK[key].default:
                raise RunConfigError(
                    f"{path}: {where}.reward_signals.{name}.network_settings.{key}: {value!r} asks for a configurable "
                    f"{name} network, which this project does not build (its inputs are fixed; hidden_units "
                    f"sets its width and num_layers its depth). Remove the key (or set it to "
                    f"{_yaml(NETWORK[key].default)}).")
        if sig.get("encoding_size") is not None and block and "network_settings" not in block:
            sig["network_settings"]["hidden_units"] = sig["encoding_size"]  # Release 22's deprecated alias
        resolved[name] = sig
    settings["reward_signals"] = resolved
    if settings["self_play"] is not None:
        try:  # learn.py's flat self_play block, named by this file's key path
            settings["self_play"] = validate_self_play(settings["self_play"], key_path(path, f"{where}.self_play"))
        except TrainerConfigError as e:
            raise RunConfigError(str(e)) from None
    if settings["behavioral_cloning"] is not None:
        settings["behavioral_cloning"] = check(path, f"{where}.behavioral_cloning", settings["behavioral_cloning"],
                                               BEHAVIORAL_CLONING, "behavioral_cloning")
    if settings["even_checkpoints"]:
        settings["checkpoint_interval"] = int(settings["max_steps"] / max(settings["keep_checkpoints"], 1))
    if settings["checkpoint_interval"] <= 0:
        raise RunConfigError(f"{path}: {where}.even_checkpoints: max_steps {settings['max_steps']} over "
                             f"keep_checkpoints {settings['keep_checkpoints']} leaves no step between checkpoints. "
                             "Lower keep_checkpoints.")
    return settings


def _network(path: str, where: str, block: Any, memory_allowed: bool = True) -> Dict[str, Any]:
    net = check(path, where, block, NETWORK, "network_settings")
    if net["memory"] is not None:
        if not memory_allowed:
            net["memory"] = None  # Release 22 drops it from reward signals' networks (with a warning)
        else:
            net["memory"] = check(path, f"{where}.memory", net["memory"], MEMORY, "memory")
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


def translate(path: str, where: str, s: Dict[str, Any], registry: Any = None) -> Dict[str, Any]:
    """The flat block of ``trainer_configurations.yaml`` that trains like these Release 22 settings.

    :param registry: the trainer registry; its class of ``trainer_type`` says which shared keys it takes.
    """
    net, hp = s["network_settings"], s["hyperparameters"]
    memory = net["memory"]
    if memory is not None and s["trainer_type"] not in ("ppo", "sac") and (
            s["trainer_type"] == "poca" or registry is None
            or "use_recurrent" not in registry.get(s["trainer_type"]).hyperparameters):
        raise RunConfigError(f"{path}: {where}.network_settings.memory: the {s['trainer_type']} trainer has no "
                             "recurrent policy here, so it cannot keep a memory. Remove the memory block, or use "
                             "trainer_type: ppo.")
    for key in NOT_BUILT_HYPERPARAMETERS.get(s["trainer_type"], {}):
        if key in hp:
            _refuse_not_built(path, f"hyperparameters.{key}", f"{where}.hyperparameters.{key}", hp[key])
    # The trainer's own keys as they are, then the shared ones it declares; a shared key that it does
    # not declare goes through only when set away from Release 22's default, for its loader to refuse by name.
    declared = registry.get(s["trainer_type"]).hyperparameters if registry is not None else {}
    not_built = NOT_BUILT_HYPERPARAMETERS.get(s["trainer_type"], {})
    block = {"trainer": s["trainer_type"], **{k: v for k, v in hp.items() if v is not None and k not in not_built}}
    shared = dict(max_steps=float(s["max_steps"]), summary_freq=s["summary_freq"], time_horizon=s["time_horizon"],
                  normalize=net["normalize"], hidden_units=net["hidden_units"], num_layers=net["num_layers"],
                  threaded=s["threaded"])
    defaults = {"max_steps": float(TRAINER["max_steps"].default), "summary_freq": TRAINER["summary_freq"].default,
                "time_horizon": TRAINER["time_horizon"].default, "threaded": False,
                **{k: NETWORK[k].default for k in ("normalize", "hidden_units", "num_layers")}}
    block.update({k: v for k, v in shared.items() if k in declared or registry is None or v != defaults[k]})
    if memory is not None:  # an LSTM of memory_size floats per agent, trained on sequence_length steps
        block.update(use_recurrent=True, memory_size=memory["memory_size"], sequence_length=memory["sequence_length"])
    if s["init_path"] is not None:  # resolved and checked before the environment starts (learn_r22)
        block["init_path"] = s["init_path"]
    if net["deterministic"]:  # mean / most probable actions (the trainer's declaration refuses it if it has none)
        block["deterministic"] = True
    if s["self_play"] is not None:  # the same keys, checked and completed
        block["self_play"] = dict(s["self_play"])
    if net["vis_encode_type"] != "simple":  # the trainer's declaration refuses it if it has no such key
        block["vis_encode_type"] = net["vis_encode_type"]
    if s["behavioral_cloning"] is not None:  # the same keys; None leaves the trainer's default
        block["behavioral_cloning"] = {k: v for k, v in s["behavioral_cloning"].items() if v is not None}
    signals = s["reward_signals"]
    extrinsic = signals.get("extrinsic")
    if list(signals) == ["extrinsic"] and extrinsic["strength"] == 1.0:
        block["gamma"] = extrinsic["gamma"]  # the plain extrinsic reward: learn.py's flat gamma
        return block
    out: Dict[str, Any] = {}
    for name, sig in signals.items():
        entry = {k: v for k, v in sig.items() if k not in ("network_settings", "encoding_size") and v is not None}
        for key in _network_keys(SIGNALS[name]):  # what the signal declares of its network, as it names it
            entry[next(k for k, v in SIGNAL_NETWORK.items() if v == key)] = sig["network_settings"][key]
        out[name] = entry
    block["reward_signals"] = out
    return block
