"""unityagents-learn: train with ML-Agents Release 22's command line, run config and results folder.

Usage:
  unityagents-learn [<trainer_config_path>] [options]
  unityagents-learn (-h | --help)

Arguments:
  <trainer_config_path>             A Release 22 run config (behaviors:, default_settings:, ...).

Options:
  -h --help                         Show this message.
  --env=<path>                      A Unity build, or a built-in scene (3DBall, Push, ...); without it,
                                    the Unity Editor: press Play when the trainer is listening.
  --run-id=<id>                     The run's folder under --results-dir (default ppo).
  --results-dir=<dir>               Where runs are written (default results).
  --resume                          Continue the run --run-id from its last checkpoint.
  --force                           Overwrite the run --run-id if it exists.
  --initialize-from=<run-id>        Start from that run's weights, with the step counters at 0.
  --inference                       Run the policy without training (until Ctrl-C).
  --seed=<n>                        Run seed; -1 picks one in [0, 10000).
  --base-port=<n>                   Port of environment 0; environment i uses base-port + i
                                    (the Editor's port: 5004).
  --num-envs=<n>                    Environments stepped at once.
  --num-areas=<n>                   Training areas per instance (asked for in the handshake).
  --timeout-wait=<s>                Seconds to wait for an environment.
  --max-lifetime-restarts=<n>       Restarts of each crashed environment over the run; -1: no limit.
  --restarts-rate-limit-n=<n>       Restarts allowed per period; -1: no limit.
  --restarts-rate-limit-period-s=<s>  The rate-limit period in seconds.
  --width=<n>                       Engine: window width.
  --height=<n>                      Engine: window height.
  --quality-level=<n>               Engine: quality level.
  --time-scale=<x>                  Engine: time scale.
  --target-frame-rate=<n>           Engine: target frame rate.
  --capture-frame-rate=<n>          Engine: capture frame rate.
  --no-graphics                     Engine: launch without rendering.
  --no-graphics-monitor             Engine: render on worker 0 only.
  --torch-device=<device>           Where the graph runs: cpu, cuda or cuda:N (TensorFlow placement).
  --debug                           Debug logging.
  --deterministic                   Act with the mean / most probable action (network_settings.deterministic).
  --strict-export                   Stop the run when an exported .onnx would not load cleanly in a Unity
                                    inference engine (by default each finding is a warning in the log).

--env-args ARGS...: everything after it goes to the environment's command line.
  --protocol=<p>                    grpc (Release 19 and later, the default) or api2 (2018 builds).
  --ray-address=<address>           Run each environment as a Ray actor (auto, local or host:port).
  --ray-resource=<name>             Place environment actors on nodes with this custom resource.
  --dry-run                         Check the config, print the resolved settings as YAML, launch nothing.

Command line beats the file, the file beats Release 22's defaults. Results: <results-dir>/<run-id>/
(configuration.yaml, run_logs/, <Behavior>/ with TensorBoard events and ONNX files, <Behavior>.onnx).
"""
from __future__ import annotations

import logging
import os
import random
import shlex
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import yaml
from docopt import docopt

from runner.checkpoints import resolve_init_path
from runner.devices import Placement
from runner.options import PROTOCOL, RunOptions, check_ports, protocol_options, shipped_file
from runner.run import run as start_run
from runner.run_paths import RunPaths
from runner.settings.environment_parameters import EnvironmentParameters, parse_environment_parameters
from runner.settings.run_config import RunConfig, RunConfigError, resolve
from runner.settings.trainer_config import StrictLoader, TrainerConfig, _DuplicateKeyError, trainer_config_from_dict
from trainers.settings.schema import coerce_value
from trainers.trainer.base import UnityTrainerException
from unityagents.brain import former_names, team_base
from unityagents.editor import EDITOR_PORT

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


#: The engine settings passed to the build only when the config or the command line gives them.
ENGINE_KEYS = ("width", "height", "quality_level", "target_frame_rate", "capture_frame_rate")


