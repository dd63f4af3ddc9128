"""ML-Agents Release 22's run config (``behaviors:``, ``hyperparameters:``, ``network_settings:`` ...).

``load_run_config`` reads such a file, checks it against the Release 22 schema (every key, type
and value), fills Release 22's defaults, and translates each behaviour into the flat per-brain
block that ``trainer_configurations.yaml`` would hold. That block then goes through the same
validation as ``learn.py``'s file (``trainers.settings.trainer_config.trainer_config_from_dict``), so both front
ends build the same trainers from the same settings.

Three kinds of key are told apart, and none is silently dropped:

* a key of the schema that this project implements: translated;
* a key of the schema that it does not implement (``init_path``, a ``memory`` for a trainer without one,
  a trainer type that is not registered, ...): an error naming the key path and the feature that is missing,
  unless its value is the one that changes nothing (``threaded: false``);
* any other key: an error with a did-you-mean.

The precedence of the command line over the file is applied by the caller (``trainers.learn_r22``)
before ``resolve`` runs: ``resolve`` gets the merged dict.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from trainers.ghost.self_play import validate_self_play
from trainers.trainer.base import TrainerConfigError, did_you_mean


class RunConfigError(TrainerConfigError):
    """A Release 22 run config that cannot be used; the message names the file, the key path and the fix."""


#: A value of ``(kind, default)``; kinds: int, float, bool, str, "str?" (a string or null), "int?".
Spec = Dict[str, Tuple[Any, Any]]

HYPERPARAMETERS: Dict[str, Spec] = {
    "ppo": {"batch_size": (int, 1024), "buffer_size": (int, 10240), "learning_rate": (float, 3.0e-4),
            "learning_rate_schedule": (str, "linear"), "beta": (float, 5.0e-3), "beta_schedule": ("str?", None),
            "epsilon": (float, 0.2), "epsilon_schedule": ("str?", None), "lambd": (float, 0.95),
            "num_epoch": (int, 3), "shared_critic": (bool, False)},
    "sac": {"batch_size": (int, 128), "buffer_size": (int, 50000), "learning_rate": (float, 3.0e-4),
            "learning_rate_schedule": (str, "constant"), "buffer_init_steps": (int, 0), "tau": (float, 0.005),
            "steps_per_update": (float, 1.0), "save_replay_buffer": (bool, False), "init_entcoef": (float, 1.0),
            "reward_signal_steps_per_update": ("float?", None)},
    "poca": {"batch_size": (int, 1024), "buffer_size": (int, 10240), "learning_rate": (float, 3.0e-4),
             "learning_rate_schedule": (str, "linear"), "beta": (float, 5.0e-3), "beta_schedule": ("str?", None),
             "epsilon": (float, 0.2), "epsilon_schedule": ("str?", None), "lambd": (float, 0.95),
             "num_epoch": (int, 3)},
}
NETWORK: Spec = {"normalize": (bool, False), "hidden_units": (int, 128), "num_layers": (int, 2),
                 "vis_encode_type": (str, "simple"), "memory": ("dict?", None),
                 "goal_conditioning_type": (str, "hyper"), "deterministic": (bool, False)}
MEMORY: Spec = {"sequence_length": (int, 64), "memory_size": (int, 128)}
SIGNALS: Dict[str, Spec] = {
    "extrinsic": {"gamma": (float, 0.99), "strength": (float, 1.0), "network_settings": ("dict?", None)},
    "curiosity": {"gamma": (float, 0.99), "strength": (float, 1.0), "learning_rate": (float, 3.0e-4),
                  "encoding_size": ("int?", None), "network_settings": ("dict?", None)},
    "rnd": {"gamma": (float, 0.99), "strength": (float, 1.0), "learning_rate": (float, 1.0e-4),
            "encoding_size": ("int?", None), "network_settings": ("dict?", None)},
    "gail": {"gamma": (float, 0.99), "strength": (float, 1.0), "learning_rate": (float, 3.0e-4),
             "demo_path": (str, None), "use_actions": (bool, False), "use_vail": (bool, False),
             "encoding_size": ("int?", None), "network_settings": ("dict?", None)},
}
SELF_PLAY: Spec = {"save_steps": (int, 20000), "team_change": ("int?", None), "swap_steps": (int, 2000),
                   "window": (int, 10), "play_against_latest_model_ratio": (float, 0.5), "initial_elo": (float, 1200.0)}
BEHAVIORAL_CLONING: Spec = {"demo_path": (str, None), "steps": (int, 0), "strength": (float, 1.0),
                            "samples_per_update": (int, 0), "num_epoch": ("int?", None), "batch_size": ("int?", None)}
TRAINER: Spec = {"trainer_type": (str, "ppo"), "hyperparameters": ("dict?", None), "network_settings": ("dict?", None),
                 "reward_signals": ("dict?", None), "init_path": ("str?", None), "keep_checkpoints": (int, 5),
                 "even_checkpoints": (bool, False), "checkpoint_interval": (int, 500000), "max_steps": (int, 500000),
                 "time_horizon": (int, 64), "summary_freq": (int, 50000), "threaded": (bool, False),
                 "self_play": ("dict?", None), "behavioral_cloning": ("dict?", None)}
ENV_SETTINGS: Spec = {"env_path": ("str?", None), "env_args": ("list?", None), "base_port": (int, 5005),
                      "num_envs": (int, 1), "num_areas": (int, 1), "timeout_wait": (int, 60), "seed": (int, -1),
                      "max_lifetime_restarts": (int, 10), "restarts_rate_limit_n": (int, 1),
                      "restarts_rate_limit_period_s": (int, 60)}
ENGINE_SETTINGS: Spec = {"width": (int, 84), "height": (int, 84), "quality_level": (int, 5), "time_scale": (float, 20),
                         "target_frame_rate": (int, -1), "capture_frame_rate": (int, 60), "no_graphics": (bool, False),
                         "no_graphics_monitor": (bool, False)}
CHECKPOINT_SETTINGS: Spec = {"run_id": (str, "ppo"), "initialize_from": ("str?", None), "load_model": (bool, False),
                             "resume": (bool, False), "force": (bool, False), "train_model": (bool, False),
                             "inference": (bool, False), "results_dir": (str, "results")}
TORCH_SETTINGS: Spec = {"device": ("str?", None)}
TOP: Spec = {"default_settings": ("dict?", None), "behaviors": ("dict?", None), "env_settings": ("dict?", None),
             "engine_settings": ("dict?", None), "environment_parameters": ("dict?", None),
             "checkpoint_settings": ("dict?", None), "torch_settings": ("dict?", None), "debug": (bool, False)}

#: Values of schema keys that this project does not build, and what is missing. A key given with
#: any other value than its harmless one is an error with this text.
NOT_BUILT = {
    "network_settings.deterministic": "deterministic (mean/argmax) actions",
    "hyperparameters.shared_critic": "a critic shared with the policy",
    "init_path": "per-behaviour initialization (use --initialize-from for the whole run)",
    "env_settings.num_areas": "several training areas per instance",
    "engine_settings.no_graphics_monitor": "graphics on worker 0 only",
    "checkpoint_settings.load_model": "--load (deprecated in Release 22: use --resume)",
}
#: The value of each NOT_BUILT key that asks for nothing missing.
HARMLESS = {"network_settings.deterministic": False,
"hyperparameters.shared_critic": False,
            "init_path": None,
            "env_settings.num_areas": 1, "engine_settings.no_graphics_monitor": False,
            "checkpoint_settings.load_model": False}
#: network_settings keys that a reward signal takes beyond hidden_units and num_layers.
SIGNAL_NETWORK_KEYS = {"gail": ("normalize",)}
VIS_ENCODE_TYPES = ("simple", "nature_cnn", "resnet", "match3", "fully_connected")
SCHEDULES = ("linear", "constant")


def _kind_name(kind: Any) -> str:
    base = kind[:-1] if isinstance(kind, str) and kind.endswith("?") else kind
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string", "dict": "a mapping",
             "list": "a list", "int": "an integer", "float": "a number", "str": "a string"}
    text = names.get(base, str(base))
    return text + " or null" if isinstance(kind, str) and kind.endswith("?") else text


def coerce_value(where: str, value: Any, kind: Any) -> Any:
    """``value`` as ``kind``; Release 22 reads ints as ``int(float(v))`` (``5.0e5``, ``"5e5"``)."""
    if kind == "any":
        return value
    optional = isinstance(kind, str) and kind.endswith("?")
    base = {"int": int, "float": float, "str": str}.get(kind[:-1], kind[:-1]) if optional else kind
    if value is None and optional:
        return None
    if base in (int, float) and not isinstance(value, bool):
        try:
            number = float(value) if isinstance(value, (int, float, str)) else None
        except ValueError:
            number = None
        if number is not None and math.isfinite(number):
            if base is float:
                return number
            if float(number).is_integer():
                return int(number)
    elif base is bool and isinstance(value, bool):
        return value
    elif base is str and isinstance(value, str):
        return value
    elif base == "dict" and isinstance(value, dict):
        return value
    elif base == "list" and isinstance(value, (list, str)):
        return value.split() if isinstance(value, str) else [str(v) for v in value]
    raise RunConfigError(f"{where}: expected {_kind_name(kind)}, got {value!r} ({type(value).__name__}). "
                         "Give a value of that type.")


def check_block(path: str, where: str, block: Any, spec: Spec, what: str) -> Dict[str, Any]:
    """Every key of ``block`` known to ``spec`` and of its type; the defaults of the rest filled in."""
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise RunConfigError(f"{path}: {where}: expected a mapping of key: value ({what}), got {block!r}.")
    for key in block:
        if key not in spec:
            raise RunConfigError(
                f"{path}: {_join(where, key)}: unknown key of {what}.{did_you_mean(key, spec)} "
                f"Its keys: {', '.join(spec)}.")
    return {key: coerce_value(f"{path}: {_join(where, key)}", block[key], kind) if key in block else
            copy.deepcopy(default) for key, (kind, default) in spec.items()}


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


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


def resolve(path: str, raw: Any, registered: Tuple[str, ...]) -> RunConfig:
    """Check the merged dict (file plus command line) and translate it; raise ``RunConfigError``.

    :param registered: the trainer types of the registry; ``trainer_type`` must be one of them.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RunConfigError(f"{path}: expected a mapping with 'behaviors:' at the top, got a {type(raw).__name__}.")
    top = check_block(path, "", raw, TOP, "the run config (Release 22 RunOptions)")
    sections = {
        "env_settings": check_block(path, "env_settings", top["env_settings"], ENV_SETTINGS, "env_settings"),
        "engine_settings": check_block(path, "engine_settings", top["engine_settings"], ENGINE_SETTINGS,
                                       "engine_settings"),
        "environment_parameters": top["environment_parameters"],
        "checkpoint_settings": check_block(path, "checkpoint_settings", top["checkpoint_settings"],
                                           CHECKPOINT_SETTINGS, "checkpoint_settings"),
        "torch_settings": check_block(path, "torch_settings", top["torch_settings"], TORCH_SETTINGS,
                                      "torch_settings"),
        "debug": top["debug"],
    }
    for section in ("env_settings", "engine_settings", "checkpoint_settings"):
        for key, value in sections[section].items():
            _refuse_not_built(path, f"{section}.{key}", f"{section}.{key}", value)
    config = RunConfig(path, sections)
    default = top["default_settings"]
    if default is not None:
        config.default_settings = _trainer_settings(path, "default_settings", default, registered, config.warnings)
        config.default_block = translate(path, "default_settings", config.default_settings)
    elif not raw.get("behaviors"):  # no file: every behaviour trains with Release 22's defaults
        config.default_block = translate(path, "default_settings",
                                         _trainer_settings(path, "default_settings", {}, registered, config.warnings))
    behaviors = top["behaviors"] or {}
    for name, block in behaviors.items():
        where = f"behaviors.{name}"
        if block is not None and not isinstance(block, dict):
            raise RunConfigError(f"{path}: {where}: expected a mapping of trainer settings, got {block!r}.")
        merged = deep_update(default, block or {}) if default is not None else (block or {})
        settings = _trainer_settings(path, where, merged, registered, config.warnings)
        config.behaviors[str(name)] = Behavior(str(name), settings, translate(path, where, settings))
    return config


