"""Train every External brain of a Unity environment (a build, or a built-in scene).

Usage:
  learn.py <env> [options]
  learn.py (-h | --help)

Arguments:
  <env>                      A Unity build (3DBall, builds/3DBall.x86_64, ...) or a built-in scene:
                             3DBall, 3DBallHard, Basic, GridWorld, Hallway, Tennis, 3DBallIL, Push, Pyramids,
                             Interact, PushCollab (the last two over --protocol grpc only), Sorter, SorterFlat,
                             Soccer.

Options:
  -h --help                  Show this message.
  --train                    Train the brains. Without it the brains only act (inference), forever.
  --trainer-config=<file>    Hyperparameters YAML [default: trainer_configurations.yaml].
  --run-path=<path>          Sub-directory of models/ and prefix of summaries/ for this run [default: ppo].
  --load                     Restore the latest checkpoint of --run-path and continue from it.
  --curriculum=<file>        Curriculum JSON that changes the reset parameters as agents improve [default: None].
  --lesson=<n>               Curriculum lesson to start from [default: 0].
  --save-freq=<n>            Environment steps between checkpoints [default: 50000].
  --keep-checkpoints=<n>     How many checkpoints to keep [default: 5].
  --seed=<n>                 Random seed of the trainers and of built-in scenes [default: 0].
  --worker-id=<n>            Added to --base-port, to run several training runs at once [default: 0].
  --base-port=<n>            Port that worker 0 listens on (127.0.0.1 only) [default: 5005].
  --num-envs=<n>             Environments stepped at once: environment i listens on base port + worker id + i
                             and is seeded seed + i [default: 1].
  --schedule=<s>             With several environments: overlapped (each is sent its actions as soon as they
                             are computed) or sync (all stepped together, the same interleaving in every
                             run) [default: overlapped].
  --env-args=<args>          Extra command-line arguments for every environment, in one quoted string
                             (e.g. "--frame-time-ms 5" for a built-in scene) [default: ].
  --timeout=<s>              Seconds to wait for any answer of the environment; also how long (in seconds of
                             stepping) an environment may go without any agent asking for a decision
                             before it counts as failed [default: 60].
  --ray-address=<address>    Run each environment as a Ray actor on a cluster (docs/cluster.md): auto (the
                             running cluster), local (a private one on this machine) or host:port.
  --ray-resource=<name>      Place environment actors only on nodes offering this custom Ray resource.
  --max-lifetime-restarts=<n>  Restarts of each crashed environment over the run; -1 for no limit [default: 10].
  --restarts-rate-limit-n=<n>  Restarts of each environment allowed per rate-limit period; -1 for no limit [default: 1].
  --restarts-rate-limit-period-s=<s>  The rate-limit period, in seconds [default: 60].
  --protocol=<p>             api2 (Unity builds of 2018) or grpc (ML-Agents Release 19 and later) [default: api2].
  --time-scale=<x>           grpc: the engine's time scale [default: 20].
  --width=<n>                grpc: the player's screen width (with --height).
  --height=<n>               grpc: the player's screen height (with --width).
  --quality-level=<n>        grpc: the engine's quality level.
  --target-frame-rate=<n>    grpc: the engine's target frame rate.
  --capture-frame-rate=<n>   grpc: the engine's capture frame rate.
  --no-graphics              grpc: launch the build with -nographics (no rendering; no cameras).
  --slow                     Run the environment with its inference (slow, rendered) settings.
  --strict-export            Stop the run when an exported .onnx would not load cleanly in a Unity inference
                             engine (by default each finding is a warning in the log).

Outputs: models/<run-path>/ (checkpoints, raw_graph_def.pb, <env>.bytes for Unity's Internal brain)
and summaries/<run-path>[_<scope>]/ (TensorBoard: tensorboard --logdir summaries).
"""
from __future__ import annotations

import logging
import os
import shlex
import sys
from typing import Any, Dict, List, Optional

from docopt import docopt

from runner.options import HERE, PROTOCOL, SHIPPED, SHIPPED_DIR, RunOptions, check_ports, protocol_options, shipped_file
from runner.run import EXIT_SIGINT_NOTHING_SAVED, EXIT_SIGINT_SAVED, EXIT_SIGTERM, exit_status, run, train
from trainers.settings.schema import Param, check_block, positive
from unityagents import UnityEnvironmentException
from unityagents.vector.overlapped_stepping import SCHEDULES
from unityagents.vector.restart import RestartPolicy

logger = logging.getLogger("unityagents")

#: The names scripts import from learn.py; the run itself (options, start, exit statuses) is ``runner``'s.
__all__ = ["main", "cli", "OPTIONS", "checked_options", "RunOptions", "run", "train", "protocol_options",
           "shipped_file", "HERE", "SHIPPED", "SHIPPED_DIR", "EXIT_SIGINT_SAVED", "EXIT_SIGINT_NOTHING_SAVED",
           "EXIT_SIGTERM", "exit_status"]


def _at_least(minimum: float) -> tuple:
    return (lambda x: x >= minimum, f">= {minimum}")


