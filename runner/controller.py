"""The training loop: a set of environments, one trainer per External brain, one Graph and one Session.

``TrainerController`` owns the run's ``tf.Graph`` and ``tf.Session``. It builds every trainer
(``runner.build``, each under its graph scope), the run's files (``runner.saver``: the
``Saver``, checkpoints, resuming, exports) and the initializer, then **finalizes the graph**, so
an op created inside the loop fails loudly instead of growing the graph. It drives the
environments and the trainers (all environments in lock step with ``schedule="sync"`` or one
environment; with two or more, by default, each environment on its own clock:
``_loop_overlapped``), advances the curriculum on global resets, saves
checkpoints (with the Python-side state that TensorFlow variables do not hold) and exports one
frozen ``.bytes`` with every brain under its scope.

The environments are an ``EnvironmentSet`` (one or ``--num-envs`` of them, local or on a Ray
cluster); the controller never sees how many: it gets one (``DecisionSteps``, ``TerminalSteps``)
per brain, which the agent processor (``runner.agent_processor``) turns into the
trainers' ``BrainInfo`` and their action rows back into ``ActionTuple``; it acts once per
brain over the agents of the environments that are ready, and, when some environment was reset
(its Academy was done, or it crashed and was restarted), tells the trainers which agents' episodes were cut.

Stopping (``learn.py`` maps these onto its exit status):

* SIGINT (Ctrl-C) or SIGTERM (``docker stop``, systemd, a cluster scheduler) requests a stop
  (``runner.stopping``), which the loop takes at a safe point: between steps (``check_stop``),
  at once while it waits for an environment (``interruptible``), right after a save; a long
  update ends early between minibatches. Once the trainers are built the run then saves a
  checkpoint and exports exactly once and raises ``Stop``, so the caller knows which signal
  ended the run and whether anything was saved. A second signal while saving is held back
  until the files are written (``shielded``): a save is never cut in half.
* If the environment fails for good it saves, exports and re-raises the ``UnityException``.
* A model whose weights or normaliser statistics are no longer finite (NaN/inf) is never saved
  or exported: the last good checkpoint stays the latest, and the run stops with
  ``PoisonedModelError`` saying so.
* A save or export that cannot be written (a full disk) stops the run with ``SaveFailedError``:
  every file goes through a temporary file and a rename, so the previous checkpoint and export
  stay whole, and ``--load`` resumes from them.

Resuming (``load``) restores the newest *whole* checkpoint (``RunSaver.restore``): a damaged
newer one is named in a warning and skipped; with none whole the run stops naming each one.
"""
from __future__ import annotations

import inspect
import logging
import os
import random
import signal
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from runner.agent_processor import AgentProcessor
from runner.background import BackgroundUpdates
from runner.build import build_trainers, write_resolved_parameters
from runner.checkpoints import SaveFailedError, StepInterval
from runner.collector import ExperienceCollector
from runner.devices import intra_op_threads, minibatch_work, placement
from runner.lessons import advance_curriculum, check_curriculum_between_resets, lesson_numbers
from runner.run_paths import RunPaths
from runner.saver import PoisonedModelError, RunSaver
from runner.settings.trainer_config import TrainerConfig
from runner.stopping import Stop, check_stop, clear_stop_request, interruptible, shielded
from runner.timers import Timers
from trainers.tf_utils import tf
from trainers.trainer.base import Trainer, UnityTrainerException
from trainers.trainer.brain_info import BrainInfo
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import team_base
from unityagents.exception import UnityException
from unityagents.vector.environment_set import EnvironmentSet

logger = logging.getLogger("unityagents")