def _trainer_settings(path: str, where: str, block: Dict[str, Any], registered: Tuple[str, ...],
                      warnings: List[str]) -> Dict[str, Any]:
    """One TrainerSettings block, checked, with Release 22's defaults."""
    settings = check_block(path, where, block, TRAINER, "a behaviour's trainer settings")
    trainer_type = settings["trainer_type"]
    if trainer_type not in HYPERPARAMETERS and trainer_type not in registered:
        raise RunConfigError(
            f"{path}: {where}.trainer_type: {trainer_type!r} is not a Release 22 trainer type (ppo, sac, poca) nor a "
            f"registered one ({', '.join(registered)}).{did_you_mean(trainer_type, list(HYPERPARAMETERS))}")
    if trainer_type not in registered:
        raise RunConfigError(
            f"{path}: {where}.trainer_type: {trainer_type!r} is a Release 22 trainer type that this project has "
            f"not built (registered trainer types: {', '.join(registered)}). Use trainer_type: ppo, or install a "
            "trainer plugin that registers it.")
    hp_spec = HYPERPARAMETERS.get(trainer_type)
    if hp_spec is None:
        raise RunConfigError(
            f"{path}: {where}.trainer_type: the registered trainer {trainer_type!r} has no Release 22 hyperparameters "
            "to translate; configure it in learn.py's trainer_configurations.yaml.")
    hp = check_block(path, f"{where}.hyperparameters", settings["hyperparameters"], hp_spec,
                     f"{trainer_type} hyperparameters")
    for key in ("beta_schedule", "epsilon_schedule"):
        if key in hp and hp[key] is None:
            hp[key] = hp["learning_rate_schedule"]  # as Release 22: an omitted one follows the learning rate's
    for key in [k for k in hp if k.endswith("schedule")]:
        if hp[key] not in SCHEDULES:
            raise RunConfigError(f"{path}: {where}.hyperparameters.{key}: expected one of {', '.join(SCHEDULES)}, "
                                 f"got {hp[key]!r}.{did_you_mean(hp[key], SCHEDULES)}")
    if trainer_type == "sac" and hp["reward_signal_steps_per_update"] is None:
        hp["reward_signal_steps_per_update"] = hp["steps_per_update"]
    settings["hyperparameters"] = hp
    settings["network_settings"] = _network(path, f"{where}.network_settings", settings["network_settings"])
    signals = settings["reward_signals"]
    if signals is None:
        signals = {"extrinsic": {}}
    if not isinstance(signals, dict) or not signals:
        raise RunConfigError(f"{path}: {where}.reward_signals: expected a mapping of signal: settings (extrinsic, "
                             f"curiosity, rnd, gail), got {signals!r}.")
    resolved = {}
    for name, block in signals.items():
        if name not in SIGNALS:
            raise RunConfigError(f"{path}: {where}.reward_signals.{name}: unknown reward signal."
                                 f"{did_you_mean(name, SIGNALS)} Signals: {', '.join(SIGNALS)}.")
        sig = check_block(path, f"{where}.reward_signals.{name}", block, SIGNALS[name], f"the {name} signal")
        if name == "gail" and sig["demo_path"] is None:
            raise RunConfigError(f"{path}: {where}.reward_signals.gail.demo_path: required. Name a .demo file.")
        sig["network_settings"] = _network(path, f"{where}.reward_signals.{name}.network_settings",
                                           sig["network_settings"], memory_allowed=False)
        for key, value in ((block or {}).get("network_settings") or {}).items():
            if key not in ("hidden_units", "num_layers", "memory", *SIGNAL_NETWORK_KEYS.get(name, ())) \
                    and value != NETWORK[key][1]:
                raise RunConfigError(
                    f"{path}: {where}.reward_signals.{name}.network_settings.{key}: {value!r} asks for a configurable "
                    f"{name} network, which this project does not build (its inputs are fixed; hidden_units "
                    f"sets its width and num_layers its depth). Remove the key (or set it to "
                    f"{_yaml(NETWORK[key][1])}).")
        if sig.get("encoding_size") is not None and block and "network_settings" not in block:
            sig["network_settings"]["hidden_units"] = sig["encoding_size"]  # Release 22's deprecated alias
        resolved[name] = sig
    settings["reward_signals"] = resolved
    if settings["self_play"] is not None:
        block = check_block(path, f"{where}.self_play", settings["self_play"], SELF_PLAY, "self_play")
        try:  # the checks learn.py's flat self_play block gets too, named by this file's key path
            settings["self_play"] = validate_self_play(
                block, lambda key: f"{path}: {where}.self_play" + (f".{key}" if key else ""))
        except TrainerConfigError as e:
            raise RunConfigError(str(e)) from None
    if settings["behavioral_cloning"] is not None:
        bc = check_block(path, f"{where}.behavioral_cloning", settings["behavioral_cloning"], BEHAVIORAL_CLONING,
                         "behavioral_cloning")
        if bc["demo_path"] is None:
            raise RunConfigError(f"{path}: {where}.behavioral_cloning.demo_path: required. Name a .demo file.")
        settings["behavioral_cloning"] = bc
    if settings["threaded"]:
        warnings.append(f"{path}: {where}.threaded: true; this trainer updates in the main loop between steps, "
                        "which learns the same (without a thread's one-update policy lag).")
    if settings["even_checkpoints"]:
        settings["checkpoint_interval"] = int(settings["max_steps"] / max(settings["keep_checkpoints"], 1))
    for key in ("max_steps", "time_horizon", "summary_freq", "checkpoint_interval"):
        if settings[key] <= 0:
            raise RunConfigError(f"{path}: {where}.{key}: must be > 0, got {settings[key]}.")
    return settings


