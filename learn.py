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

Outputs: models/<run-path>/ (checkpoints, raw_graph_def.pb, <env>.bytes for Unity's Internal brain)
and summaries/<run-path>[_<scope>]/ (TensorBoard: tensorboard --logdir summaries).
"""
from __future__ import annotations

import logging
import os
import shlex
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from docopt import docopt

from trainers.settings.schema import Param, check_block, positive
from unityagents import UnityEnvironment, UnityEnvironmentException, UnityException
from unityagents.editor import EXPORT_NAME as EDITOR_EXPORT_NAME
from unityagents.vector.environment_set import EnvironmentSet
from unityagents.vector.overlapped_stepping import SCHEDULES
from unityagents.vector.restart import RestartPolicy

logger = logging.getLogger("unityagents")

HERE = os.path.dirname(os.path.abspath(__file__))


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
    "--protocol": Param(str, required=True, choices=("api2", "grpc"),
                        fix="api2 talks to Unity builds of 2018 (ML-Agents 0.3), grpc to ML-Agents Release 19+."),
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


def protocol_options(protocol: str, time_scale: float = 20.0, engine: Optional[Dict[str, int]] = None,
                     no_graphics: bool = False, num_areas: int = 1, no_graphics_monitor: bool = False
                     ) -> Dict[str, Any]:
    """``UnityEnvironment``'s protocol arguments; the engine settings exist in the modern protocol only.

    :param engine: the engine settings the user gave (``width``, ``quality_level``, ...), checked.
    :param num_areas: training areas per environment, asked for in the modern protocol's handshake.
    :param no_graphics_monitor: launch every environment but the first without graphics.
    """
    engine = dict(engine or {})
    if protocol == "api2":
        given = [f"--{k.replace('_', '-')}" for k in engine] + (["--no-graphics"] if no_graphics else []) + (
            ["--time-scale"] if time_scale != 20.0 else []) + (["--no-graphics-monitor"] if no_graphics_monitor else [])
        if num_areas != 1:
            raise UnityEnvironmentException(
                f"--num-areas {num_areas} travels in the modern protocol's handshake, which an API-2 build does not "
                "read. Use --protocol grpc (a modern build), or drop --num-areas.")
        if given:
            raise UnityEnvironmentException(
                f"{', '.join(given)} set the engine of a modern build and need --protocol grpc; an API-2 build has "
                "no engine settings (use --slow for its inference settings).")
        return {}
    from unityagents.wire.side_channels import EngineConfig

    extra = {"num_areas": int(num_areas)} if num_areas != 1 else {}
    if no_graphics_monitor:
        extra["no_graphics_monitor"] = True
    return {"protocol": "grpc", "engine_config": EngineConfig(time_scale=time_scale, **engine),
            "no_graphics": bool(no_graphics), **extra}


#: The files shipped with the code (the default hyperparameters, the Release 22 run configs, the curricula):
#: beside learn.py in a clone; in an installed package under this folder beside learn.py (setup.py's build_py).
SHIPPED = ("trainer_configurations.yaml", "config", "curricula")
SHIPPED_DIR = "unityagents_shipped"


def shipped_file(path: str) -> str:
    """``path`` itself when it exists (or is absolute); else, for a relative path that names a shipped file
    (``trainer_configurations.yaml``, ``config/...``, ``curricula/...``), the copy shipped with the code, so
    the documented commands work from any folder, from a clone or an installed package alike."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    relative = os.path.normpath(path)
    if relative.split(os.sep)[0] not in SHIPPED:
        return path
    for base in (HERE, os.path.join(HERE, SHIPPED_DIR)):
        candidate = os.path.join(base, relative)
        if os.path.exists(candidate):
            logger.info("%s is not in this folder: using the shipped %s", path, candidate)
            return candidate
    return path


@dataclass(frozen=True)
class RunOptions:
    """One training (or inference) run, as both front ends build it once from their command line
    (``learn.py``'s docopt options; ``unityagents-learn``'s Release 22 run config and ``--`` options,
    ``learn_r22``), checked and typed; what starts the run reads only this."""

    env: Optional[str]  # a build or built-in scene; None: the Unity Editor
    config: Any  # trainers.settings.trainer_config.TrainerConfig
    # What is trained, and from where.
    run_path: str = "ppo"
    train: bool = False
    load: bool = False
    init_from: Optional[str] = None  # a checkpoint folder whose weights start the run
    lesson: int = 0
    #: A curriculum JSON path, or an object with ``Curriculum``'s interface (environment parameters).
    curriculum: Any = None
    seed: int = 0
    # Which files are kept.
    paths: Any = None  # runner.run_paths.RunPaths; None: models/<run_path>/ and summaries/
    keep_checkpoints: int = 5
    save_freq: int = 50000
    checkpoint_interval: Optional[int] = None  # also save every this many agent steps of the first learner
    device: Optional[str] = None  # the graph's device: cpu, cuda, cuda:N (runner.devices); None: TensorFlow's choice
    # The environments.
    worker_id: int = 0
    base_port: int = 5005
    timeout: int = 60
    slow: bool = False
    num_envs: int = 1
    schedule: str = "overlapped"  # unityagents.vector.overlapped_stepping.SCHEDULES
    env_args: List[str] = field(default_factory=list)
    protocol_options: Dict[str, Any] = field(default_factory=dict)
    restarts: Optional[RestartPolicy] = None
    ray_address: Optional[str] = None
    ray_resource: Optional[str] = None
    log_dir: Optional[str] = None  # the environments' logs; None: <checkpoints>/logs
    resume_command: Optional[str] = None  # how the user continues this run (said when the Editor leaves for good)

    def checkpoint_dir(self) -> str:
        return self.paths.checkpoint_dir if self.paths is not None else os.path.join("models", self.run_path)


def run(make_options: Callable[[], RunOptions]) -> int:
    """Build the options (their errors are reported like the run's), train, map the end onto an exit status."""
    from runner.stopping import Stop, install_signal_handlers

    install_signal_handlers()  # from here on SIGINT and SIGTERM request a stop, even during start-up
    try:
        train(make_options())
    except UnityException as e:
        if getattr(e, "ends_run", False):  # e.g. the Editor left play mode for good, after the run was saved
            logger.info("%s", e)
            return 0
        logger.error("%s: %s", type(e).__name__, e)
        return 1
    except KeyboardInterrupt as e:
        return _stopped(e if isinstance(e, Stop) else Stop(signal.SIGINT))
    return 0


def train(opts: RunOptions) -> None:
    """Launch the environments of ``opts`` and run the trainer controller until it ends."""
    from runner.controller import TrainerController
    from runner.devices import placement

    device = placement(opts.device)  # a GPU that is not there is refused before any environment starts

    log_dir = opts.log_dir or os.path.abspath(os.path.join(opts.checkpoint_dir(), "logs"))

    def env_kwargs(i: int) -> Dict[str, Any]:
        return dict(file_name=opts.env, worker_id=opts.worker_id + i, base_port=opts.base_port, seed=opts.seed + i,
                    timeout_wait=opts.timeout, env_args=opts.env_args, log_dir=log_dir, **opts.protocol_options)

    editor = None
    if opts.env is None:  # the Unity Editor: one environment, waited for on its port
        from unityagents.editor import EditorConnection

        def connect_editor():
            return UnityEnvironment(None, base_port=opts.base_port, seed=opts.seed, timeout_wait=opts.timeout,
                                    start_timeout=opts.timeout, **opts.protocol_options)

        editor = launch = EditorConnection(connect_editor, opts.restarts, opts.timeout, opts.resume_command or "")
        restarts = RestartPolicy(-1, -1)  # each return to play mode is counted by the connection itself
    elif opts.ray_address:
        from unityagents.vector.ray_backend import RayEnvironmentWorker, connect

        connect(opts.ray_address)

        def launch(i: int):
            return RayEnvironmentWorker(i, env_kwargs(i), resource=opts.ray_resource)
    else:
        if opts.ray_resource:
            raise UnityEnvironmentException("--ray-resource needs --ray-address (it places Ray actors).")

        def launch(i: int):
            return UnityEnvironment(**env_kwargs(i))

    if editor is None:
        restarts = opts.restarts
    from runner.stopping import interruptible

    with interruptible():  # a stop requested so far, or while the environments start (or wait for Play), ends it
        env = EnvironmentSet(launch, opts.num_envs, curriculum=opts.curriculum, restart_policy=restarts,
                             no_decision_seconds=opts.timeout, schedule=opts.schedule)
    try:
        controller = TrainerController(
            env, opts.config, env_name=opts.env if opts.env is not None else EDITOR_EXPORT_NAME,
            run_path=opts.run_path, load=opts.load,
            train=opts.train, keep_checkpoints=opts.keep_checkpoints, save_freq=opts.save_freq, lesson=opts.lesson,
            fast_simulation=not opts.slow, seed=opts.seed, paths=opts.paths, init_from=opts.init_from,
            checkpoint_interval=opts.checkpoint_interval, device=device)
    except BaseException:
        env.close()
        raise
    if editor is not None:  # the Editor left play mode: the run is saved before waiting for Play again
        editor.on_leave = lambda: controller.save_now("The Unity Editor left play mode")
    if hasattr(opts.curriculum, "bind"):  # criteria that name a behaviour read its trainer
        opts.curriculum.bind(lambda: controller.trainers)
    controller.start_learning()


def main(argv: Optional[List[str]] = None) -> int:
    options = docopt(__doc__, argv=argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    return run(lambda: _run_options(options))


def _run_options(options) -> RunOptions:
    """learn.py's options, checked (everything that can be checked without the environment)."""
    from runner.checkpoints import latest_checkpoint
    from trainers.settings.trainer_config import load_trainer_config
    from trainers.trainer.registry import load_registry

    options = checked_options(options)
    lesson = options["--lesson"]
    worker_id, base_port, num_envs = options["--worker-id"], options["--base-port"], options["--num-envs"]
    last_port = base_port + worker_id + num_envs - 1
    if last_port > 65535:
        raise UnityEnvironmentException(
            f"--base-port {base_port} + --worker-id {worker_id} + --num-envs {num_envs} needs ports up to "
            f"{last_port}, past 65535. Lower --base-port or --worker-id.")
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
        slow=options["--slow"], schedule=options["--schedule"])


#: Exit status after a signal. Ctrl-C is the user's way to end a run early: 0 once the model is
#: saved and exported. SIGTERM comes from a supervisor (docker stop, systemd, a scheduler), which
#: must see that the run did not finish: 143 (128 + 15) whether or not anything was saved.
EXIT_SIGINT_SAVED, EXIT_SIGINT_NOTHING_SAVED, EXIT_SIGTERM = 0, 130, 143


def _stopped(stop) -> int:
    name = signal.Signals(stop.signum).name
    if stop.saved:
        logger.info("Stopped by %s after saving the checkpoint and the export listed above.", name)
    else:
        logger.info("Stopped by %s before training started: nothing was learned, so nothing was saved.", name)
    if stop.signum == signal.SIGTERM:
        return EXIT_SIGTERM
    return EXIT_SIGINT_SAVED if stop.saved else EXIT_SIGINT_NOTHING_SAVED


def cli() -> None:
    """Console-script entry point (``learn``)."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
