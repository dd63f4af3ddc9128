"""Which checkpoints of a run exist, and whether each one is whole.

A run's folder can be damaged behind the trainer's back: a crash or a full disk during a copy, a
file deleted by hand, a sync tool that truncated the newest data file. ``--load`` therefore does
not trust TensorFlow's ``checkpoint`` index alone: it lists every checkpoint it can find (the
index, if it parses, and the ``model-<step>.cptk.index`` files on disk), newest first, and checks
each one before restoring it, so a damaged newest checkpoint costs the steps since the one before
it instead of the whole run.

A checkpoint is whole when its ``.index`` file, every data shard it names and its training state
(``.state.json``, written before TensorFlow's files) are present, every tensor reads back (the
bundle's checksums are verified on read, so truncation and corruption both show), and the state
file is a JSON object.
"""
from __future__ import annotations

import glob
import json
import os
import re
from typing import Any, Dict, List, Optional, Set

from trainers.export.frozen_graph import write_atomically
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException

STATE_SUFFIX = ".state.json"
_STEP = re.compile(r"model-(\d+)\.cptk$")


class SaveFailedError(UnityTrainerException):
    """Writing a checkpoint or an export failed (a full disk, a lost mount); the previous files are intact."""


def checkpoint_variable_names(prefix: str) -> Set[str]:
    """The names of the variables the checkpoint ``prefix`` holds (read from its ``.index``)."""
    return {name for name, _ in tf.train.list_variables(prefix)}


def checkpoint_prefixes(model_path: str) -> List[str]:
    """Every checkpoint prefix of a run (``<model_path>/model-<step>.cptk``), highest step first."""
    if not os.path.isdir(model_path):
        return []
    names = set()
    try:
        index = tf.train.get_checkpoint_state(model_path)
    except Exception:  # an index that does not parse: the files on disk still tell
        index = None
    if index is not None:
        names.update(os.path.basename(p) for p in list(index.all_model_checkpoint_paths)
                     + [index.model_checkpoint_path] if p)
    names.update(os.path.basename(p)[: -len(".index")]
                 for p in glob.glob(os.path.join(glob.escape(model_path), "model-*.cptk.index")))
    steps: Dict[str, int] = {}
    for name in names:
        match = _STEP.match(name)
        if match:
            steps[name] = int(match.group(1))
    return [os.path.join(model_path, n) for n in sorted(steps, key=lambda n: steps[n], reverse=True)]


class StepInterval:
    """Due each time a step counter passes a multiple of ``every`` (never with ``every`` 0 or None),
    counted from the first step it is asked about."""

    def __init__(self, every: Optional[int]):
        self.every = every
        self._at: Optional[int] = None  # the step of the last time it was due

    def due(self, step: Optional[int]) -> bool:
        if self.every and step is not None and self._at is None:
            self._at = step
        if self.would_be_due(step):
            self._at = step
            return True
        return False

    def would_be_due(self, step: Optional[int]) -> bool:
        """What ``due(step)`` would answer, without counting the question (a step that has not come yet)."""
        if not self.every or step is None or self._at is None:
            return False
        return step // self.every > self._at // self.every


def latest_checkpoint(model_path: str) -> Optional[str]:
    """The newest checkpoint of a run, whole or not (``--load`` checks it and falls back)."""
    found = checkpoint_prefixes(model_path)
    return found[0] if found else None


def resolve_init_path(path: str, where: str) -> str:
    """The checkpoint prefix an ``init_path`` names: a checkpoint itself (``.../model-<step>.cptk``),
    a folder of checkpoints (its newest), or a run folder (its ``checkpoints/``' newest)."""
    if path.endswith(".pt"):
        raise UnityTrainerException(
            f"{where}: {path!r} is a PyTorch checkpoint (mlagents-learn's); this trainer's checkpoints are "
            "TensorFlow's. Name a run folder of this trainer (results/<run-id>), its checkpoints/ folder, or one "
            "of its model-<step>.cptk checkpoints.")
    if os.path.isfile(path + ".index"):
        return path
    for folder in (os.path.join(path, "checkpoints"), path):
        found = latest_checkpoint(folder)
        if found is not None:
            return found
    raise UnityTrainerException(
        f"{where}: could not initialize from {path!r}: it is not a checkpoint, nor a folder holding one. Name a "
        "run folder (results/<run-id>) that saved a checkpoint, its checkpoints/ folder, or a "
        "model-<step>.cptk checkpoint in it.")


def write_text_atomically(path: str, text: str) -> None:
    """Write, then rename: a crash leaves the old file or the new one, never half of one."""
    write_atomically(path, text.encode("utf-8"))


def write_json_atomically(path: str, data: Dict[str, Any]) -> None:
    write_text_atomically(path, json.dumps(data, indent=2))


def checkpoint_damage(prefix: str) -> Optional[str]:
    """Why the checkpoint ``prefix`` cannot be resumed from, or None when it is whole."""
    shards = glob.glob(glob.escape(prefix) + ".data-*-of-*")
    missing = [p for p in (prefix + ".index", prefix + STATE_SUFFIX) if not os.path.isfile(p)]
    if shards:
        total = int(shards[0].rsplit("-of-", 1)[1])
        missing += [f"{prefix}.data-{i:05d}-of-{total:05d}" for i in range(total)
                    if not os.path.isfile(f"{prefix}.data-{i:05d}-of-{total:05d}")]
    else:
        missing.append(prefix + ".data-00000-of-00001")
    if missing:
        return "missing " + ", ".join(os.path.basename(p) for p in missing)
    try:
        reader = tf.train.NewCheckpointReader(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)  # reads the bytes and checks their checksum
    except Exception as e:  # DataLossError, OutOfRangeError... whatever the damage
        first = (getattr(e, "message", None) or str(e)).strip().splitlines()
        return f"its TensorFlow files do not read back ({type(e).__name__}: {first[0] if first else ''})"
    try:
        with open(prefix + STATE_SUFFIX) as f:
            state = json.load(f)
        if not isinstance(state, dict):
            raise ValueError(f"a JSON {type(state).__name__}, not an object")
        int(state.get("global_step", 0))
    except (ValueError, TypeError, OSError) as e:
        return f"its state file {os.path.basename(prefix + STATE_SUFFIX)} does not parse ({e})"
    return None