#: The options that are numbers or choices, as the settings declare keys: each is checked and
#: converted once, by the same coercer as the YAML's keys (``trainers.settings.schema``).
OPTIONS: Dict[str, Param] = {
    "--save-freq": Param(int, required=True, check=_at_least(1)),
    "--keep-checkpoints": Param(int, required=True, check=_at_least(1)),
    "--lesson": Param(int, required=True, check=_at_least(0)),
    "--seed": Param(int, required=True, check=_at_least(0)),
    "--worker-id": Param(int, required=True, check=_at_least(0)),
    "--base-port": Param(int, required=True, check=(lambda x: 1 <= x <= 65535, "in [1, 65535]")),
    "--timeout": Param(int, required=True, check=_at_least(1)),
    "--num-envs": Param(int, required=True, check=_at_least(1)),
    "--schedule": Param(str, required=True, choices=tuple(SCHEDULES)),
    "--max-lifetime-restarts": Param(int, required=True, check=_at_least(-1), fix="Use -1 for no limit."),
    "--restarts-rate-limit-n": Param(int, required=True, check=_at_least(-1), fix="Use -1 for no limit."),
    "--restarts-rate-limit-period-s": Param(float, required=True, check=(positive, "a number of seconds > 0")),
    "--protocol": PROTOCOL,
    "--time-scale": Param(float, required=True, check=(positive, "a finite number > 0")),
    **{name: Param(int, check=_at_least(1)) for name in ("--width", "--height", "--quality-level",
                                                         "--target-frame-rate", "--capture-frame-rate")},
}
ENGINE_OPTIONS = ("--width", "--height", "--quality-level", "--target-frame-rate", "--capture-frame-rate")


def checked_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The docopt options of ``OPTIONS`` in their declared types (the others as docopt gives them)."""
    checked = check_block(lambda key: key or "the command line", {k: options[k] for k in OPTIONS}, OPTIONS,
                          "learn.py", error=UnityEnvironmentException)
    return {**options, **checked}


def _run_path(value: str) -> str:
    """``--run-path`` names a folder under models/ (and a prefix under summaries/): relative, no ``..``.

    Refused rather than resolved, so that a run never writes anywhere but where the user looks.
    """
    parts = value.replace("\\", "/").split("/")
    if not value.strip() or os.path.isabs(value) or value.startswith(("/", "\\", "~")) or ".." in parts \
            or any(p.strip() == "" for p in parts[:-1]) or "\0" in value:
        raise UnityEnvironmentException(
            f"--run-path {value!r} must be a relative path inside models/ and summaries/ (no absolute path, "
            "no '..', no '~'), such as 'ppo' or 'experiments/run-3'.")
    return os.path.normpath(value)


def main(argv: Optional[List[str]] = None) -> int:
    options = docopt(__doc__, argv=argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    return run(lambda: _run_options(options))


def _run_options(options) -> RunOptions:
    """learn.py's options, checked (everything that can be checked without the environment)."""
    from runner.checkpoints import latest_checkpoint
    from runner.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry

    options = checked_options(options)
    lesson = options["--lesson"]
    worker_id, base_port, num_envs = options["--worker-id"], options["--base-port"], options["--num-envs"]
    check_ports(base_port, worker_id, num_envs)
    protocol_options_ = protocol_options(
        options["--protocol"], options["--time-scale"],
        {name[2:].replace("-", "_"): options[name] for name in ENGINE_OPTIONS if options[name] is not None},
        options["--no-graphics"])
    restarts = RestartPolicy(options["--max-lifetime-restarts"], options["--restarts-rate-limit-n"],
                             options["--restarts-rate-limit-period-s"])
    try:
        env_args = shlex.split(options["--env-args"] or "")
    except ValueError as e:
        raise UnityEnvironmentException(f"--env-args {options['--env-args']!r} is not a valid argument "
                                        f"string ({e}).") from None
    curriculum = None if options["--curriculum"] in (None, "None") else shipped_file(options["--curriculum"])
    run_path = _run_path(options["--run-path"])
    model_path = os.path.join("models", run_path)

    config = load_trainer_config(shipped_file(options["--trainer-config"]), load_registry())
    if curriculum is not None:
        from unityagents.curriculum import load_curriculum_file

        last_lesson = len(load_curriculum_file(curriculum)["thresholds"])
        if lesson > last_lesson:
            raise UnityEnvironmentException(
                f"--lesson {lesson}: the curriculum {curriculum} has lessons 0..{last_lesson}. Pick one of them.")
    if options["--load"] and latest_checkpoint(model_path) is None:
        raise UnityEnvironmentException(
            f"--load: no checkpoint was found in {model_path}. Check --run-path, or start without --load.")
    return RunOptions(
        env=options["<env>"], config=config, run_path=run_path, train=options["--train"], load=options["--load"],
        keep_checkpoints=options["--keep-checkpoints"], save_freq=options["--save-freq"], lesson=lesson,
        seed=options["--seed"], worker_id=worker_id, base_port=base_port, timeout=options["--timeout"],
        num_envs=num_envs, env_args=env_args, protocol_options=protocol_options_, restarts=restarts,
        curriculum=curriculum, ray_address=options["--ray-address"], ray_resource=options["--ray-resource"],
        slow=options["--slow"], schedule=options["--schedule"], strict_export=options["--strict-export"])


def cli() -> None:
    """Console-script entry point (``learn``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