def _network(path: str, where: str, block: Any, memory_allowed: bool = True) -> Dict[str, Any]:
    net = check_block(path, where, block, NETWORK, "network_settings")
    if net["vis_encode_type"] not in VIS_ENCODE_TYPES:
        raise RunConfigError(f"{path}: {where}.vis_encode_type: expected one of {', '.join(VIS_ENCODE_TYPES)}, got "
                             f"{net['vis_encode_type']!r}.{did_you_mean(net['vis_encode_type'], VIS_ENCODE_TYPES)}")
    if net["goal_conditioning_type"] not in ("hyper", "none"):
        raise RunConfigError(f"{path}: {where}.goal_conditioning_type: expected hyper or none, got "
                             f"{net['goal_conditioning_type']!r}.")
    if net["memory"] is not None:
        if not memory_allowed:
            net["memory"] = None  # Release 22 drops it from reward signals' networks (with a warning)
        else:
            net["memory"] = check_block(path, f"{where}.memory", net["memory"], MEMORY, "memory")
    return net


def _yaml(value: Any) -> str:
    """A value as the YAML file would spell it (null, false, 'constant')."""
    return {None: "null", False: "false", True: "true"}.get(value, repr(value)) if not isinstance(value, (int, float)) \
        or isinstance(value, bool) else repr(value)


