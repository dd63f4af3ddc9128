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
import shlex
import shutil
import sys
from typing import List, Optional, Tuple

from docopt import docopt

from runner.devices import Placement
from runner.options import PROTOCOL, RunOptions, check_ports, protocol_options, shipped_file
from runner.run import run as start_run
from runner.run_paths import RunPaths
from runner.settings.release22 import (  # noqa: F401 (FLAGS, load, R22TrainerConfig: this front end's names for them)
    FLAGS,
    R22TrainerConfig,
    check_results_folder,
    load,
    resolved_yaml,
)
from runner.settings.run_config import RunConfigError
from trainers.settings.schema import coerce_value
from unityagents.editor import EDITOR_PORT

logger = logging.getLogger("unityagents")

#: The engine settings passed to the build only when the config or the command line gives them.
ENGINE_KEYS = ("width", "height", "quality_level", "target_frame_rate", "capture_frame_rate")


def split_env_args(argv: List[str]) -> Tuple[List[str], Optional[List[str]]]:
    """Release 22's ``--env-args`` takes the rest of the command line."""
    for i, arg in enumerate(argv):
        if arg == "--env-args":
            return argv[:i], argv[i + 1:]
        if arg.startswith("--env-args="):
            return argv[:i], [arg.split("=", 1)[1]] + argv[i + 1:]
    return argv, None


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
    # Release 22 counts checkpoint_interval and keep_checkpoints per behaviour, in its own agent steps.
    intervals = {name: b.settings["checkpoint_interval"] for name, b in run.behaviors.items()}
    intervals[""] = (run.default_settings or {}).get("checkpoint_interval", 500000)  # behaviours not listed
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
        log_dir=os.path.abspath(os.path.join(folder, "run_logs")), checkpoint_interval=intervals,
        keep_per_behavior={name: max(b.settings["keep_checkpoints"], 1) for name, b in run.behaviors.items()},
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