class TrainerController:
    """Runs training (or inference) of every External brain of ``env``.

    :param env: an ``EnvironmentSet``, or one ``UnityEnvironment`` (wrapped in a set of one, whose
        failures end the run instead of restarting it).
    :param config: the validated trainer configuration.
    :param env_name: names the exported ``<env_name>.bytes``.
    :param run_path: sub-directory of ``model_dir`` and prefix of the summary directories.
    :param load: restore the latest checkpoint of ``model_dir/run_path`` and continue.
    :param train: update the models (else only act, and export nothing).
    :param keep_checkpoints: how many checkpoints to keep.
    :param save_freq: environment steps between checkpoints.
    :param lesson: curriculum lesson to start from (ignored with ``load``: the saved one is used).
    :param fast_simulation: ``train_mode`` for ``env.reset``.
    :param seed: seeds NumPy, Python's ``random`` and the graph.
    :param paths: where every file goes (``RunPaths``); by default ``RunPaths.legacy`` of
        ``model_dir``, ``summary_dir`` and ``run_path``.
    :param init_from: a checkpoint folder whose weights start this run (step counters from 0).
    :param checkpoint_interval: also save each time a learner's own agent steps pass a multiple of its
        interval, as Release 22 counts ``checkpoint_interval``: one number for every behaviour, or one per
        behaviour name (a name missing from it takes the one under "", else the smallest); None: ``save_freq``
        only. Such a save writes the run's TensorFlow checkpoint and ``<Behavior>-<step>.onnx`` of the
        behaviours due.
    :param keep_per_behavior: how many ``<Behavior>-<step>.onnx`` each behaviour keeps (Release 22's
        ``keep_checkpoints``, in the results layout); a name missing from it keeps ``keep_checkpoints``.
    :param device: where the graph runs: a Release 22 device name (``cpu``, ``cuda``, ``cuda:N``), a
        ``runner.devices.Placement``, or None for TensorFlow's choice (``runner.devices``).
    :param strict_export: an ONNX export that a Unity engine would refuse or warn about stops the run.
    """

    def __init__(self, env, config: TrainerConfig, env_name: str, run_path: str = "ppo",
                 model_dir: str = "models", summary_dir: str = "summaries", load: bool = False,
                 train: bool = True, keep_checkpoints: int = 5, save_freq: int = 50000, lesson: int = 0,
                 fast_simulation: bool = True, seed: int = 0, paths: Optional[RunPaths] = None,
                 init_from: Optional[str] = None,
                 checkpoint_interval: Union[None, int, Mapping[str, int]] = None,
                 device: Any = None, keep_per_behavior: Optional[Mapping[str, int]] = None,
                 strict_export: bool = False):
        self.placement = placement(device)
        self.env: EnvironmentSet = env if isinstance(env, EnvironmentSet) else EnvironmentSet.of(env)
        #: Steps -> the trainers' ``BrainInfo``; their action rows -> ``ActionTuple``.
        self.processor = AgentProcessor(self.env.brains, self.env.reports_last_observation)
        self.config = config
        self.env_name = export_name(env_name)
        self.run_path = run_path
        self.paths = paths or RunPaths.legacy(model_dir, summary_dir, run_path)
        self.model_path = self.paths.checkpoint_dir
        self.summary_dir = summary_dir
        self.init_from = init_from
        self._checkpoint_interval = checkpoint_interval
        self._intervals: Dict[str, StepInterval] = {}  # per learner: counts its own agent steps
        self.keep_per_behavior = dict(keep_per_behavior or {})
        self.load = load
        self.train = train
        self.keep_checkpoints = keep_checkpoints
        self.strict_export = strict_export
        self.save_freq = save_freq
        self.lesson = lesson
        self.fast_simulation = fast_simulation
        self.seed = seed
        self.global_step = 0
        self._curriculum_checked = 0  # learner step of the last between-resets curriculum check
        self.trainers: Dict[str, Trainer] = {}
        #: brain -> the brains whose batches its trainer is handed: its own, then its ``collection``'s links.
        self._reads: Dict[str, Tuple[str, ...]] = {}
        #: brain -> its trainer's experience collector (pairing, trajectories, episodes).
        self.collectors: Dict[str, ExperienceCollector] = {}
        self._waits = False
        #: Where the run's time goes, written to ``<model_path>/timers.json`` at each checkpoint and at the end.
        self.timers = Timers()
        self.env.timer = self.timers
        self.graph = tf.Graph()
        self.sess = None
        self.files: Optional[RunSaver] = None
        self.saver = None  # the files' tf.train.Saver, once built
        self._ready = False  # variables initialized or restored
        #: The updates of ``threaded`` trainers that run beside acting.
        self.background = BackgroundUpdates()

    # ---------------------------------------------------------------- set-up
    def _build(self) -> None:
        settings = self.config.settings_for_environment(self.env.brains, self.env.external_brain_names)
        os.makedirs(self.model_path, exist_ok=True)
        random.seed(self.seed)
        np.random.seed(self.seed)
        tf.set_random_seed(self.seed)
        works: Dict[bool, List[float]] = {True: [], False: []}  # by whether the step runs in the calling thread
        for name, s in settings.items():
            inline = getattr(s.trainer_class, "update_inline", True)
            works[inline].append(minibatch_work(s.parameters, self.env.brains.get(name)))
        self.sess = tf.Session(graph=self.graph,
                               config=self.placement.session_config(intra_op_threads(works[True], works[False])))
        with self.placement.scope(self.graph):
            self.trainers = build_trainers(self.sess, self.env.brains, self.env.external_brain_names, settings,
                                           self.paths, self.train, self.seed, built=self.trainers)
        self._reads = brains_read(self.trainers, self.env.brains)
        self.collectors = {name: ExperienceCollector.for_trainer(t) for name, t in self.trainers.items()}
        # Whether a step's experience may ever wait for the next send (``_experience_can_wait``).
        self._waits = (self.train and getattr(self.env.curriculum, "data", None) is None
                       and all(getattr(t, "acts_apart_from_experience", False) for t in self.trainers.values()))
        self.files = RunSaver(self.sess, self.paths, self.env_name, self.keep_checkpoints, self.timers, self.seed,
                              keep_per_behavior=self.keep_per_behavior, strict_export=self.strict_export)
        self.saver = self.files.saver
        init = tf.global_variables_initializer()
        if self.load:
            self.global_step = self.files.restore(self.trainers, self.env.curriculum, self.lesson)
        else:
            self.sess.run(init)
            self.env.curriculum.set_lesson_number(self.lesson)
            if self.init_from is not None:
                self.files.initialize_from(self.init_from)
            self._initialize_behaviors()
        check_stop()  # a signal during the build: nothing was learned yet, so nothing is saved
        self._ready = True
        self.graph.finalize()
        for t in self.trainers.values():
            logger.info("%s", t)
            # Reporters are made here, so that a broken stats writer plugin stops the run before its first step.
            writers = t.stats_reporter.writers
            logger.debug("%s: stats go to %s", t.brain_name, ", ".join(type(w).__name__ for w in writers))
        if self.train:  # what this run actually used, for reproducing it
            write_resolved_parameters(self.trainers, self.paths.parameters_path)

    def _initialize_behaviors(self) -> None:
        """Each behaviour with an ``init_path`` starts from that checkpoint's weights (over those of
        ``--initialize-from``); the teams of a self-play behaviour share their learner's."""
        done = set()
        for name, t in self.trainers.items():
            path, scope = getattr(t.settings, "init_path", None), t.graph_scope
            if path and scope is not None and scope not in done:
                done.add(scope)
                self.files.initialize_behavior(team_base(name), scope, path)

    # ---------------------------------------------------------------- checkpoints and export
    def save_model(self, behaviors: Optional[Sequence[str]] = None) -> str:
        """Write a checkpoint, its training state, an ONNX file per brain beside it (only ``behaviours``'
        when given), and ``timers.json`` (once every background update is done: never weights halfway
        through one)."""
        self._settle()
        return self.files.save(self.trainers, self.env.curriculum, self.global_step, behaviors)

    def _interval(self, name: str) -> StepInterval:
        if name not in self._intervals:
            every = self._checkpoint_interval
            if isinstance(every, Mapping):
                every = every.get(name, every.get(team_base(name), every.get("", min(every.values(), default=None))))
            self._intervals[name] = StepInterval(every)
        return self._intervals[name]

    def save_now(self, why: str) -> None:
        """Save a checkpoint and export at once, between steps (when training and built): ``why`` is logged."""
        if self.train and self._ready:
            logger.info("%s: saving the checkpoint and the export now.", why)
            self._save_and_export()

    def export(self) -> str:
        """Freeze every exporting trainer into ``<env_name>.bytes`` (and ONNX beside it)."""
        self._settle()
        return self.files.export(self.trainers, self.global_step)

    def _settle(self) -> None:
        """Wait for the background updates (raising their errors) and time them in ``timers.json``."""
        self.background.wait()
        if self.background.count:
            self.timers.record("background_update", self.background.seconds, self.background.count)

    # ---------------------------------------------------------------- loop
    def _keep_going(self) -> bool:
        return not self.train or any(still_trains(t) for t in self.trainers.values())

    def start_learning(self) -> None:
        """Build, restore or initialize, run until every learner reached ``max_steps``, save, export."""
        with self.graph.as_default():  # the Saver and FileWriters need graph mode, not eager
            self._start_learning()

    def _start_learning(self) -> None:
        try:
            with self.timers("build"):
                self._build()
            if self.train:
                for t in self.trainers.values():
                    t.write_tensorboard_text("Hyperparameters", t.parameters)
            self._run()
        except KeyboardInterrupt as e:
            stop = e if isinstance(e, Stop) else Stop(signal.SIGINT)
            if self.train and self._ready:
                logger.info("Learning was interrupted (%s). Please wait while the model is saved and exported.",
                            signal.Signals(stop.signum).name)
                # The scenes are closed first: no environment thread (sockets, gRPC) runs beside the save.
                self.env.close()
                try:
                    with shielded():
                        self._save_and_export()
                except Stop:  # a second signal during the save: it was held back until the save ended
                    pass
                stop.saved = True
            raise stop from None
        except (PoisonedModelError, SaveFailedError):
            raise
        except UnityException as e:
            if getattr(e, "ends_run", False):  # the environment ended the run after it was saved (save_now)
                raise
            if self.train and self._ready and self.global_step > 0:
                logger.error("The run failed; saving what was learned so far before exiting.")
                self._save_and_export()
            raise
        else:
            if self.train:
                try:
                    self._save_and_export()
                except Stop as stop:  # arrived during the final save, which completed first
                    stop.saved = True
                    raise
        finally:
            try:
                self.background.close()
            except Exception:  # noqa: BLE001 - the run is already ending with the error that stopped it
                logger.exception("A background update failed while the run was ending.")
            clear_stop_request()  # the updates have ended: a later run in this process starts afresh
            self.env.close()
            for t in self.trainers.values():
                t.close()
            if self.sess is not None:
                self.sess.close()

    def _save_and_export(self) -> None:
        with shielded():
            self._final_summaries()
            prefix = self.save_model()
            path = self.export()
        logger.info("Saved the checkpoint %s and the export %s.", prefix, path)

    def _final_summaries(self) -> None:
        """Each trainer writes what it gathered since its last summary (``write_final_summary``), once every
        background update is done, before the run's last save: a run that stops before a ``summary_freq``
        boundary still reports its reward."""
        self._settle()
        lesson = lesson_numbers(self.env.curriculum)
        for t in self.trainers.values():
            try:
                t.write_final_summary(lesson)
            except Exception:  # noqa: BLE001 - a summary must never cost the run its checkpoint
                logger.exception("%s: the final summary could not be written; saving goes on.", t.brain_name)

    def _run(self) -> None:
        if not self.train:
            logger.warning("Running without --train: the brains only act%s, until Ctrl-C.",
                           "" if self.load else " with untrained weights (add --load to use the last checkpoint)")
        advance_curriculum(self.env.curriculum, self.trainers)
        timers = self.timers
        with timers("env_reset"), interruptible():
            info = self.processor.infos(self.env.reset(train_mode=self.fast_simulation))
        started = time.time()
        if self.env.n_envs > 1 and getattr(self.env, "schedule", "sync") == "overlapped":
            self._loop_overlapped()
        else:
            self._loop_sync(info)
        lesson = lesson_numbers(self.env.curriculum)
        for t in self.trainers.values():  # the window that ends at max_steps is due only now
            t.write_summary(lesson)
        logger.info("Training finished after %d environment steps in %.0f s.", self.global_step,
                    time.time() - started)

    def _act(self, info: Dict[str, BrainInfo]):
        """Every trainer's decisions for its agents of ``info``: (actions, memories, values, outputs) by brain."""
        actions, memories, values, outputs = {}, {}, {}, {}
        with self.timers("inference"):
            for name, t in self.trainers.items():
                if len(info[name].agents) == 0:
                    continue
                actions[name], memories[name], values[name], outputs[name] = t.take_action(self._view(name, info))
        return actions, memories, values, outputs

    def _view(self, name: str, info: Dict[str, BrainInfo]) -> Dict[str, BrainInfo]:
        """The trainer of ``name``'s share of a step: its own brain's batch and its links' (``brains_read``)."""
        reads = self._reads.get(name)
        if reads is None:
            reads = self._reads[name] = brains_read({name: self.trainers[name]}, info)[name]
        return {brain: info[brain] for brain in reads}

    def _experience(self, name: str, before: Dict[str, BrainInfo], after: Dict[str, BrainInfo],
                    outputs: Optional[PolicyOutput]) -> None:
        """The trainer of ``name`` learns from its collector's experience of the step ``before`` -> ``after``."""
        experience = self.collectors[name].collect(self._view(name, before), self._view(name, after), outputs)
        self.trainers[name].process_experience(experience)

    def _end_episodes(self, agents: List[Any]) -> None:
        """Tell every collector and trainer which agents' episodes an environment reset cut."""
        for collector in self.collectors.values():
            collector.end_episode(agents)
        end_episodes(self.trainers, agents)

    def _update(self, t: Trainer) -> None:
        """Update ``t`` if it is ready: a ``threaded`` trainer whose update splits
        (``prepare_update``) in the background, while this thread goes on acting; else here."""
        if self.train and still_trains(t) and t.is_ready_update():
            with self.timers("update"):
                prepare = getattr(t, "prepare_update", None) if threaded(t) else None
                work = prepare() if prepare is not None else None
                if work is None:
                    t.update_model()
                else:
                    self.background.start(t, work)

    def _learn(self, lesson, deciding: Dict[str, int], threaded_too: bool = True) -> None:
        """After the experiences of a step: update the trainers that are ready (the ``threaded`` ones
        too, unless they updated while the environments simulated), write summaries, count steps."""
        for name, t in self.trainers.items():
            if threaded_too or not threaded(t):
                self._update(t)
            with self.timers("summaries"):
                t.write_summary(lesson)
            t.increment_step(deciding.get(name, 0))
            t.update_last_reward()

    def _after_step(self) -> None:
        self.global_step += 1
        for t in self.trainers.values():  # a trainer that needs fresh episodes (a team change)
            request = getattr(t, "reset_request", None)
            why = request() if request is not None else None
            if why:
                self.env.reset_all(why)
        if not self.env.resets_by_itself:
            self._curriculum_checked = check_curriculum_between_resets(
                self.env, self.trainers, self._curriculum_checked)
        due = self._saves_due(self.global_step, {name: t.get_step for name, t in self.trainers.items()})
        if due is True:
            self.save_model()
        elif due:
            self.save_model(due)

    def _saves_due(self, global_step: int, steps: Mapping[str, int], peek: bool = False) -> Union[bool, List[str]]:
        """What ``_after_step`` saves at these counts: every behaviour (True, each ``save_freq``
        environment steps), the behaviours whose ``checkpoint_interval`` has passed, or nothing
        (False, or no behaviour). ``peek`` asks about counts not reached yet, leaving the intervals' own
        counts where they are."""
        if not self.train:
            return False
        if self.save_freq > 0 and global_step % self.save_freq == 0:
            return True
        if self._checkpoint_interval is None:
            return False
        return [name for name, t in self.trainers.items() if t.is_learner
                and (self._interval(name).would_be_due if peek else self._interval(name).due)(steps[name])]

    def _loop_overlapped(self) -> None:
        """Step each environment as soon as its actions are computed (``EnvironmentSet.send``),
        and act on those that answered (``collect``) while the others simulate.

        An environment's transition is the info it was acted on, the trainers' outputs for its
        rows, and its answer; each is added per environment, so a trainer sees the same
        per-agent data as with the synchronous schedule. ``global_step`` counts environment
        steps over ``n_envs`` (one synchronous step of every environment is one).
        """
        env, timers = self.env, self.timers
        lesson = lesson_numbers(env.curriculum)
        acted: Dict[int, Any] = {}  # environment -> (its info, {brain: its rows of the outputs})
        ready = list(range(env.n_envs))
        env_steps = 0
        while self._keep_going():
            check_stop()  # a safe point: between steps
            if env.needs_idle_reset:  # an answered environment's Academy is done, or it was lost
                advance_curriculum(self.env.curriculum, self.trainers)
                with timers("env_reset"), interruptible():
                    restarted, ended = env.reset_idle()
                lesson = lesson_numbers(env.curriculum)
                self._end_episodes(ended)
                ready = sorted(set(ready).union(restarted) - set(env.in_flight))
            if ready:
                info = self.processor.infos(env.merged(ready))
                actions, memories, values, outputs = self._act(info)
                acted.update(_per_environment(self.processor, env, ready, info, outputs))
            with timers("env_step"):
                if ready:
                    action, memory, value = self.processor.decisions(info, actions, memories, values)
                    env.send(ready, action=action, memory=memory, value=value)
                with interruptible():
                    ready = env.collect()
            pass_environment_stats(self.env.stats, self.trainers)
            deciding = {name: 0 for name in self.trainers}
            with timers("buffer"):
                for i in ready:
                    before, rows = acted.pop(i)
                    after = self.processor.infos(env.merged([i]))
                    for name in self.trainers:
                        self._experience(name, before, after, rows.get(name))
                        deciding[name] += _deciding(before[name])
            if not ready:
                continue
            self._learn(lesson, deciding)
            for _ in range((env_steps + len(ready)) // env.n_envs - env_steps // env.n_envs):
                self._after_step()
            env_steps += len(ready)

    def _loop_sync(self, info: Dict[str, BrainInfo]) -> None:
        """Step every environment together: act over all agents, send, wait for every answer.

        A ``threaded`` trainer updates between the send and the answers, hidden behind the scenes'
        simulation, on the data of the step before (an on-policy one may see one stale step). A
        step's experience, its counting and its summaries wait until the next step is sent, where
        every trainer says that changes nothing it does (``_experience_can_wait``): then they too
        run while the scenes simulate, and the actions sent are the same as without waiting.
        """
        timers = self.timers
        lesson = lesson_numbers(self.env.curriculum)
        waiting = None  # the step whose experience is handed over once the next step is sent
        try:
            while self._keep_going():
                check_stop()  # a safe point: between steps
                if self.env.needs_reset:  # some environment's Academy is done, or it was lost
                    if waiting is not None:
                        step, waiting = waiting, None
                        self._finish_step(*step)
                    advance_curriculum(self.env.curriculum, self.trainers)
                    with timers("env_reset"), interruptible():
                        steps, ended = self.env.reset_finished()
                        info = self.processor.infos(steps)
                    lesson = lesson_numbers(self.env.curriculum)
                    self._end_episodes(ended)
                actions, memories, values, outputs = self._act(info)
                with timers("env_step"):  # a step's waiting experience and a threaded update are timed inside it
                    action, memory, value = self.processor.decisions(info, actions, memories, values)
                    self.env.send_step(action=action, memory=memory, value=value)
                    if waiting is not None:
                        step, waiting = waiting, None
                        self._finish_step(*step)
                    for t in self.trainers.values():  # the threaded ones learn while the environments simulate
                        if threaded(t):
                            self._update(t)
                    with interruptible():
                        answer = self.env.receive_step()
                    new_info = self.processor.infos(answer)
                pass_environment_stats(self.env.stats, self.trainers)
                if self._experience_can_wait(info, new_info):
                    waiting = (info, new_info, outputs, lesson)
                else:
                    self._finish_step(info, new_info, outputs, lesson)
                info = new_info
        finally:  # a stop between steps: the step waiting is learnt from before the run saves
            if waiting is not None:
                self._finish_step(*waiting)

    def _finish_step(self, before: Dict[str, BrainInfo], after: Dict[str, BrainInfo],
                     outputs: Dict[str, Any], lesson: Any) -> None:
        """The trainers learn from the step ``before`` -> ``after``: experience, updates, summaries, counts."""
        with self.timers("buffer"):
            for name in self.trainers:
                self._experience(name, before, after, outputs.get(name))
        self._learn(lesson, {name: _deciding(before[name]) for name in self.trainers}, threaded_too=False)
        self._after_step()

    def _experience_can_wait(self, before: Dict[str, BrainInfo], after: Dict[str, BrainInfo]) -> bool:
        """Whether the step ``before`` -> ``after`` may be learnt from after the next step is sent.

        Only where nothing of it can change the next action: no curriculum can reset the scenes
        between steps, and every trainer says so for its share (``Trainer.experience_can_wait``: no
        update, summary or ``max_steps`` can come of it). Nor where a save comes of it: acting on
        the next step may move what the checkpoint holds (a normaliser's running moments, a trainer's
        random generator), so the saved files would differ from those of a step learnt from before
        the next action.
        """
        if not self._waits:
            return False
        steps = {name: t.get_step + _deciding(before[name]) for name, t in self.trainers.items()}
        if self._saves_due(self.global_step + 1, steps, peek=True):
            return False
        for name, t in self.trainers.items():
            collector = self.collectors[name]
            held = collector.held_steps() + len(before[name].agents)
            if not t.experience_can_wait(held, _deciding(before[name]), collector.may_bootstrap(after[name])):
                return False
        return True


def export_name(env_name: str) -> str:
    """The build's file name without its folder and extension: the exported ``<name>.bytes``."""
    name = os.path.basename(os.path.normpath(env_name.strip()))
    for ext in (".app", ".exe", ".x86_64", ".x86"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def brains_read(trainers: Dict[str, Trainer], brains: Dict[str, Any]) -> Dict[str, Tuple[str, ...]]:
    """Each trainer's own brain, then the brains its ``collection`` links; a link to a brain the scene
    does not have is refused before the first step."""
    reads = {}
    for name, t in trainers.items():
        links = tuple(t.collection.linked_brains)
        missing = [b for b in links if b not in brains]
        if missing:
            raise UnityTrainerException(
                f"The trainer of brain '{name}' ({type(t).__name__}) reads the brain(s) {missing} through "
                f"its collection's linked_brains, but the scene has only {sorted(brains)}. Link it to a brain "
                "of the scene, or make linked_brains hold the names the trainer was configured with.")
        reads[name] = (name, *[b for b in links if b != name])
    return reads


def end_episodes(trainers: Dict[str, Trainer], agents: List[Any]) -> None:
    """Tell every trainer which agents' episodes an environment reset cut."""
    for t in trainers.values():
        if _takes_agents(t.end_episode):
            t.end_episode(agents)
        else:  # a plugin written for the one-environment interface: it forgets every agent
            t.end_episode()


def pass_environment_stats(stats: Dict[str, List[Any]], trainers: Dict[str, Trainer]) -> None:
    """A scene's custom stats reach every learner's summaries."""
    for key, entries in stats.items():
        for t in trainers.values():
            if t.is_learner:
                for value, aggregation in entries:
                    t.add_stat(key, value, aggregation)


def _takes_agents(method) -> bool:
    """Whether ``end_episode`` accepts the agents argument (plugins may predate it)."""
    try:
        return len(inspect.signature(method).parameters) >= 1
    except (TypeError, ValueError):
        return False


def _per_environment(processor: AgentProcessor, env: EnvironmentSet, ready: List[int], info: Dict[str, BrainInfo],
                     outputs: Dict[str, Any]) -> Dict[int, Any]:
    """Environment -> (its own info, {brain: its rows of the outputs}) of one inference over ``ready``,
    whose agents the merged info lists environment by environment."""
    singles = {i: processor.infos(env.merged([i])) for i in ready} if len(ready) > 1 else {ready[0]: info}
    start = {name: 0 for name in outputs}
    acted = {}
    for i in ready:
        rows = {}
        for name in outputs:
            n = len(singles[i][name].agents)
            rows[name] = _output_rows(outputs[name], start[name], start[name] + n, len(info[name].agents))
            start[name] += n
        acted[i] = (singles[i], rows)
    return acted


def _output_rows(outputs: Any, lo: int, hi: int, n: int) -> Any:
    """Rows ``lo:hi`` of a trainer's outputs for ``n`` agents (one environment's share of an inference)."""
    if outputs is None or (lo == 0 and hi == n):
        return outputs
    if isinstance(outputs, PolicyOutput):
        def cut(x):
            return None if x is None else x[lo:hi]
        return PolicyOutput(cut(outputs.actions), {k: v[lo:hi] for k, v in outputs.fields.items()},
                            cut(outputs.memories), cut(outputs.values), cut(outputs.sent))
    raise UnityTrainerException(
        f"A trainer's take_action returned outputs of type {type(outputs).__name__}, which the overlapped "
        "schedule cannot split per environment (it splits a trajectory.PolicyOutput). Return a PolicyOutput, "
        "or step the environments together with --schedule sync.")


def still_trains(t: Trainer) -> bool:
    """Whether ``t`` keeps the run going and updates: a learner short of its ``max_steps``."""
    return t.is_learner and t.get_step < t.get_max_steps


def threaded(t: Trainer) -> bool:
    """Whether ``t`` updates while the environments simulate (its ``threaded`` setting)."""
    return bool(getattr(getattr(t, "settings", None), "threaded", False))


def _deciding(info: BrainInfo) -> int:
    """Agents that acted this step: all of them for API-2; over the modern protocol, not the rows
    that only report an episode's end."""
    requested = getattr(info, "decision_requested", None)
    return len(info.agents) if requested is None else int(np.count_nonzero(requested))
