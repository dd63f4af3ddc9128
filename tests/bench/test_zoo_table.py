"""``bench/zoo.py``'s table (each trainer's means over the seeds, and ours over theirs) and its ``--set``.

The zoo's verdicts (the rate, the time and the agent-steps to the target, ours over Unity's trainer) are
read off this table, so a mean over the wrong runs or a ratio upside down would misstate them; ``--set``
ablations must change the file both trainers read, and only that.
"""
import os
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from zoo import ZOO, run_config, table, with_settings  # noqa: E402


def test_the_table_gives_the_means_over_seeds_and_ours_over_theirs():
    results = {"ppo/Basic": {
        "ours": [{"rate": 600.0, "seconds": 10.0, "steps": 6000.0},
                 {"rate": 800.0, "seconds": 20.0, "steps": 10000.0}],
        # one run that missed the target: its rate counts, its last summary's steps do not
        "theirs": [{"rate": 200.0, "seconds": 40.0, "steps": 4000.0},
                   {"rate": 300.0, "seconds": None, "steps": 30000.0}]}}
    head, rule, row = table(results, with_theirs=True).splitlines()
    cells = [c.strip() for c in row.strip("|").split("|")]
    columns = [c.strip() for c in head.strip("|").split("|")]
    assert len(cells) == len(columns) == rule.count("---")
    got = dict(zip(columns, cells))
    assert got["ours agent-steps/s"] == "700"
    assert got["ours s to target (reached)"] == "15.0 (2/2)"
    assert got["mlagents-learn agent-steps/s"] == "250"
    assert got["mlagents-learn s to target (reached)"] == "40.0 (1/2)"
    assert got["rate ours / theirs"] == "2.80"
    assert got["time ours / theirs"] == "0.38"
    assert got["agent-steps to target ours / theirs"] == "2.00"


def test_without_unitys_trainer_the_table_has_our_columns_only():
    results = {"ppo/Basic": {"ours": [{"rate": 500.0, "seconds": None, "steps": 2000.0}], "theirs": []}}
    head, _, row = table(results, with_theirs=False).splitlines()
    assert "mlagents-learn" not in head
    assert row == "| ppo/Basic | 0.90 | 500 | - (0/1) |"


def test_set_changes_the_scenes_settings_for_both_trainers(tmp_path):
    path = run_config("ppo/Hallway", str(tmp_path), 2000, ["threaded=false", "hyperparameters.num_epoch=6",
                                                             "network_settings.memory.memory_size=64"])
    with open(path) as f:
        block = yaml.safe_load(f)["behaviors"]["Hallway"]
    assert block["threaded"] is False
    assert block["hyperparameters"]["num_epoch"] == 6
    assert block["network_settings"]["memory"] == {"sequence_length": 64, "memory_size": 64}
    assert block["summary_freq"] == 2000
    assert ZOO["ppo/Hallway"][3]["threaded"] is True  # the zoo's own block is left as it is
    assert with_settings(ZOO["ppo/Basic"][3], []) == ZOO["ppo/Basic"][3]


def test_a_bad_set_is_refused_in_one_line():
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        with_settings(ZOO["ppo/Basic"][3], ["threaded"])
    with pytest.raises(SystemExit, match="no section 'hyperparams'.*hyperparameters"):
        with_settings(ZOO["ppo/Basic"][3], ["hyperparams.batch_size=32"])
