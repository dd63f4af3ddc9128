"""The training loop: a set of environments, one trainer per External brain, one Graph and one Session.

``TrainerController`` owns the run's ``tf.Graph`` and ``tf.Session``. It builds every trainer
(each under its graph scope), the ``Saver`` and the initializer, then **finalizes the graph**, so
an op created inside the loop fails loudly instead of growing the graph. It drives the
environments and the trainers (all environments in lock step with ``schedule="sync"`` or one
environment; with two or more, by default, each environment on its own clock:
``_loop_overlapped``), advances the curriculum on global resets, saves
checkpoints (with the Python-side state that TensorFlow variables do not hold) and exports one
frozen ``.bytes`` with every brain under its scope.

The environments are an ``EnvironmentSet`` (one or ``--num-envs`` of them, local or on a Ray
cluster); the controller never sees how many: it gets one ``BrainInfo`` per brain, acts once per
brain over the agents of the environments that are ready, and, when some environment was reset
(its Academy was done, or it crashed and was restarted), tells the trainers which agents' episodes were cut.

Stopping (``learn.py`` maps these onto its exit status):

* SIGINT (Ctrl-C) or SIGTERM (``docker stop``, systemd, a cluster scheduler) at any point raises
  ``Stop``; once the trainers are built the run saves a checkpoint and exports exactly once, then
  re-raises it, so the caller knows which signal ended the run and whether anything was saved. A
  second signal while saving is held back until the files are written (``shielded``): a save is
  never cut in half.
* If the environment fails for good it saves, exports and re-raises the ``UnityException``.
* A model whose weights or normaliser statistics are no longer finite (NaN/inf) is never saved
  or exported: the last good checkpoint stays the latest, and the run stops with
  ``PoisonedModelError`` saying so.
* A save or export that cannot be written (a full disk) stops the run with ``SaveFailedError``:
  every file goes through a temporary file and a rename, so the previous checkpoint and export
  stay whole, and ``--load`` resumes from them.

Resuming (``load``) restores the newest *whole* checkpoint (``trainers.checkpoints``): a damaged
newer one is named in a warning and skipped; with none whole the run stops naming each one.
"""
from __future__ import annotations

import contextlib
import glob
import inspect
import json
import logging
import os
import random
import re
import signal
import time
from typing import Any, Dict, List, Optional

import numpy as np
import yaml

from trainers.checkpoints import STATE_SUFFIX, SaveFailedError, checkpoint_damage, checkpoint_prefixes
from trainers.export.frozen_graph import contract_inputs, export_graph, write_atomically
from trainers.export.onnx_model import export_onnx, onnx_file_stem
from trainers.run_paths import RunPaths
from trainers.settings.trainer_config import BrainSettings, TrainerConfig
from trainers.tf_utils import tf
from trainers.timers import Timers
from trainers.trainer.base import Trainer, UnityTrainerException
from trainers.trainer.summaries import lesson_tags
from trainers.trainer.trajectory import PolicyOutput
from unityagents.brain import BrainInfo, team_base
from unityagents.exception import UnityException
from unityagents.vector.environment_set import EnvironmentSet

logger = logging.getLogger("unityagents")