class R22TrainerConfig(TrainerConfig):
    """The translated config, with Release 22's rules for the scene's behaviours: one the config
    does not list trains with ``default_settings``, or without them with Release 22's defaults (and
    a warning naming it); a listed one the scene lacks is a warning."""

    has_default_settings: bool = False

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


def split_env_args(argv: List[str]) -> Tuple[List[str], Optional[List[str]]]:
    """Release 22's ``--env-args`` takes the rest of the command line."""
    for i, arg in enumerate(argv):
        if arg == "--env-args":
            return argv[:i], argv[i + 1:]
        if arg.startswith("--env-args="):
            return argv[:i], [arg.split("=", 1)[1]] + argv[i + 1:]
    return argv, None


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
    """``(RunConfig, R22TrainerConfig, EnvironmentParameters)`` for the file and the options; raises on errors."""
    raw = merge_command_line(read_yaml(config_path), options, env_args)
    where = config_path or "<command line>"
    run = resolve(where, raw, registry)
    if run.sections["debug"]:
        logging.getLogger().setLevel(logging.DEBUG)
    for warning in dict.fromkeys(run.warnings):
        logger.warning("%s", warning)
    given = {s: set(raw.get(s) or ()) for s in ("env_settings", "engine_settings") if isinstance(raw.get(s), dict)}
    if not run.behaviors and run.default_settings is None and config_path is not None:
        raise RunConfigError(f"{where}: behaviors: missing or empty. List each behaviour of the build under "
                             "behaviors: (or give default_settings:).")
    config = trainer_config_from_dict(where, run.flat_config(), registry)
    if not run.sections["checkpoint_settings"]["resume"]:  # --resume continues the run's own weights
        for name, behavior in run.behaviors.items():
            if behavior.settings.get("init_path"):
                try:
                    resolve_init_path(behavior.settings["init_path"], f"{where}: behaviors.{name}.init_path")
                except UnityTrainerException as e:
                    raise RunConfigError(str(e)) from None
    r22 = R22TrainerConfig(config.path, config.raw, config.registry, config.blocks)
    r22.has_default_settings = run.default_settings is not None or config_path is None
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