def _refuse_not_built(path: str, key: str, where: str, value: Any) -> None:
    if key in NOT_BUILT and value != HARMLESS[key]:
        shown = "a block" if isinstance(value, dict) else repr(value)
        raise RunConfigError(f"{path}: {where}: {shown} asks for {NOT_BUILT[key]}, which this project does not "
                             f"build. Remove the key (or set it to {_yaml(HARMLESS[key])}).")


def translate(path: str, where: str, s: Dict[str, Any]) -> Dict[str, Any]:
    """The flat block of ``trainer_configurations.yaml`` that trains like these Release 22 settings."""
    _refuse_not_built(path, "init_path", f"{where}.init_path", s["init_path"])
    if s["self_play"] is not None and s["trainer_type"] not in ("ppo", "poca"):
        raise RunConfigError(f"{path}: {where}.self_play: team self-play is built for trainer_type: ppo or poca, "
                             f"not {s['trainer_type']!r}. Use one of them for this behaviour, or remove self_play.")
    net, hp = s["network_settings"], s["hyperparameters"]
    memory = net["memory"]
    if memory is not None and s["trainer_type"] not in ("ppo", "sac"):
        raise RunConfigError(f"{path}: {where}.network_settings.memory: the {s['trainer_type']} trainer has no "
                             "recurrent policy here, so it cannot keep a memory. Remove the memory block, or use "
                             "trainer_type: ppo.")
    _refuse_not_built(path, "network_settings.deterministic", f"{where}.network_settings.deterministic",
                      net["deterministic"])
    for key in ("shared_critic",):
        if key in hp:
            _refuse_not_built(path, f"hyperparameters.{key}", f"{where}.hyperparameters.{key}", hp[key])
    if s["trainer_type"] != "ppo":
        # A registered trainer under a Release 22 name (sac, poca): the Release 22 keys as they are;
        # the trainer's own declaration (trainers.settings.trainer_config) refuses any it does not take, by name.
        block = {"trainer": s["trainer_type"], **{k: v for k, v in hp.items() if v is not None}}
        block.update(max_steps=float(s["max_steps"]), summary_freq=s["summary_freq"], time_horizon=s["time_horizon"],
                     hidden_units=net["hidden_units"], num_layers=net["num_layers"], normalize=net["normalize"])
        if memory is not None:  # sac: an LSTM in actor and critics, trained on sequences from the replay
            block.update(use_recurrent=True, memory_size=memory["memory_size"],
                         sequence_length=memory["sequence_length"])
    else:
        block = {"trainer": "ppo", "batch_size": hp["batch_size"], "buffer_size": hp["buffer_size"],
                 "learning_rate": hp["learning_rate"], "learning_rate_schedule": hp["learning_rate_schedule"],
                 "beta": hp["beta"], "epsilon": hp["epsilon"], "lambd": hp["lambd"], "num_epoch": hp["num_epoch"],
                 "beta_schedule": hp["beta_schedule"], "epsilon_schedule": hp["epsilon_schedule"],
                 "normalize": net["normalize"], "hidden_units": net["hidden_units"], "num_layers": net["num_layers"],
                 "max_steps": float(s["max_steps"]), "time_horizon": s["time_horizon"],
                 "summary_freq": s["summary_freq"]}
        if memory is not None:  # an LSTM of memory_size floats per agent, trained on sequence_length steps
            block.update(use_recurrent=True, memory_size=memory["memory_size"],
                         sequence_length=memory["sequence_length"])
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
        entry = {"strength": sig["strength"], "gamma": sig["gamma"]}
        if name in ("curiosity", "rnd", "gail"):
            entry["learning_rate"] = sig["learning_rate"]
            entry["encoding_size"] = sig["network_settings"]["hidden_units"]
            entry["num_layers"] = sig["network_settings"]["num_layers"]
        for key in SIGNAL_NETWORK_KEYS.get(name, ()):
            entry[key] = sig["network_settings"][key]
        if name == "gail":
            entry.update(demo_path=sig["demo_path"], use_actions=sig["use_actions"], use_vail=sig["use_vail"])
        out[name] = entry
    block["reward_signals"] = out
    return block
