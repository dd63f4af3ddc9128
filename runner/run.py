"""Start a run from its options, and end it with the exit status the README documents.

Both front ends call ``run`` with a function that builds their ``RunOptions``: building them
happens after the signal handlers are installed, so a Ctrl-C during the checks ends as cleanly as
one during training, and a refused option is reported like any other error of the run.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any, Callable, Dict

from runner.options import RunOptions
from unityagents import UnityEnvironment, UnityEnvironmentException, UnityException
from unityagents.editor import EXPORT_NAME as EDITOR_EXPORT_NAME
from unityagents.vector.environment_set import EnvironmentSet
from unityagents.vector.restart import RestartPolicy

logger = logging.getLogger("unityagents")

#: Exit status after a signal. Ctrl-C is the user's way to end a run early: 0 once the model is
#: saved and exported. SIGTERM comes from a supervisor (docker stop, systemd, a scheduler), which
#: must see that the run did not finish: 143 (128 + 15) whether or not anything was saved.
EXIT_SIGINT_SAVED, EXIT_SIGINT_NOTHING_SAVED, EXIT_SIGTERM = 0, 130, 143


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
        return exit_status(e if isinstance(e, Stop) else Stop(signal.SIGINT))
    return 0


def import_in_background() -> threading.Thread:
    """Start importing TensorFlow (``trainers.tf_utils.import_tensorflow``) on a daemon thread.

    Its first use on the main thread waits for the import to finish. An import that fails here is
    left for that first use to raise again, where the run reports it like any other error.
    """
    from trainers.tf_utils import import_tensorflow

    def quietly() -> None:
        try:
            import_tensorflow()
        except BaseException:  # noqa: BLE001 (raised again where the main thread first needs TensorFlow)
            pass

    thread = threading.Thread(target=quietly, name="import-tensorflow", daemon=True)
    thread.start()
    return thread


def exit_status(stop) -> int:
    """The exit status of a run ended by ``stop`` (a ``runner.stopping.Stop``), said in one line."""
    name = signal.Signals(stop.signum).name
    if stop.saved:
        logger.info("Stopped by %s after saving the checkpoint and the export listed above.", name)
    else:
        logger.info("Stopped by %s before training started: nothing was learned, so nothing was saved.", name)
    if stop.signum == signal.SIGTERM:
        return EXIT_SIGTERM
    return EXIT_SIGINT_SAVED if stop.saved else EXIT_SIGINT_NOTHING_SAVED


def train(opts: RunOptions) -> None:
    """Launch the environments of ``opts`` and run the trainer controller until it ends.

    TensorFlow imports on a thread of its own (``import_in_background``) while the environments
    start: a Unity build's start-up and the handshake are waits, so the two overlap.
    """
    from runner.controller import TrainerController
    from runner.devices import placement
    from runner.stopping import interruptible

    device = placement(opts.device)  # a GPU that is not there is refused before any environment starts
    import_in_background()

    log_dir = opts.log_dir or os.path.abspath(os.path.join(opts.checkpoint_dir(), "logs"))

    def env_kwargs(i: int) -> Dict[str, Any]:
        return dict(file_name=opts.env, worker_id=opts.worker_id + i, base_port=opts.base_port, seed=opts.seed + i,
                    timeout_wait=opts.timeout, env_args=opts.env_args, log_dir=log_dir, **opts.protocol_options)

    editor = None
    restarts = opts.restarts
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

    with interruptible():  # a stop requested so far, or while the environments start (or wait for Play), ends it
        env = EnvironmentSet(launch, opts.num_envs, curriculum=opts.curriculum, restart_policy=restarts,
                             no_decision_seconds=opts.timeout, schedule=opts.schedule)
    try:
        controller = TrainerController(
            env, opts.config, env_name=opts.env if opts.env is not None else EDITOR_EXPORT_NAME,
            run_path=opts.run_path, load=opts.load,
            train=opts.train, keep_checkpoints=opts.keep_checkpoints, save_freq=opts.save_freq, lesson=opts.lesson,
            fast_simulation=not opts.slow, seed=opts.seed, paths=opts.paths, init_from=opts.init_from,
            checkpoint_interval=opts.checkpoint_interval, keep_per_behavior=opts.keep_per_behavior, device=device,
            strict_export=opts.strict_export)
    except BaseException:
        env.close()
        raise
    if editor is not None:  # the Editor left play mode: the run is saved before waiting for Play again
        editor.on_leave = lambda: controller.save_now("The Unity Editor left play mode")
    if hasattr(opts.curriculum, "bind"):  # criteria that name a behaviour read its trainer
        opts.curriculum.bind(lambda: controller.trainers)
    controller.start_learning()
