"""Train every External brain of a Unity environment (a build, or a built-in scene).

Usage:
  learn.py <env> [options]
  learn.py (-h | --help)

Arguments:
  <env>                      A Unity build (3DBall, builds/3DBall.x86_64, ...) or a built-in scene:
                             3DBall, 3DBallHard, Basic, GridWorld, Hallway, Tennis, 3DBallIL, Push.

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
  --worker-id=<n>            Added to --base-port, to run several environments at once [default: 0].
  --base-port=<n>            Port that worker 0 listens on (127.0.0.1 only) [default: 5005].
  --timeout=<s>              Seconds to wait for any answer of the environment [default: 60].
  --slow                     Run the environment with its inference (slow, rendered) settings.

Outputs: models/<run-path>/ (checkpoints, raw_graph_def.pb, <env>.bytes for Unity's Internal brain)
and summaries/<run-path>[_<scope>]/ (TensorBoard: tensorboard --logdir summaries).
"""
from __future__ import annotations

import logging
import os
import sys
from typing import List, Optional

from docopt import docopt

from unityagents import UnityEnvironment, UnityEnvironmentException, UnityException

logger = logging.getLogger("unityagents")

HERE = os.path.dirname(os.path.abspath(__file__))


def _int_option(options, name: str, minimum: int = 0) -> int:
    value = options[name]
    try:
        number = int(value)
    except ValueError:
        raise UnityEnvironmentException(f"{name} expects an integer, got {value!r}.") from None
    if number < minimum:
        raise UnityEnvironmentException(f"{name} must be >= {minimum}, got {number}.")
    return number


def _trainer_config_path(value: str) -> str:
    """The given file; for the default name, fall back to the file shipped next to learn.py."""
    if value == "trainer_configurations.yaml" and not os.path.exists(value):
        return os.path.join(HERE, value)
    return value


def main(argv: Optional[List[str]] = None) -> int:
    options = docopt(__doc__, argv=argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    try:
        from trainers.config import load_trainer_config
        from trainers.registry import load_registry
        from trainers.trainer_controller import TrainerController, latest_checkpoint

        save_freq = _int_option(options, "--save-freq", 1)
        keep = _int_option(options, "--keep-checkpoints", 1)
        lesson = _int_option(options, "--lesson")
        seed = _int_option(options, "--seed")
        worker_id = _int_option(options, "--worker-id")
        base_port = _int_option(options, "--base-port", 1)
        timeout = _int_option(options, "--timeout", 1)
        curriculum = None if options["--curriculum"] in (None, "None") else options["--curriculum"]
        run_path = options["--run-path"]
        model_path = os.path.join("models", run_path)

        # Everything that can be checked without the environment is checked before launching it.
        config = load_trainer_config(_trainer_config_path(options["--trainer-config"]), load_registry())
        if options["--load"] and latest_checkpoint(model_path) is None:
            raise UnityEnvironmentException(
                f"--load: no checkpoint was found in {model_path}. Check --run-path, or start without --load.")

        env = UnityEnvironment(options["<env>"], worker_id=worker_id, base_port=base_port,
                               curriculum=curriculum, seed=seed, timeout_wait=timeout)
        if curriculum is not None and lesson > env.curriculum.max_lesson_number:
            env.close()
            raise UnityEnvironmentException(
                f"--lesson {lesson}: the curriculum {curriculum} has lessons 0..{env.curriculum.max_lesson_number}.")
        controller = TrainerController(
            env, config, env_name=options["<env>"], run_path=run_path, load=options["--load"],
            train=options["--train"], keep_checkpoints=keep, save_freq=save_freq, lesson=lesson,
            fast_simulation=not options["--slow"], seed=seed)
        controller.start_learning()
    except UnityException as e:
        logger.error("%s: %s", type(e).__name__, e)
        return 1
    except KeyboardInterrupt:
        logger.info("Interrupted before training started.")
        return 130
    return 0


def cli() -> None:
    """Console-script entry point (``learn``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
