"""Release 22's run: the run config read, the command line merged over it, its settings tree built
once, and the results folder's rules (``unityagents-learn``'s loading, beside ``learn.py``'s
``runner.settings.trainer_config.load_trainer_config``).

Command line beats the file, the file beats Release 22's defaults: ``merge_command_line`` writes
every option the user typed over the file before ``runner.settings.run_config.resolve`` checks it.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import random
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import yaml

from runner.checkpoints import resolve_init_path
from runner.settings.environment_parameters import EnvironmentParameters, parse_environment_parameters
from runner.settings.run_config import RunConfig, RunConfigError, resolve
from runner.settings.trainer_config import BrainSettings, StrictLoader, TrainerConfig, _DuplicateKeyError
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import former_names, team_base

logger = logging.getLogger("unityagents")

#: Command-line option -> (section, key) of the run config.
FLAGS: Dict[str, Tuple[str, str]] = {
    "--env": ("env_settings", "env_path"), "--seed": ("env_settings", "seed"),
    "--base-port": ("env_settings", "base_port"), "--num-envs": ("env_settings", "num_envs"),
    "--num-areas": ("env_settings", "num_areas"), "--timeout-wait": ("env_settings", "timeout_wait"),
    "--max-lifetime-restarts": ("env_settings", "max_lifetime_restarts"),
    "--restarts-rate-limit-n": ("env_settings", "restarts_rate_limit_n"),
    "--restarts-rate-limit-period-s": ("env_settings", "restarts_rate_limit_period_s"),
    "--run-id": ("checkpoint_settings", "run_id"), "--results-dir": ("checkpoint_settings", "results_dir"),
    "--resume": ("checkpoint_settings", "resume"), "--force": ("checkpoint_settings", "force"),
    "--initialize-from": ("checkpoint_settings", "initialize_from"),
    "--inference": ("checkpoint_settings", "inference"),
    "--width": ("engine_settings", "width"), "--height": ("engine_settings", "height"),
    "--quality-level": ("engine_settings", "quality_level"), "--time-scale": ("engine_settings", "time_scale"),
    "--target-frame-rate": ("engine_settings", "target_frame_rate"),
    "--capture-frame-rate": ("engine_settings", "capture_frame_rate"),
    "--no-graphics": ("engine_settings", "no_graphics"),
    "--no-graphics-monitor": ("engine_settings", "no_graphics_monitor"),
    "--torch-device": ("torch_settings", "device"),
}



@dataclass
class R22TrainerConfig(TrainerConfig):
    """The behaviours' settings of a run config, with Release 22's rules for the scene's behaviours:
    one the config does not list trains with ``default_settings``, or without them with Release 22's
    defaults (and a warning naming it); a listed one the scene lacks is a warning."""

    default_brain: Optional[BrainSettings] = None
    has_default_settings: bool = False

    def settings_for(self, brain_name: str) -> BrainSettings:
        if self.block_of(brain_name) is None and self.default_brain is not None:
            return dataclasses.replace(self.default_brain, brain_name=brain_name)
        return super().settings_for(brain_name)

    def settings_for_environment(self, brains, external_brain_names):
        bases = {team_base(b) for b in brains}
        known = bases | {old for b in bases for old in former_names(b)}
        for name in self.blocks:
            if name not in known and name not in brains:
                logger.warning("%s: behaviors.%s: the environment has no behaviour of that name (it has: %s); its "
                               "settings are unused.", self.path, name, ", ".join(sorted(bases)))
        warned = set()
        for name in external_brain_names:
            base = team_base(name)
            if self.block_of(name) is None and not self.has_default_settings and base not in warned:
                warned.add(base)
                logger.warning("%s: behaviors.%s: the environment has this behaviour but the config lists no "
                               "settings for it; it trains with Release 22's defaults (PPO). Add it under "
                               "behaviors: (or add default_settings:) to choose its settings.", self.path, base)
        return super().settings_for_environment(brains, external_brain_names)


def read_yaml(path: Optional[str]) -> Dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.load(f, Loader=StrictLoader)
    except FileNotFoundError:
        raise RunConfigError(f"{path}: the run config does not exist. Check the path.") from None
    except _DuplicateKeyError as e:
        raise RunConfigError(f"{path}: line {e.line}: {e.key!r} is given twice in one mapping (first on line "
                             f"{e.first_line}). Remove one.") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise RunConfigError(f"{path}: cannot be read as YAML: {str(e).splitlines()[0]}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RunConfigError(f"{path}: expected a mapping with behaviors: at the top, got a {type(raw).__name__}.")
    return raw


def merge_command_line(raw: Dict[str, Any], options: Dict[str, Any], env_args: Optional[List[str]]) -> Dict[str, Any]:
    """The file with every option the user typed written over it (Release 22's precedence)."""
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    for flag, (section, key) in FLAGS.items():
        value = options.get(flag)
        if value is None or value is False:
            continue
        block = merged.get(section)
        merged[section] = dict(block) if isinstance(block, dict) else {}
        merged[section][key] = value
    if env_args is not None:
        merged.setdefault("env_settings", {})
        merged["env_settings"] = dict(merged["env_settings"] or {}, env_args=env_args)
    if options.get("--debug"):
        merged["debug"] = True
    if options.get("--deterministic"):
        set_deterministic(merged)
    return merged


def set_deterministic(merged: Dict[str, Any]) -> None:
    """``--deterministic``: ``network_settings.deterministic: true`` for every behaviour the file
    lists and for ``default_settings`` (so behaviours it does not list act the same way); a block
    that is not a mapping is left for the config's checks to name."""
    blocks: List[Dict[str, Any]] = []
    behaviors = merged.get("behaviors")
    if isinstance(behaviors, dict):
        merged["behaviors"] = {name: (dict(block or {}) if block is None or isinstance(block, dict) else block)
                               for name, block in behaviors.items()}
        blocks = [b for b in merged["behaviors"].values() if isinstance(b, dict)]
    default = merged.get("default_settings")
    if default is None and not blocks:
        default = {}
    if isinstance(default, dict):
        merged["default_settings"] = default = dict(default)
        blocks.append(default)
    for block in blocks:
        network = block.get("network_settings")
        if network is None or isinstance(network, dict):
            block["network_settings"] = dict(network or {}, deterministic=True)


def load(config_path: Optional[str], options: Dict[str, Any], env_args: Optional[List[str]], registry):
    """``(RunConfig, R22TrainerConfig, EnvironmentParameters, run seed, the env and engine keys given)`` for
    the file and the options (``FLAGS``); raises ``RunConfigError`` naming the key path and the fix."""
    raw = merge_command_line(read_yaml(config_path), options, env_args)
    where = config_path or "<command line>"
    run = resolve(where, raw, registry)
    if run.sections["debug"]:
        logging.getLogger().setLevel(logging.DEBUG)
    given = {s: set(raw.get(s) or ()) for s in ("env_settings", "engine_settings") if isinstance(raw.get(s), dict)}
    if not run.behaviors and run.default_settings is None and config_path is not None:
        raise RunConfigError(f"{where}: behaviors: missing or empty. List each behaviour of the build under "
                             "behaviors: (or give default_settings:).")
    if not run.sections["checkpoint_settings"]["resume"]:  # --resume continues the run's own weights
        for name, behavior in run.behaviors.items():
            if behavior.settings.get("init_path"):
                try:
                    resolve_init_path(behavior.settings["init_path"], f"{where}: behaviors.{name}.init_path")
                except UnityTrainerException as e:
                    raise RunConfigError(str(e)) from None
    r22 = R22TrainerConfig(where, {}, registry, {name: b.brain for name, b in run.behaviors.items()},
                           default_brain=run.default_brain,
                           has_default_settings=run.default_settings is not None or config_path is None)
    seed = run.sections["env_settings"]["seed"]
    run_seed = seed if seed != -1 else random.randrange(10000)
    params = EnvironmentParameters(parse_environment_parameters(where, run.sections["environment_parameters"]),
                                   seed=run_seed)
    return run, r22, params, run_seed, given


def resolved_yaml(run: RunConfig, params: EnvironmentParameters) -> str:
    data = run.as_dict()
    data["environment_parameters"] = params.as_dict() or None
    return yaml.safe_dump(data, sort_keys=False)


def check_results_folder(run: RunConfig, create: bool = True) -> Tuple[str, Optional[str]]:
    """``(run folder, init checkpoint folder)``; Release 22's rules for --resume, --force, --initialize-from.

    With ``create`` the run folder is made and written to once (so an unwritable one fails now);
    without (``--dry-run``) only the nearest existing parent is checked for write access.
    """
    cp = run.sections["checkpoint_settings"]
    results, run_id = cp["results_dir"], cp["run_id"]
    if not run_id or os.path.isabs(run_id) or ".." in run_id.replace("\\", "/").split("/"):
        raise RunConfigError(f"checkpoint_settings.run_id: {run_id!r} must name a folder inside {results} (no "
                             "absolute path, no '..'). Pick another --run-id.")
    folder = os.path.join(results, run_id)
    if cp["resume"] and cp["force"]:
        raise RunConfigError("--resume and --force contradict each other: --resume continues the run "
                             f"{run_id}, --force starts it over. Pass one of them.")
    if cp["resume"]:
        if not os.path.isdir(folder):
            raise RunConfigError(f"--resume: there is no run {folder} to resume. Check --run-id and --results-dir, "
                                 "or drop --resume.")
    elif os.path.isdir(folder) and not cp["force"] and not cp["inference"]:
        raise RunConfigError(f"The run {folder} already has data. Use another --run-id, or --resume to continue it, "
                             "or --force to overwrite it.")
    init = None
    if cp["initialize_from"]:
        init = os.path.join(results, cp["initialize_from"], "checkpoints")
        if not os.path.isdir(init):
            raise RunConfigError(f"--initialize-from: {init} does not exist; name a run of {results} that saved a "
                                 "checkpoint.")
    if not create:
        parent = folder
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent or ".") or not os.access(parent or ".", os.W_OK):
            raise RunConfigError(f"checkpoint_settings.results_dir: cannot write in {parent or '.'}. Pick a writable "
                                 "--results-dir.")
        return folder, init
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise RunConfigError(f"checkpoint_settings.results_dir: cannot write in {folder} ({e.strerror}). Pick a "
                             "writable --results-dir.") from None
    return folder, init
