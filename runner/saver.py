"""A run's files on disk: checkpoints with their training state, resuming from them, and the exports.

``RunSaver`` is built inside the run's graph, after the trainers and before the graph is
finalized: it creates the ``tf.train.Saver`` and the one op that checks every float variable is
finite. Every file goes through a temporary file and a rename, so a crash or a full disk leaves
the previous checkpoint and export whole; a failed write becomes ``SaveFailedError`` naming what
is still intact, and a model whose weights or normaliser statistics went NaN/inf is never written
(``PoisonedModelError``).

A checkpoint is TensorFlow's files plus ``<prefix>.state.json``: the step counters, each
trainer's Python-side state and the curriculum, which the variables do not hold. Resuming takes
the newest *whole* checkpoint (``runner.checkpoints``): a damaged newer one is named in a
warning and skipped; with none whole the run stops naming each one.
"""
from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from runner.checkpoints import (
    STATE_SUFFIX,
    SaveFailedError,
    checkpoint_damage,
    checkpoint_prefixes,
    checkpoint_variable_names,
    latest_checkpoint,
    resolve_init_path,
    write_json_atomically,
)
from runner.run_paths import RunPaths
from runner.stopping import shielded
from runner.timers import Timers
from trainers.export.frozen_graph import contract_inputs, export_graph, write_atomically
from trainers.export.onnx_model import ModelCheckError, export_onnx, onnx_file_stem
from trainers.flat_adam import OPTIMIZER_STATE
from trainers.tf_utils import tf
from trainers.trainer.base import Trainer, UnityTrainerException

logger = logging.getLogger("unityagents")


class PoisonedModelError(UnityTrainerException):
    """The model's weights or statistics became NaN or infinite; nothing was saved over the last good checkpoint."""


