"""ML-Agents Release 22's own config folders, as a user brings them: every sample in
``tests/data/release22/`` (one per file of Release 22's ``config/ppo``, ``config/sac``,
``config/poca`` and ``config/imitation``, with the same features and keys and values of our own)
passes ``unityagents-learn <file> --dry-run``."""
from __future__ import annotations

import glob
import os

import pytest

import learn_r22

SAMPLES = os.path.join(__file__.rsplit("/tests/", 1)[0], "tests", "data", "release22")

def _samples():
    paths = sorted(glob.glob(os.path.join(SAMPLES, "*", "*.yaml")))
    return [os.path.relpath(p, SAMPLES)[:-len(".yaml")] for p in paths]


def test_the_samples_cover_release_22s_four_config_folders():
    names = _samples()
    assert {n.split("/")[0] for n in names} == {"ppo", "sac", "poca", "imitation"}
    assert len(names) >= 40
    assert {"poca/SoccerTwos", "poca/StrikersVsGoalie"} <= set(names)  # MA-POCA with team self-play


@pytest.mark.parametrize("name", _samples())
def test_a_release_22_config_dry_runs(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # --dry-run writes nothing, wherever it runs
    code = learn_r22.main([os.path.join(SAMPLES, f"{name}.yaml"), "--dry-run"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "behaviors:" in out.out and "checkpoint_settings:" in out.out  # the resolved run, as YAML
    assert os.listdir(tmp_path) == []
