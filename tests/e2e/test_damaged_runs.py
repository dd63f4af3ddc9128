"""Damaged runs: ``--load`` falls back past a damaged newest checkpoint, and a full disk breaks nothing.

A run is made in-process (the scripted environment of ``test_environment_set``) with two
checkpoints whose weights differ, then damaged as a crash, a sync tool or a user would: the
newest data file truncated, a file of it deleted, its state file cut in half. Resuming must
restore the older checkpoint (its weights, its step) and say which one was skipped and why; with
every checkpoint damaged it must stop naming each. A disk that fills during a save (``ENOSPC``
injected at the writes) must end in ``SaveFailedError`` and leave the previous checkpoint and
export byte for byte.
"""
from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

from runner.checkpoints import SaveFailedError, checkpoint_damage, latest_checkpoint
from runner.controller import TrainerController
from runner.settings.trainer_config import load_trainer_config
from tests.conftest import fill_the_disk, write
from tests.unityagents.vector.test_environment_set import ScriptedWorker
from trainers.tf_utils import tf
from trainers.trainer.base import UnityTrainerException
from trainers.trainer.registry import load_registry
from unityagents.vector.environment_set import EnvironmentSet


def controller(tmp_path, load=False) -> TrainerController:
    config = load_trainer_config(write(tmp_path / "c.yaml", "B:\n    normalize: true\n"), load_registry())
    return TrainerController(EnvironmentSet.of(ScriptedWorker(0)), config, env_name="Scripted", load=load,
                             model_dir=str(tmp_path / "models"), summary_dir=str(tmp_path / "summaries"))


def weight(c: TrainerController):
    return [v for v in c.graph.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)][0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A run with checkpoints at steps 10 and 20 (different weights) and an export, made once."""
    tmp_path = tmp_path_factory.mktemp("run")
    c = controller(tmp_path)
    with c.graph.as_default():
        c._build()
        w = weight(c)
        for step, value in ((10, 0.25), (20, 0.75)):
            w.load(np.full(w.shape.as_list(), value, np.float32), c.sess)
            c.global_step = step
            c.save_model()
        c.export()
    c.sess.close()
    return tmp_path


@pytest.fixture
def run(made, tmp_path):
    """A copy of the made run in this test's folder; returns its model folder."""
    shutil.copytree(made / "models", tmp_path / "models")
    shutil.copy(made / "c.yaml", tmp_path / "c.yaml")
    return tmp_path / "models" / "ppo"


def resume(tmp_path):
    """(the restored step, the restored first weight's value) of a --load."""
    c = controller(tmp_path, load=True)
    try:
        with c.graph.as_default():
            c._build()
            return c.global_step, float(np.asarray(c.sess.run(weight(c))).ravel()[0])
    finally:
        if c.sess is not None:
            c.sess.close()


def truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


DAMAGE = {
    "truncated data": (lambda m: truncate(m / "model-20.cptk.data-00000-of-00001"), "do not read back"),
    "missing index": (lambda m: (m / "model-20.cptk.index").unlink(), "missing model-20.cptk.index"),
    "state does not parse": (lambda m: truncate(m / "model-20.cptk.state.json"), "does not parse"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_load_falls_back_to_the_newest_whole_checkpoint_and_says_so(run, tmp_path, caplog, case):
    damage, why = DAMAGE[case]
    damage(run)
    with caplog.at_level(logging.WARNING, logger="unityagents"):
        step, value = resume(tmp_path)
    assert (step, value) == (10, 0.25)  # model-10's counters and weights, not a fresh start
    text = caplog.text
    assert "model-20.cptk is damaged" in text and why in text, text
    assert "resuming from" in text and "model-10.cptk, the newest whole checkpoint" in text, text


def test_an_unreadable_checkpoint_index_still_finds_the_files(run, tmp_path):
    (run / "checkpoint").write_text("model_checkpoint_path: \x00\x01 not a text proto {{{")
    assert latest_checkpoint(str(run)).endswith("model-20.cptk")
    assert resume(tmp_path) == (20, 0.75)


def test_with_no_whole_checkpoint_load_stops_naming_each(run, tmp_path):
    truncate(run / "model-20.cptk.data-00000-of-00001")
    (run / "model-10.cptk.state.json").write_text("{")
    with pytest.raises(UnityTrainerException) as e:
        resume(tmp_path)
    text = str(e.value)
    assert "no checkpoint in" in text and "is whole" in text
    assert "model-20.cptk: its TensorFlow files do not read back" in text
    assert "model-10.cptk: its state file model-10.cptk.state.json does not parse" in text


def snapshot(folder):
    rewritten = ("timers.json", "configuration.yaml")  # by every run, --load included
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name not in rewritten}


@pytest.mark.parametrize("where", ["state file", "tensorflow files", "export"])
def test_a_disk_that_fills_during_a_save_leaves_the_previous_files_whole(run, tmp_path, monkeypatch, where):
    before = snapshot(run)
    c = controller(tmp_path, load=True)
    with c.graph.as_default():
        c._build()
        c.global_step = 30
        if where == "state file":
            fill_the_disk(monkeypatch)
            with pytest.raises(SaveFailedError) as e:
                c.save_model()
        elif where == "tensorflow files":
            def no_space(*args, **kwargs):
                raise tf.errors.ResourceExhaustedError(None, None, "model-30.cptk.data-00000-of-00001; No space "
                                                       "left on device")
            monkeypatch.setattr(c.saver, "save", no_space)
            with pytest.raises(SaveFailedError) as e:
                c.save_model()
        else:
            fill_the_disk(monkeypatch)
            with pytest.raises(SaveFailedError) as e:
                c.export()
    c.sess.close()
    text = str(e.value)
    assert "No space left on device" in text and "model-20.cptk" in text and "Scripted.bytes" in text, text
    assert "resume with --load" in text
    after = snapshot(run)
    assert {k: v for k, v in after.items() if k in before} == {k: v for k, v in before.items() if k in after}
    assert set(before) <= set(after) and not [n for n in after if n.startswith(".") or "model-30.cptk.index" in n]
    assert checkpoint_damage(str(run / "model-20.cptk")) is None
    monkeypatch.undo()
    assert resume(tmp_path)[0] == 20