class RunSaver:
    """Saves, restores and exports the trainers of one session.

    :param sess: the run's session; its graph is the default graph while this is built.
    :param paths: where every file goes.
    :param env_name: names the exported ``<env_name>.bytes``.
    :param keep_checkpoints: how many checkpoints to keep.
    :param timers: the run's timers, written to ``timers.json`` with each save.
    :param seed: recorded in each checkpoint's state.
    :param keep_per_behavior: in the results layout, how many ``<Behavior>-<step>.onnx`` each behaviour
        keeps (Release 22's ``keep_checkpoints``); a name missing from it keeps ``keep_checkpoints``.
    :param strict_export: an ONNX file that a Unity engine would refuse or warn about stops the run
        (``--strict-export``) instead of being a warning in the log.

    The TensorFlow checkpoint holds every brain of the one graph, so it is named by the run's environment
    step (``model-<step>.cptk``) and the Saver keeps ``keep_checkpoints`` of them. The ONNX files beside it
    are per behaviour: in the results layout ``<Behavior>/<Behavior>-<step>.onnx`` carries the behaviour's
    own agent steps, the number ``training_status.json`` and TensorBoard show, and each behaviour keeps its
    newest ``keep_checkpoints``, as Release 22 names and counts them; in the legacy layout
    ``models/<run-path>/<Brain>-<step>.onnx`` carries the environment step of its TensorFlow checkpoint
    and goes with it.
    """

    def __init__(self, sess, paths: RunPaths, env_name: str, keep_checkpoints: int, timers: Timers, seed: int,
                 keep_per_behavior: Optional[Mapping[str, int]] = None, strict_export: bool = False):
        self.sess = sess
        self.strict_export = strict_export
        self.paths = paths
        self.model_path = paths.checkpoint_dir
        self.env_name = env_name
        self.timers = timers
        self.seed = seed
        self.keep_checkpoints = keep_checkpoints
        self.keep_per_behavior = dict(keep_per_behavior or {})
        self.saver = tf.train.Saver(max_to_keep=keep_checkpoints)
        floats = [v for v in tf.global_variables() if v.dtype.base_dtype in (tf.float32, tf.float64)]
        with tf.name_scope("checks"):  # one op, built before finalize, run before each save
            self._all_finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.is_finite(v)) for v in floats])) \
                if floats else tf.constant(True)
        self._non_finite = {v.name: tf.logical_not(tf.reduce_all(tf.is_finite(v))) for v in floats}
        # The weights without the optimizers' state, for a checkpoint that holds the weights but an
        # older layout of the optimizer state (one pair of Adam slots per variable).
        optimizer_state = tf.get_collection(OPTIMIZER_STATE)
        self._optimizer_state_names = {v.op.name for v in optimizer_state}
        self._saved_names = {v.op.name for v in tf.global_variables()}
        self._weights_saver = self._reset_optimizer_state = None
        if optimizer_state:
            self._weights_saver = tf.train.Saver(
                [v for v in tf.global_variables() if v.op.name not in self._optimizer_state_names], max_to_keep=1)
            self._reset_optimizer_state = tf.variables_initializer(optimizer_state)

    # ---------------------------------------------------------------- starting from files
    def initialize_from(self, folder: str) -> None:
        """Weights (and optimizer moments) of another run's latest checkpoint; the steps stay 0.

        A checkpoint whose optimizer state is in an older layout gives its weights alone (a warning
        says so), as with ``--load``."""
        ckpt = latest_checkpoint(folder)
        if ckpt is None:
            raise UnityTrainerException(
                f"--initialize-from: no checkpoint was found in {folder}. Name a run that saved one.")
        logger.info("Initializing the model from %s (step counters start from 0)", ckpt)
        try:
            self.saver.restore(self.sess, ckpt)
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
            if self._restore_weights_only(ckpt, "--initialize-from"):
                return
            raise UnityTrainerException(
                f"--initialize-from: the checkpoint {ckpt} does not match this configuration (a brain, a "
                f"network size or a trainer type changed?): {e.message.splitlines()[0]}") from None

    def initialize_behavior(self, behavior: str, scope: str, path: str) -> None:
        """``init_path``: one behaviour's weights (and optimizer moments) from another run's checkpoint;
        its step counters stay 0.

        The variables under ``scope`` (all, when the run has one behaviour and no scope) are matched
        by their names relative to it, under whichever scope the checkpoint keeps them (none, or one
        folder such as the behaviour's name in a run of several), so a run of one behaviour starts a
        run of several and back. Those the checkpoint lacks, or holds in another shape, keep their
        fresh values, with a warning naming how many, as Release 22 warns for each module it cannot load.
        """
        where = f"behaviors.{behavior}.init_path"
        ckpt = resolve_init_path(path, where)
        held = dict(tf.train.list_variables(ckpt))
        own = [v for v in tf.global_variables() if not scope or v.op.name.startswith(scope + "/")]
        relative = {v.op.name[len(scope) + 1:] if scope else v.op.name: v for v in own}
        prefixes = [""] + sorted({name.split("/", 1)[0] + "/" for name in held if "/" in name})

        def matches(prefix: str) -> Dict[str, tf.Variable]:
            return {prefix + r: v for r, v in relative.items()
                    if list(held.get(prefix + r, ())) == v.shape.as_list()}

        var_list = max((matches(p) for p in prefixes), key=len)
        if not var_list:
            raise UnityTrainerException(
                f"{where}: the checkpoint {ckpt} holds none of {behavior}'s variables (a different network "
                "size, trainer type or behaviour?). Name a run that trained this behaviour with these settings.")
        tf.train.Saver(var_list).restore(self.sess, ckpt)
        missing = len(relative) - len(var_list)
        logger.info("Initializing %s from %s: %d variable(s); its step counters start from 0.", behavior, ckpt,
                    len(var_list))
        if missing:
            logger.warning("%s: %d of %s's variables are not in %s (or differ in shape); they start from their "
                           "initial values.", where, missing, behavior, ckpt)

    def restore(self, trainers: Mapping[str, Trainer], curriculum, lesson: int) -> int:
        """Restore the newest whole checkpoint into the session, the trainers and the curriculum;
        the run's global step it was saved at."""
        candidates = checkpoint_prefixes(self.model_path)
        if not candidates:
            raise UnityTrainerException(
                f"--load: no checkpoint was found in {self.model_path}. Check --run-path (it names the "
                "folder under models/), or start without --load.")
        ckpt, damaged = self._restore_newest_whole(candidates)
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
        for name, t in trainers.items():
            if name in state.get("trainers", {}):
                t.state = state["trainers"][name]
        if "curriculum" in state:
            curriculum.set_state(state["curriculum"])
            if curriculum.data is not None:
                logger.info("Curriculum resumed at lesson %s.", curriculum.lesson_number)  # a tuple: one per track
        if lesson:
            logger.warning("--lesson %d is ignored with --load: the run continues from its saved lesson.", lesson)
        return int(state.get("global_step", 0))

    def _restore_newest_whole(self, candidates: List[str]) -> Tuple[str, List[Tuple[str, str]]]:
        damaged = []
        for ckpt in candidates:
            why = checkpoint_damage(ckpt)
            if why is None:
                why = self._restore_from(ckpt)
            if why is None:
                return ckpt, damaged
            damaged.append((ckpt, why))
            logger.warning("--load: the checkpoint %s is damaged (%s); trying the one before it.", ckpt, why)
        raise UnityTrainerException(
            f"--load: no checkpoint in {self.model_path} is whole, so there is nothing to resume from:\n"
            + "\n".join(f"  {c}: {why}" for c, why in damaged)
            + "\nRestore the folder from a backup, or start a new run without --load (another --run-path "
              "keeps these files).")

    def _restore_from(self, ckpt: str) -> Optional[str]:
        """Restore ``ckpt``; why it is damaged if its data does not restore (a configuration mismatch raises)."""
        try:
            self.saver.restore(self.sess, ckpt)
        except (tf.errors.DataLossError, tf.errors.OutOfRangeError) as e:
            return f"its data does not restore ({type(e).__name__}: {e.message.splitlines()[0]})"
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
            if self._restore_weights_only(ckpt, "--load"):
                return None
            raise UnityTrainerException(
                f"--load: the checkpoint {ckpt} does not match this configuration (a brain, a network size "
                f"or a trainer type changed?): {e.message.splitlines()[0]}") from None
        return None

    def _restore_weights_only(self, ckpt: str, flag: str) -> bool:
        """Restore the weights of ``ckpt`` and start the optimizers afresh, when the optimizers' state
        is all that it lacks (it was written while Adam kept one pair of slots per variable, before
        ``trainers.flat_adam``); False, restoring nothing, when anything else is missing too."""
        if self._weights_saver is None:
            return False
        missing = self._saved_names - checkpoint_variable_names(ckpt)
        if not missing or not missing <= self._optimizer_state_names:
            return False
        self._weights_saver.restore(self.sess, ckpt)
        self.sess.run(self._reset_optimizer_state)
        logger.warning("%s: %s holds the weights but not the optimizer state in this version's layout (one flat "
                       "Adam per update instead of slots per variable); the weights are restored and Adam's "
                       "moments start afresh.", flag, ckpt)
        return True

    # ---------------------------------------------------------------- writing files
    @contextlib.contextmanager
    def _writing(self, what: str):
        """Turn a failed write (a full disk, a lost mount) into ``SaveFailedError`` naming what is still intact."""
        try:
            yield
        except (OSError, tf.errors.OpError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else getattr(e, "message", str(e))
            last = latest_checkpoint(self.model_path)
            bytes_path = self.bytes_path
            raise SaveFailedError(
                f"Could not write {what} in {self.model_path}: {str(reason).splitlines()[0]}. Nothing was "
                "replaced: every file is written to a temporary file and renamed, so the previous checkpoint "
                f"({last or 'none yet'}) and export ({bytes_path if os.path.isfile(bytes_path) else 'none yet'}) "
                "are intact. Free some space (or fix the folder), then resume with --load (--resume with "
                "unityagents-learn).") from None

    @property
    def bytes_path(self) -> str:
        return os.path.join(self.paths.export_dir, self.env_name + ".bytes")

    def check_finite(self, global_step: int) -> None:
        """Refuse to save or export a model with NaN/inf weights or normaliser statistics."""
        if self.sess.run(self._all_finite):
            return
        bad = [name for name, op in self._non_finite.items() if self.sess.run(op)]
        last = latest_checkpoint(self.model_path)
        raise PoisonedModelError(
            f"The model became non-finite (NaN or infinity) by environment step {global_step}, in "
            f"{len(bad)} variable(s): {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}. It was not saved or "
            "exported: " + (f"the last good checkpoint {last} stays the latest, and --load resumes from it."
                            if last else "no checkpoint had been written yet.")
            + " Lower learning_rate, or check the environment's states and rewards.")

    def save(self, trainers: Mapping[str, Trainer], curriculum, global_step: int,
             behaviors: Optional[Sequence[str]] = None) -> str:
        """Write a checkpoint (weights + optimizer + normalisers), the training state and an ONNX file
        per brain (``<Brain>-<step>.onnx``; only ``behaviours``' when given) beside it, and ``timers.json``."""
        self.check_finite(global_step)
        with shielded(), self.timers("checkpoint"), self._writing(f"the checkpoint of step {global_step}"):
            prefix = self._save_checkpoint(trainers, curriculum, global_step)
            step_of = {name: self.onnx_step(t, global_step) for name, t in trainers.items()
                       if behaviors is None or name in behaviors}
            onnx_paths = self._export_onnx({name: trainers[name] for name in step_of},
                                           {name: f"-{step}" for name, step in step_of.items()})
            self._forget_unkept_onnx(trainers)
            self._after_save(trainers, onnx_paths, prefix, final=False)
        self.write_timers()
        return prefix

    def _save_checkpoint(self, trainers: Mapping[str, Trainer], curriculum, global_step: int) -> str:
        prefix = os.path.join(self.model_path, f"model-{global_step}.cptk")
        state: Dict[str, Any] = {
            "global_step": global_step,
            "trainers": {name: t.state for name, t in trainers.items()},
            "curriculum": curriculum.get_state(),
            "seed": self.seed,
        }
        write_json_atomically(prefix + STATE_SUFFIX, state)  # before the checkpoint index points at it
        self.saver.save(self.sess, prefix)
        write_atomically(os.path.join(self.model_path, "raw_graph_def.pb"),
                         self.sess.graph.as_graph_def().SerializeToString())
        self._forget_unkept(trainers)
        logger.info("Saved the model at step %d to %s", global_step, prefix)
        return prefix

    def onnx_step(self, trainer: Trainer, global_step: int) -> int:
        """The step a checkpoint's ONNX file is named by: the behaviour's own agent steps in the results
        layout (Release 22's), the run's environment step in the legacy one."""
        return int(trainer.get_step) if self.paths.per_behavior else int(global_step)

    def _forget_unkept_onnx(self, trainers: Mapping[str, Trainer]) -> None:
        """Results layout: each behaviour keeps its newest ``keep_checkpoints`` ``<Behavior>-<step>.onnx``."""
        if not self.paths.per_behavior:
            return
        for t in trainers.values():
            stem = onnx_file_stem(t.brain_name)
            keep = self.keep_per_behavior.get(t.brain_name, self.keep_per_behavior.get(
                stem, self.keep_per_behavior.get(t.brain_name.split("?")[0], self.keep_checkpoints)))
            folder = self.paths.step_onnx_dir(t.brain_name)
            steps = []
            for path in glob.glob(os.path.join(glob.escape(folder), glob.escape(stem) + "-*.onnx")):
                step = os.path.basename(path)[len(stem) + 1: -len(".onnx")]
                if step.isdigit():
                    steps.append((int(step), path))
            for _, path in sorted(steps)[: max(len(steps) - max(int(keep), 1), 0)]:
                os.unlink(path)

    def _forget_unkept(self, trainers: Mapping[str, Trainer]) -> None:
        """Delete the state files of checkpoints the Saver no longer keeps and, in the legacy layout, their
        ``<Brain>-<step>.onnx``."""
        kept = {os.path.abspath(p) for p in self.saver.last_checkpoints}
        for path in glob.glob(os.path.join(self.model_path, "model-*.cptk" + STATE_SUFFIX)):
            if os.path.abspath(path[: -len(STATE_SUFFIX)]) not in kept:
                os.unlink(path)
        if self.paths.per_behavior:
            return
        kept_steps = {p.rsplit("model-", 1)[1].split(".cptk")[0] for p in kept}
        brains = [onnx_file_stem(t.brain_name) for t in trainers.values()]
        for t, brain in zip(trainers.values(), brains):
            folder = self.paths.step_onnx_dir(t.brain_name)
            for path in glob.glob(os.path.join(glob.escape(folder), glob.escape(brain) + "-*.onnx")):
                name = os.path.basename(path)[: -len(".onnx")]
                step = name[len(brain) + 1:]
                if step.isdigit() and step not in kept_steps and name not in brains:
                    os.unlink(path)

    def export(self, trainers: Mapping[str, Trainer], global_step: int) -> str:
        """Freeze every exporting trainer into ``<export_dir>/<env_name>.bytes``, with ONNX files beside it."""
        exported = [t for t in trainers.values() if t.graph_scope is not None]
        scopes = [t.graph_scope + "/" if t.graph_scope else "" for t in exported]
        nodes = [prefix + n for t, prefix in zip(exported, scopes) for n in t.export_nodes()]
        inputs = [name for prefix in scopes for name in contract_inputs(self.sess.graph, prefix)]
        path = self.bytes_path
        self.check_finite(global_step)
        with shielded(), self.timers("export"), self._writing(f"the export {os.path.basename(path)}"):
            export_graph(self.sess, nodes, path, keep_nodes=inputs)
            onnx_paths = self._export_onnx(trainers)
            self._after_save(trainers, onnx_paths, None, final=True)
        if len(scopes) > 1:
            logger.info("List of available scopes :\n%s", "\n".join("\t" + s for s in scopes))
        logger.info("List of nodes exported :\n%s", "\n".join("\t" + n for n in nodes))
        logger.info("Exported the graph to %s", path)
        for p in onnx_paths:
            logger.info("Exported the ONNX model %s", p)
        self.write_timers()
        return path

    def _after_save(self, trainers: Mapping[str, Trainer], onnx_paths: List[str], prefix: Optional[str],
                    final: bool) -> None:
        steps = {name: t.get_step for name, t in trainers.items()}
        rewards = {name: t.get_last_reward for name, t in trainers.items()}
        elos = {name: t.self_play_elo for name, t in trainers.items() if getattr(t, "self_play_elo", None) is not None}
        self.paths.after_save(steps, onnx_paths, prefix, final, rewards, elos)

    def write_timers(self) -> None:
        with self._writing("timers.json"):
            os.makedirs(os.path.dirname(self.paths.timers_path) or ".", exist_ok=True)
            self.timers.write_json(self.paths.timers_path)

    def _export_onnx(self, trainers: Mapping[str, Trainer], suffixes: Optional[Mapping[str, str]] = None) -> List[str]:
        """ONNX beside the ``.bytes`` (``suffixes``: per brain, ``-<step>`` beside a checkpoint); a graph tf2onnx
        cannot convert (a plugin's) is logged, not fatal."""
        try:
            paths = []
            for name, t in trainers.items():
                suffix = (suffixes or {}).get(name, "")
                folder = self.paths.step_onnx_dir(t.brain_name) if suffix else self.paths.export_dir
                os.makedirs(folder, exist_ok=True)
                paths += export_onnx(self.sess, [t], folder, suffix=suffix, strict=self.strict_export)
            return paths
        except (OSError, ModelCheckError):  # a full disk, or --strict-export refusing the model: the run stops
            raise
        except Exception as e:  # the .bytes export stands on its own; say why ONNX is missing
            logger.error("The ONNX export failed (%s: %s); the .bytes export is not affected.", type(e).__name__, e)
            return []