class Stop(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. ``saved`` tells whether the run saved and exported before stopping."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.saved = False


class PoisonedModelError(UnityTrainerException):
    """The model's weights or statistics became NaN or infinite; nothing was saved over the last good checkpoint."""


_shield = {"depth": 0, "deferred": None}


def _on_signal(signum, frame) -> None:
    if _shield["depth"]:
        if _shield["deferred"] is None:
            _shield["deferred"] = signum
        logger.warning("%s received while saving: the save finishes first, then the run stops.",
                       signal.Signals(signum).name)
        return
    raise Stop(signum)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise ``Stop`` in the main thread (call it from there, once, early)."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


@contextlib.contextmanager
def shielded():
    """Hold SIGINT/SIGTERM back while files are written; a held signal is raised right after."""
    _shield["depth"] += 1
    try:
        yield
    finally:
        _shield["depth"] -= 1
        if _shield["depth"] == 0 and _shield["deferred"] is not None:
            signum, _shield["deferred"] = _shield["deferred"], None
            raise Stop(signum)


def graph_scope_for(brain_name: str, n_external_brains: int) -> str:
    """The seed's rule: '' with one External brain, else the name with non-alphanumerics as '-'."""
    if n_external_brains <= 1:
        return ""
    return re.sub(r"[^0-9a-zA-Z]+", "-", brain_name)


def latest_checkpoint(model_path: str) -> Optional[str]:
    """The newest checkpoint of a run, whole or not (``--load`` checks it and falls back)."""
    found = checkpoint_prefixes(model_path)
    return found[0] if found else None


def write_text_atomically(path: str, text: str) -> None:
    """Write, then rename: a crash leaves the old file or the new one, never half of one."""
    write_atomically(path, text.encode("utf-8"))


def write_json_atomically(path: str, data: Dict[str, Any]) -> None:
    write_text_atomically(path, json.dumps(data, indent=2))


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
    :param checkpoint_interval: also save each time the first learner's agent steps pass a multiple
        of this (Release 22 counts ``checkpoint_interval`` in trainer steps); None: ``save_freq`` only.
    """

    def __init__(self, env, config: TrainerConfig, env_name: str, run_path: str = "ppo",
                 model_dir: str = "models", summary_dir: str = "summaries", load: bool = False,
                 train: bool = True, keep_checkpoints: int = 5, save_freq: int = 50000, lesson: int = 0,
                 fast_simulation: bool = True, seed: int = 0, paths: Optional[RunPaths] = None,
                 init_from: Optional[str] = None, checkpoint_interval: Optional[int] = None):
        self.env: EnvironmentSet = env if isinstance(env, EnvironmentSet) else EnvironmentSet.of(env)
        self.config = config
        self.env_name = os.path.basename(os.path.normpath(env_name.strip()))
        for ext in (".app", ".exe", ".x86_64", ".x86"):
            if self.env_name.endswith(ext):
                self.env_name = self.env_name[: -len(ext)]
        self.run_path = run_path
        self.paths = paths or RunPaths.legacy(model_dir, summary_dir, run_path)
        self.model_path = self.paths.checkpoint_dir
        self.summary_dir = summary_dir
        self.init_from = init_from
        self.checkpoint_interval = checkpoint_interval
        self._checkpointed_at: Optional[int] = None  # learner step of the last interval checkpoint
        self.load = load
        self.train = train
        self.keep_checkpoints = keep_checkpoints
        self.save_freq = save_freq
        self.lesson = lesson
        self.fast_simulation = fast_simulation
        self.seed = seed
        self.global_step = 0
        self._curriculum_checked = 0  # learner step of the last between-resets curriculum check
        self.trainers: Dict[str, Trainer] = {}
        #: Where the run's time goes, written to ``<model_path>/timers.json`` at each checkpoint and at the end.
        self.timers = Timers()
        self.env.timer = self.timers
        self.graph = tf.Graph()
        self.sess = None
        self.saver = None
        self._ready = False  # variables initialized or restored

    # ---------------------------------------------------------------- set-up
    def _build(self) -> None:
        settings = self.config.settings_for_environment(self.env.brains, self.env.external_brain_names)
        n_ext = len(self.env.external_brain_names)
        os.makedirs(self.model_path, exist_ok=True)
        random.seed(self.seed)
        np.random.seed(self.seed)
        tf.set_random_seed(self.seed)
        self.sess = tf.Session(graph=self.graph)
        # Trainers that copy another brain's model (the ghost) are built after it.
        order = sorted(settings.values(), key=lambda s: "brain_to_copy" in s.parameters)
        for i, s in enumerate(order):
            if s.brain_name in self.trainers:  # a team of a self-play behaviour, built with the first team
                continue
            if s.parameters.get("self_play"):
                self.trainers.update(self._make_team_trainers(s, settings, n_ext, i))
            else:
                self.trainers[s.brain_name] = self._make_trainer(s, settings, n_ext, i)
        self.trainers = {b: self.trainers[b] for b in self.env.external_brain_names}
        self.saver = tf.train.Saver(max_to_keep=self.keep_checkpoints)
        floats = [v for v in tf.global_variables() if v.dtype.base_dtype in (tf.float32, tf.float64)]
        with tf.name_scope("checks"):  # one op, built before finalize, run before each save
            self._all_finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.is_finite(v)) for v in floats])) \
                if floats else tf.constant(True)
        self._non_finite = {v.name: tf.logical_not(tf.reduce_all(tf.is_finite(v))) for v in floats}
        init = tf.global_variables_initializer()
        if self.load:
            self._restore()
        else:
            self.sess.run(init)
            self.env.curriculum.set_lesson_number(self.lesson)
            if self.init_from is not None:
                self._initialize_from(self.init_from)
        self._ready = True
        self.graph.finalize()
        for t in self.trainers.values():
            logger.info("%s", t)
        if self.train:  # what this run actually used, for reproducing it
            resolved = {name: dict(t.trainer_parameters) for name, t in self.trainers.items()}
            path = self.paths.parameters_path
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_text_atomically(path, yaml.safe_dump(resolved, sort_keys=True))

    def _make_trainer(self, s: BrainSettings, settings: Dict[str, BrainSettings], n_ext: int, index: int) -> Trainer:
        scope = graph_scope_for(s.brain_name, n_ext)
        summary = self.paths.summary_dir(s.brain_name, scope)
        params = dict(s.parameters, graph_scope=scope, summary_path=summary)
        copied = params.get("brain_to_copy")
        if copied is not None:
            params["original_brain_parameters"] = dict(settings[copied].parameters,
                                                       graph_scope=graph_scope_for(copied, n_ext))
        return s.trainer_class(self.sess, self.env.brains, s.brain_name, params, self.train,
                               seed=self.seed + index)

    def _make_team_trainers(self, s: BrainSettings, settings: Dict[str, BrainSettings], n_ext: int,
                            index: int) -> Dict[str, Trainer]:
        """One learner for every ``?team=N`` behaviour of ``s``'s base name (``trainers.ghost.team_trainer``),
        scoped and summarised under the base name."""
        from trainers.ghost.team_trainer import build_team_trainers

        base = team_base(s.brain_name)
        teams = [name for name in settings if team_base(name) == base]
        without = [name for name in teams if not settings[name].parameters.get("self_play")]
        if without:
            raise UnityTrainerException(
                f"Behaviour '{base}': {', '.join(without)} has settings without the self_play block of "
                f"{s.brain_name}, but the teams of one behaviour train together. Give the settings once, under "
                f"'{base}', or the same self_play block to every team.")
        scope = graph_scope_for(base, max(n_ext, 2))
        params = dict(s.parameters, graph_scope=scope, summary_path=self.paths.summary_dir(base, scope))
        return build_team_trainers(self.sess, self.env.brains, teams, params, s.trainer_class, self.train,
                                   seed=self.seed + index)

    def _initialize_from(self, folder: str) -> None:
        """Weights (and optimizer moments) of another run's latest checkpoint; the steps stay 0."""
        ckpt = latest_checkpoint(folder)
        if ckpt is None:
            raise UnityTrainerException(
                f"--initialize-from: no checkpoint was found in {folder}. Name a run that saved one.")
        logger.info("Initializing the model from %s (step counters start from 0)", ckpt)
        try:
            self.saver.restore(self.sess, ckpt)
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
            raise UnityTrainerException(
                f"--initialize-from: the checkpoint {ckpt} does not match this configuration (a brain, a "
                f"network size or a trainer type changed?): {e.message.splitlines()[0]}") from None

    def _restore(self) -> None:
        candidates = checkpoint_prefixes(self.model_path)
        if not candidates:
            raise UnityTrainerException(
                f"--load: no checkpoint was found in {self.model_path}. Check --run-path (it names the "
                "folder under models/), or start without --load.")
        damaged = []
        for ckpt in candidates:
            why = checkpoint_damage(ckpt)
            if why is None:
                why = self._restore_from(ckpt)
            if why is None:
                break
            damaged.append((ckpt, why))
            logger.warning("--load: the checkpoint %s is damaged (%s); trying the one before it.", ckpt, why)
        else:
            raise UnityTrainerException(
                f"--load: no checkpoint in {self.model_path} is whole, so there is nothing to resume from:\n"
                + "\n".join(f"  {c}: {why}" for c, why in damaged)
                + "\nRestore the folder from a backup, or start a new run without --load (another --run-path "
                  "keeps these files).")
        if damaged:
            logger.warning("--load: resuming from %s, the newest whole checkpoint; %d newer one(s) were damaged "
                           "and are left on disk as they are until a save of the same step replaces them (%s).",
                           ckpt, len(damaged), ", ".join(os.path.basename(c) for c, _ in damaged))
        else:
            logger.info("Loading the model from %s", ckpt)
        # Earlier checkpoints stay under --keep-checkpoints, whatever the number of resumes.
        older = [c for c in candidates[candidates.index(ckpt):] if os.path.isfile(c + ".index")]
        self.saver.recover_last_checkpoints(older[::-1])
        with open(ckpt + STATE_SUFFIX) as f:  # checkpoint_damage read it: it parses
            state = json.load(f)
        self.global_step = int(state.get("global_step", 0))
        for name, t in self.trainers.items():
            if name in state.get("trainers", {}):
                t.set_state(state["trainers"][name])
        if "curriculum" in state:
            self.env.curriculum.set_state(state["curriculum"])
            if self.env.curriculum.data is not None:
                logger.info("Curriculum resumed at lesson %d.", self.env.curriculum.lesson_number)
        if self.lesson:
            logger.warning("--lesson %d is ignored with --load: the run continues from its saved lesson.",
                           self.lesson)

    def _restore_from(self, ckpt: str) -> Optional[str]:
        """Restore ``ckpt``; why it is damaged if its data does not restore (a configuration mismatch raises)."""
        try:
            self.saver.restore(self.sess, ckpt)
        except (tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
            return f"its data does not restore ({type(e).__name__}: {e.message.splitlines()[0]})"
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
            raise UnityTrainerException(
                f"--load: the checkpoint {ckpt} does not match this configuration (a brain, a network size "
                f"or a trainer type changed?): {e.message.splitlines()[0]}") from None
        return None

    # ---------------------------------------------------------------- checkpoints and export
    @contextlib.contextmanager
    def _writing(self, what: str):
        """Turn a failed write (a full disk, a lost mount) into ``SaveFailedError`` naming what is still intact."""
        try:
            yield
        except (OSError, tf.errors.OpError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else getattr(e, "message", str(e))
            last = latest_checkpoint(self.model_path)
            bytes_path = os.path.join(self.paths.export_dir, self.env_name + ".bytes")
            raise SaveFailedError(
                f"Could not write {what} in {self.model_path}: {str(reason).splitlines()[0]}. Nothing was "
                "replaced: every file is written to a temporary file and renamed, so the previous checkpoint "
                f"({last or 'none yet'}) and export ({bytes_path if os.path.isfile(bytes_path) else 'none yet'}) "
                "are intact. Free some space (or fix the folder), then resume with --load (--resume with "
                "unityagents-learn).") from None

    def _check_finite(self) -> None:
        """Refuse to save or export a model with NaN/inf weights or normaliser statistics."""
        if self.sess.run(self._all_finite):
            return
        bad = [name for name, op in self._non_finite.items() if self.sess.run(op)]
        last = latest_checkpoint(self.model_path)
        raise PoisonedModelError(
            f"The model became non-finite (NaN or infinity) by environment step {self.global_step}, in "
            f"{len(bad)} variable(s): {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}. It was not saved or "
            "exported: " + (f"the last good checkpoint {last} stays the latest, and --load resumes from it."
                            if last else "no checkpoint had been written yet.")
            + " Lower learning_rate, or check the environment's states and rewards.")

    def save_model(self) -> str:
        """Write a checkpoint (weights + optimizer + normalisers), the training state and an ONNX file
        per brain (``<Brain>-<step>.onnx``) beside it, and ``timers.json``."""
        self._check_finite()
        with shielded(), self.timers("checkpoint"), self._writing(f"the checkpoint of step {self.global_step}"):
            prefix = self._save_model()
            onnx_paths = self._export_onnx(f"-{self.global_step}")
            self._after_save(onnx_paths, prefix, final=False)
        self._write_timers()
        return prefix

    def _after_save(self, onnx_paths: List[str], prefix: Optional[str], final: bool) -> None:
        steps = {name: t.get_step for name, t in self.trainers.items()}
        rewards = {name: t.get_last_reward for name, t in self.trainers.items()}
        self.paths.after_save(steps, onnx_paths, prefix, final, rewards)

    def _write_timers(self) -> None:
        with self._writing("timers.json"):
            os.makedirs(os.path.dirname(self.paths.timers_path) or ".", exist_ok=True)
            self.timers.write_json(self.paths.timers_path)

    def _export_onnx(self, suffix: str = "") -> List[str]:
        """ONNX beside the ``.bytes``; a graph tf2onnx cannot convert (a plugin's) is logged, not fatal."""
        try:
            paths = []
            for t in self.trainers.values():
                folder = self.paths.step_onnx_dir(t.brain_name) if suffix else self.paths.export_dir
                os.makedirs(folder, exist_ok=True)
                paths += export_onnx(self.sess, [t], folder, suffix=suffix)
            return paths
        except OSError:  # a full disk is not the converter's fault: the run must stop
            raise
        except Exception as e:  # the .bytes export stands on its own; say why ONNX is missing
            logger.error("The ONNX export failed (%s: %s); the .bytes export is not affected.", type(e).__name__, e)
            return []

    def _save_model(self) -> str:
        prefix = os.path.join(self.model_path, f"model-{self.global_step}.cptk")
        state = {
            "global_step": self.global_step,
            "trainers": {name: t.get_state() for name, t in self.trainers.items()},
            "curriculum": self.env.curriculum.get_state(),
            "seed": self.seed,
        }
        write_json_atomically(prefix + STATE_SUFFIX, state)  # before the checkpoint index points at it
        self.saver.save(self.sess, prefix)
        write_atomically(os.path.join(self.model_path, "raw_graph_def.pb"),
                         self.graph.as_graph_def().SerializeToString())
        kept = {os.path.abspath(p) for p in self.saver.last_checkpoints}
        for path in glob.glob(os.path.join(self.model_path, "model-*.cptk" + STATE_SUFFIX)):
            if os.path.abspath(path[: -len(STATE_SUFFIX)]) not in kept:
                os.unlink(path)
        kept_steps = {p.rsplit("model-", 1)[1].split(".cptk")[0] for p in kept}
        brains = [onnx_file_stem(t.brain_name) for t in self.trainers.values()]
        for t, brain in zip(self.trainers.values(), brains):  # <Brain>-<step>.onnx of checkpoints no longer kept
            folder = self.paths.step_onnx_dir(t.brain_name)
            for path in glob.glob(os.path.join(glob.escape(folder), glob.escape(brain) + "-*.onnx")):
                name = os.path.basename(path)[: -len(".onnx")]
                step = name[len(brain) + 1:]
                if step.isdigit() and step not in kept_steps and name not in brains:
                    os.unlink(path)
        logger.info("Saved the model at step %d to %s", self.global_step, prefix)
        return prefix

    def export(self) -> str:
        """Freeze every exporting trainer into ``<model_path>/<env_name>.bytes``."""
        nodes: List[str] = []
        inputs: List[str] = []
        scopes: List[str] = []
        for t in self.trainers.values():
            if t.graph_scope is None:
                continue
            prefix = t.graph_scope + "/" if t.graph_scope else ""
            scopes.append(prefix)
            nodes += [prefix + n for n in t.export_nodes()]
            inputs += contract_inputs(self.graph, prefix)
        path = os.path.join(self.paths.export_dir, self.env_name + ".bytes")
        self._check_finite()
        with shielded(), self.timers("export"), self._writing(f"the export {os.path.basename(path)}"):
            export_graph(self.sess, nodes, path, keep_nodes=inputs)
            onnx_paths = self._export_onnx()
            self._after_save(onnx_paths, None, final=True)
        if len(scopes) > 1:
            logger.info("List of available scopes :\n%s", "\n".join("\t" + s for s in scopes))
        logger.info("List of nodes exported :\n%s", "\n".join("\t" + n for n in nodes))
        logger.info("Exported the graph to %s", path)
        for p in onnx_paths:
            logger.info("Exported the ONNX model %s", p)
        self._write_timers()
        return path

    # ---------------------------------------------------------------- loop
    def _progress(self) -> Optional[float]:
        curriculum = self.env.curriculum
        learners = [t for t in self.trainers.values() if t.is_learner]
        if curriculum.measure == "progress" and learners:
            return float(np.mean([min(t.get_step / t.get_max_steps, 1.0) for t in learners]))
        if curriculum.measure == "reward":
            return float(sum(t.get_last_reward for t in learners))
        return None

    def _keep_going(self) -> bool:
        return not self.train or any(t.should_still_train for t in self.trainers.values() if t.is_learner)

    def _advance_curriculum(self) -> None:
        """At each environment reset: maybe move to the next lesson (it reaches the environments
        at their next reset)."""
        curriculum = self.env.curriculum
        if curriculum.increment_lesson(self._progress()):
            for t in self.trainers.values():
                t.write_scalars(lesson_tags(lesson_numbers(curriculum)))

    def _check_curriculum_between_resets(self) -> None:
        """Modern builds have no Academy-wide done, so the curriculum is checked at each summary of
        the first learner instead; a new lesson resets every environment with its parameters."""
        learner = next((t for t in self.trainers.values() if t.is_learner), None)
        if learner is None or self.env.curriculum.data is None:
            return
        freq = int(learner.trainer_parameters.get("summary_freq", 10000))
        if learner.get_step // freq > self._curriculum_checked // freq:
            self._curriculum_checked = learner.get_step
            before = self.env.curriculum.lesson_number
            self._advance_curriculum()
            if self.env.curriculum.lesson_number != before:
                self.env.reset_all(f"the curriculum moved to lesson {self.env.curriculum.lesson_number}")

    def _interval_checkpoint_due(self) -> bool:
        learner = next((t for t in self.trainers.values() if t.is_learner), None)
        if not self.checkpoint_interval or learner is None:
            return False
        if self._checkpointed_at is None:
            self._checkpointed_at = learner.get_step
        if learner.get_step // self.checkpoint_interval > self._checkpointed_at // self.checkpoint_interval:
            self._checkpointed_at = learner.get_step
            return True
        return False

    def _end_episodes(self, agents: List[Any]) -> None:
        for t in self.trainers.values():
            if _takes_agents(t.end_episode):
                t.end_episode(agents)
            else:  # a plugin written for the one-environment interface: it forgets every agent
                t.end_episode()

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
                try:
                    with shielded():
                        self._save_and_export()
                except Stop:  # a second signal during the save: it was held back until the save ended
                    pass
                stop.saved = True
            raise stop from None
        except (PoisonedModelError, SaveFailedError):
            raise
        except UnityException:
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
            self.env.close()
            for t in self.trainers.values():
                t.close()
            if self.sess is not None:
                self.sess.close()

    def _save_and_export(self) -> None:
        with shielded():
            prefix = self.save_model()
            path = self.export()
        logger.info("Saved the checkpoint %s and the export %s.", prefix, path)

    def _run(self) -> None:
        if not self.train:
            logger.warning("Running without --train: the brains only act%s, until Ctrl-C.",
                           "" if self.load else " with untrained weights (add --load to use the last checkpoint)")
        self._advance_curriculum()
        timers = self.timers
        with timers("env_reset"):
            info = self.env.reset(train_mode=self.fast_simulation)
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
                actions[name], memories[name], values[name], outputs[name] = t.take_action(info)
        return actions, memories, values, outputs

    def _pass_stats(self) -> None:
        for key, entries in self.env.stats.items():  # a scene's custom stats reach every learner's summaries
            for t in self.trainers.values():
                if t.is_learner:
                    for value, aggregation in entries:
                        t.add_environment_stat(key, value, aggregation)

    def _learn(self, lesson, deciding: Dict[str, int]) -> None:
        """After the experiences of a step: update the trainers that are ready, write summaries, count steps."""
        for name, t in self.trainers.items():
            if self.train and t.should_still_train and t.is_ready_update():
                with self.timers("update"):
                    t.update_model()
            with self.timers("summaries"):
                t.write_summary(lesson)
            t.increment_step(deciding.get(name, 0))
            t.update_last_reward()

    def _after_step(self) -> None:
        self.global_step += 1
        for t in self.trainers.values():  # a trainer that needs fresh episodes (a team change)
            why = t.reset_request()
            if why:
                self.env.reset_all(why)
        if not self.env.resets_by_itself:
            self._check_curriculum_between_resets()
        if self.train and self.save_freq > 0 and self.global_step % self.save_freq == 0:
            self.save_model()
        elif self.train and self._interval_checkpoint_due():
            self.save_model()

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
            if env.needs_idle_reset:  # an answered environment's Academy is done, or it was lost
                self._advance_curriculum()
                with timers("env_reset"):
                    restarted, ended = env.reset_idle()
                lesson = lesson_numbers(env.curriculum)
                self._end_episodes(ended)
                ready = sorted(set(ready).union(restarted) - set(env.in_flight))
            if ready:
                info = env.merged(ready)
                actions, memories, values, outputs = self._act(info)
                singles = {i: env.merged([i]) for i in ready} if len(ready) > 1 else {ready[0]: info}
                start = {name: 0 for name in outputs}
                for i in ready:
                    rows = {}
                    for name in outputs:
                        n = len(singles[i][name].agents)
                        rows[name] = _output_rows(outputs[name], start[name], start[name] + n, len(info[name].agents))
                        start[name] += n
                    acted[i] = (singles[i], rows)
            with timers("env_step"):
                if ready:
                    env.send(ready, action=actions, memory=memories, value=values)
                ready = env.collect()
            self._pass_stats()
            deciding = {name: 0 for name in self.trainers}
            with timers("buffer"):
                for i in ready:
                    before, rows = acted.pop(i)
                    after = env.merged([i])
                    for name, t in self.trainers.items():
                        if name in rows:
                            t.add_experiences(before, after, rows[name])
                        deciding[name] += _deciding(before[name])
                    for t in self.trainers.values():
                        t.process_experiences(after)
            if not ready:
                continue
            self._learn(lesson, deciding)
            for _ in range((env_steps + len(ready)) // env.n_envs - env_steps // env.n_envs):
                self._after_step()
            env_steps += len(ready)

    def _loop_sync(self, info: Dict[str, BrainInfo]) -> None:
        """Step every environment together: act over all agents, send, wait for every answer."""
        timers = self.timers
        lesson = lesson_numbers(self.env.curriculum)
        while self._keep_going():
            if self.env.needs_reset:  # some environment's Academy is done, or it was lost
                self._advance_curriculum()
                with timers("env_reset"):
                    info, ended = self.env.reset_finished()
                lesson = lesson_numbers(self.env.curriculum)
                self._end_episodes(ended)
            actions, memories, values, outputs = self._act(info)
            with timers("env_step"):
                new_info = self.env.step(action=actions, memory=memories, value=values)
            self._pass_stats()
            with timers("buffer"):
                for name, t in self.trainers.items():
                    if name in outputs:
                        t.add_experiences(info, new_info, outputs[name])
                for t in self.trainers.values():
                    t.process_experiences(new_info)
            self._learn(lesson, {name: _deciding(info[name]) for name in self.trainers})
            info = new_info
            self._after_step()


def lesson_numbers(curriculum) -> Optional[Dict[str, int]]:
    """Parameter -> lesson index of the run's curriculum (None without one).

    A curriculum with its own lesson track per parameter says so with ``lesson_numbers()``; the
    JSON curriculum moves all its parameters together, so each of them has its one lesson number.
    """
    if hasattr(curriculum, "lesson_numbers"):
        return curriculum.lesson_numbers()
    if getattr(curriculum, "data", None) is None:
        return None
    return {name: curriculum.lesson_number for name in curriculum.data["parameters"]}


def _takes_agents(method) -> bool:
    """Whether ``end_episode`` accepts the agents argument (plugins may predate it)."""
    try:
        return len(inspect.signature(method).parameters) >= 1
    except (TypeError, ValueError):
        return False


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


def _deciding(info: BrainInfo) -> int:
    """Agents that acted this step: all of them for API-2; over the modern protocol, not the rows
    that only report an episode's end."""
    requested = getattr(info, "decision_requested", None)
    return len(info.agents) if requested is None else int(np.count_nonzero(requested))