def run_options(argv: List[str]):
    """Everything checked and translated into the run's ``RunOptions`` (or a dry-run's text)."""
    from trainers.trainer.registry import load_registry
    from unityagents.vector.restart import RestartPolicy

    rest, env_args = split_env_args(argv)
    options = docopt(__doc__, argv=rest)
    config_path = options["<trainer_config_path>"] and shipped_file(options["<trainer_config_path>"])
    run, config, params, run_seed, given_keys = load(config_path, options, env_args,
                                                     load_registry())
    Placement.of(run.sections["torch_settings"]["device"])  # a name that is no device is refused here
    if options["--dry-run"]:
        check_results_folder(run, create=False)
        return None, resolved_yaml(run, params)
    env_s, eng, cp = (run.sections[k] for k in ("env_settings", "engine_settings", "checkpoint_settings"))
    if env_s["num_areas"] < 1:
        raise RunConfigError(f"env_settings.num_areas: {env_s['num_areas']}; num_areas must be set to a positive "
                             "number >= 1 (the training areas of each environment).")
    editor = not env_s["env_path"]
    if editor and env_s["num_envs"] != 1:
        raise RunConfigError(f"env_settings.num_envs: {env_s['num_envs']} environments, but without --env the run "
                             "trains in the Unity Editor, which is one. Drop --num-envs, or pass --env=<build>.")
    if cp["train_model"]:
        logger.warning("checkpoint_settings.train_model / --train is deprecated in Release 22 and has no effect.")
    folder, init = check_results_folder(run)
    if cp["force"] and not cp["resume"]:  # an overwritten run does not keep its old events and checkpoints
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if name != "run_logs":
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    protocol = coerce_value("--protocol", options["--protocol"] or "grpc", PROTOCOL, RunConfigError)
    given = given_keys.get("engine_settings", ())
    engine = {k: v for k, v in eng.items() if k in ENGINE_KEYS and k in given}
    time_scale = float(eng["time_scale"]) if protocol == "grpc" or "time_scale" in given else 20.0
    paths = RunPaths.results(cp["results_dir"], cp["run_id"])
    paths.lessons = params.lesson_numbers
    behaviors = list(run.behaviors.values())
    intervals = [b.settings["checkpoint_interval"] for b in behaviors] or [500000]
    keep = max([b.settings["keep_checkpoints"] for b in behaviors] or [5])
    base_port = env_s["base_port"]
    if editor and "base_port" not in given_keys.get("env_settings", ()):
        base_port = EDITOR_PORT  # where the Editor calls, unless the user moved both
    check_ports(base_port, 0, env_s["num_envs"])
    opts = RunOptions(
        env=env_s["env_path"] or None, config=config, run_path=cp["run_id"], train=not cp["inference"],
        load=cp["resume"], keep_checkpoints=max(keep, 1), save_freq=0, seed=run_seed, base_port=base_port,
        timeout=env_s["timeout_wait"], num_envs=env_s["num_envs"], env_args=list(env_s["env_args"] or []),
        protocol_options=protocol_options(protocol, time_scale, engine, eng["no_graphics"],
                                          env_s["num_areas"], eng["no_graphics_monitor"]),
        restarts=RestartPolicy(env_s["max_lifetime_restarts"], env_s["restarts_rate_limit_n"],
                               float(env_s["restarts_rate_limit_period_s"])),
        curriculum=params if params.tracks else None, ray_address=options["--ray-address"],
        ray_resource=options["--ray-resource"], paths=paths, init_from=init,
        log_dir=os.path.abspath(os.path.join(folder, "run_logs")), checkpoint_interval=min(intervals),
        device=run.sections["torch_settings"]["device"], resume_command=resume_command(argv),
        strict_export=bool(options["--strict-export"]))
    if cp["resume"] and not os.path.isdir(paths.checkpoint_dir):
        raise RunConfigError(f"--resume: {folder} has no checkpoint to resume from ({paths.checkpoint_dir} is "
                             "missing). Start it again with --force.")
    if opts.train:
        os.makedirs(os.path.join(folder, "run_logs"), exist_ok=True)
        with open(os.path.join(folder, "configuration.yaml"), "w", encoding="utf-8") as f:
            f.write(resolved_yaml(run, params))
    return opts, None


def resume_command(argv: List[str]) -> str:
    """The command line that continues this run: the same one, with ``--resume`` instead of ``--force``."""
    rest, env_args = split_env_args(argv)
    kept = [a for a in rest if a not in ("--force", "--resume")] + ["--resume"]
    if env_args is not None:
        kept += ["--env-args"] + env_args
    return " ".join(["unityagents-learn"] + [shlex.quote(a) for a in kept])


def _unused_run_folder(folder: str) -> bool:
    """Whether ``folder`` holds only what ``run_options`` wrote before the environment connected."""
    try:
        entries = set(os.listdir(folder))
        logs = os.listdir(os.path.join(folder, "run_logs")) if "run_logs" in entries else []
    except OSError:
        return False
    return entries <= {"configuration.yaml", "run_logs"} and not logs


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    if "--dry-run" in split_env_args(argv)[0]:
        try:
            _, text = run_options(argv)
        except RunConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # any other refusal of the config (runner.settings.trainer_config's checks)
            from unityagents.exception import UnityException

            if not isinstance(e, UnityException):
                raise
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(text, end="")
        return 0
    made = []  # a run folder this command created, removed again if no environment ever connected

    def options():
        opts = run_options(argv)[0]
        if opts.train and not opts.load and opts.env is None:
            made.append(os.path.dirname(opts.log_dir))
        return opts

    status = start_run(options)
    if status != 0 and made and _unused_run_folder(made[0]):
        shutil.rmtree(made[0], ignore_errors=True)
    return status


def cli() -> None:
    """Console-script entry point (``unityagents-learn``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
