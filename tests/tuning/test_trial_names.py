"""The sweep's trial names: claimed once per Ray trial id, kept across a resume, and released when the
killed sweep's saved state does not hold the trial that claimed one."""
from __future__ import annotations

import os
from types import SimpleNamespace

from unityagents_tune.cli import TrialNamer, set_aside_unrecorded


def test_names_are_claimed_in_order_and_kept_for_the_same_trial(tmp_path):
    namer = TrialNamer(str(tmp_path))
    assert namer(SimpleNamespace(trial_id="aa")) == "trial_000"
    assert namer(SimpleNamespace(trial_id="bb")) == "trial_001"
    assert TrialNamer(str(tmp_path))(SimpleNamespace(trial_id="aa")) == "trial_000"


def test_a_trial_the_saved_state_lacks_is_set_aside_and_its_name_goes_to_the_next(tmp_path):
    run, trials = tmp_path, tmp_path / "trials"
    namer = TrialNamer(str(trials))
    namer(SimpleNamespace(trial_id="aa"))
    namer(SimpleNamespace(trial_id="bb"))  # named just before the kill; the saved state never held it
    (trials / "trial_001").mkdir()
    (trials / "trial_001" / "checkpoint").write_text("bb's")
    (trials / "trial_001.log").write_text("bb's log")
    (run / "ray" / "trial_001").mkdir(parents=True)
    (run / "ray" / "trial_001" / "result.json").write_text("{}")
    (trials / "trial_000.log").write_text("aa's log")

    assert set_aside_unrecorded(str(run), str(trials), {"aa"}) == ["trial_001"]

    aside = run / "unrecorded" / "trial_001-bb"
    assert sorted(os.listdir(aside)) == ["ray", "trial_001", "trial_001.id", "trial_001.log"]
    assert os.listdir(aside / "ray") == ["result.json"]
    assert (aside / "trial_001" / "checkpoint").read_text() == "bb's"
    assert sorted(os.listdir(trials)) == ["trial_000.id", "trial_000.log"]
    assert not (run / "ray" / "trial_001").exists()
    assert namer(SimpleNamespace(trial_id="cc")) == "trial_001"
    assert namer(SimpleNamespace(trial_id="aa")) == "trial_000"
    assert set_aside_unrecorded(str(run), str(trials), {"aa", "cc"}) == []
