"""unityagents-learn: train with ML-Agents Release 22's command line, run config and results folder.

Usage:
  unityagents-learn [<trainer_config_path>] [options]
  unityagents-learn (-h | --help)

Arguments:
  <trainer_config_path>             A Release 22 run config (behaviors:, default_settings:, ...).

Options:
  -h --help                         Show this message.
  --env=<path>                      A Unity build, or a built-in scene (3DBall, Push, ...).
  --run-id=<id>                     The run's folder under --results-dir (default ppo).
  --results-dir=<dir>               Where runs are written (default results).
  --resume                          Continue the run --run-id from its last checkpoint.
  --force                           Overwrite the run --run-id if it exists.
  --initialize-from=<run-id>        Start from that run's weights, with the step counters at 0.
  --inference                       Run the policy without training (until Ctrl-C).
  --seed=<n>                        Run seed; -1 picks one in [0, 10000).
  --base-port=<n>                   Port of environment 0; environment i uses base-port + i.
  --num-envs=<n>                    Environments stepped at once.
  --num-areas=<n>                   Training areas per instance (only 1 here).
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
  --no-graphics-monitor             Engine: render on worker 0 only (not built here).
  --torch-device=<device>           Where the graph runs: cpu, cuda or cuda:N (TensorFlow placement).
  --debug                           Debug logging.
  --deterministic                   Mean/argmax actions (not built here).

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
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import yaml
from docopt import docopt

from trainers.devices import Placement
from trainers.run_paths import RunPaths
from trainers.settings.environment_parameters import EnvironmentParameters, parse_environment_parameters
from trainers.settings.run_config import RunConfig, RunConfigError, resolve
from trainers.settings.schema import coerce_value
from trainers.settings.trainer_config import StrictLoader, TrainerConfig, _DuplicateKeyError, trainer_config_from_dict
from unityagents.brain import team_base

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
    does not list trains with ``default_settings``, or is an error without them; a listed one the
    scene lacks is a warning."""

    has_default_settings: bool = False

    def settings_for_environment(self, brains, external_brain_names):
        bases = {team_base(b) for b in brains}
        for name in self.blocks:
            if name not in bases and name not in brains:
                logger.warning("%s: behaviors.%s: the environment has no behaviour of that name (it has: %s); its "
                               "settings are unused.", self.path, name, ", ".join(sorted(bases)))
        for name in external_brain_names:
            if name not in self.blocks and team_base(name) not in self.blocks and not self.has_default_settings:
                raise RunConfigError(
                    f"{self.path}: behaviors.{team_base(name)}: the environment has this behaviour but the config "
                    "lists no settings for it. Add it under behaviors:, or add default_settings:.")
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
    return merged


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
    if options.get("--deterministic"):
        raise RunConfigError(f"{where}: --deterministic asks for deterministic (mean/argmax) actions, which this "
                             "project does not build. Drop the option.")
    if not run.behaviors and run.default_settings is None and config_path is not None:
        raise RunConfigError(f"{where}: behaviors: missing or empty. List each behaviour of the build under "
                             "behaviors: (or give default_settings:).")
    config = trainer_config_from_dict(where, run.flat_config(), registry)
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
    """Everything checked and translated into learn.py's ``RunOptions`` (or a dry-run's text)."""
    import learn
    from trainers.trainer.registry import load_registry
    from unityagents.vector.restart import RestartPolicy

    rest, env_args = split_env_args(argv)
    options = docopt(__doc__, argv=rest)
    config_path = options["<trainer_config_path>"] and learn.shipped_file(options["<trainer_config_path>"])
    run, config, params, run_seed, given_keys = load(config_path, options, env_args,
                                                     load_registry())
    Placement.of(run.sections["torch_settings"]["device"])  # a name that is no device is refused here
    if options["--dry-run"]:
        check_results_folder(run, create=False)
        return None, resolved_yaml(run, params)
    env_s, eng, cp = (run.sections[k] for k in ("env_settings", "engine_settings", "checkpoint_settings"))
    if not env_s["env_path"]:
        raise RunConfigError("env_settings.env_path: missing; this trainer does not connect to the Unity Editor. "
                             "Pass --env=<build or built-in scene>.")
    if cp["train_model"]:
        logger.warning("checkpoint_settings.train_model / --train is deprecated in Release 22 and has no effect.")
    folder, init = check_results_folder(run)
    if cp["force"] and not cp["resume"]:  # an overwritten run does not keep its old events and checkpoints
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if name != "run_logs":
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    protocol = coerce_value("--protocol", options["--protocol"] or "grpc", learn.OPTIONS["--protocol"],
                            RunConfigError)
    given = given_keys.get("engine_settings", ())
    engine = {k: v for k, v in eng.items() if k in ENGINE_KEYS and k in given}
    time_scale = float(eng["time_scale"]) if protocol == "grpc" or "time_scale" in given else 20.0
    paths = RunPaths.results(cp["results_dir"], cp["run_id"])
    paths.lessons = params.lesson_numbers
    behaviors = list(run.behaviors.values())
    intervals = [b.settings["checkpoint_interval"] for b in behaviors] or [500000]
    keep = max([b.settings["keep_checkpoints"] for b in behaviors] or [5])
    opts = learn.RunOptions(
        env=env_s["env_path"], config=config, run_path=cp["run_id"], train=not cp["inference"], load=cp["resume"],
        keep_checkpoints=max(keep, 1), save_freq=0, seed=run_seed, base_port=env_s["base_port"],
        timeout=env_s["timeout_wait"], num_envs=env_s["num_envs"], env_args=list(env_s["env_args"] or []),
        protocol_options=learn.protocol_options(protocol, time_scale, engine, eng["no_graphics"]),
        restarts=RestartPolicy(env_s["max_lifetime_restarts"], env_s["restarts_rate_limit_n"],
                               float(env_s["restarts_rate_limit_period_s"])),
        curriculum=params if params.tracks else None, ray_address=options["--ray-address"],
        ray_resource=options["--ray-resource"], paths=paths, init_from=init,
        log_dir=os.path.abspath(os.path.join(folder, "run_logs")), checkpoint_interval=min(intervals),
        device=run.sections["torch_settings"]["device"])
    if cp["resume"] and not os.path.isdir(paths.checkpoint_dir):
        raise RunConfigError(f"--resume: {folder} has no checkpoint to resume from ({paths.checkpoint_dir} is "
                             "missing). Start it again with --force.")
    if opts.train:
        os.makedirs(os.path.join(folder, "run_logs"), exist_ok=True)
        with open(os.path.join(folder, "configuration.yaml"), "w", encoding="utf-8") as f:
            f.write(resolved_yaml(run, params))
    return opts, None


def main(argv: Optional[List[str]] = None) -> int:
    import learn

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
        except Exception as e:  # any other refusal of the config (trainers.settings.trainer_config's checks)
            from unityagents.exception import UnityException

            if not isinstance(e, UnityException):
                raise
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(text, end="")
        return 0
    return learn.run(lambda: run_options(argv)[0])


def cli() -> None:
    """Console-script entry point (``unityagents-learn``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
