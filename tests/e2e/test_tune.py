"""unityagents-tune end to end: a 2-trial TPE sweep with early stopping on built-in 3DBall, killed
(SIGKILL) while a trial runs and resumed with --resume, finishes with every trial accounted for, and
leaves best.yaml, the best ONNX, trials.csv, members.csv and hparams/."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import time

import pytest
import yaml

import learn_r22
from tests.conftest import free_port
from unityagents_tune.guard import running

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "config", "ppo", "3DBall.yaml")
MAX_STEPS = 2400


def tune(cwd, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled",
               RAY_USAGE_STATS_ENABLED="0")
    return subprocess.Popen([sys.executable, "-m", "unityagents_tune.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_a_killed_sweep_resumes_and_accounts_for_every_trial(tmp_path):
    raw = yaml.safe_load(open(CONFIG, encoding="utf-8"))
    behavior = next(iter(raw["behaviors"]))
    raw["behaviors"][behavior].update(checkpoint_interval=1200, summary_freq=1200)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    hp = f"behaviors.{behavior}.hyperparameters"
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({
        "search": {f"{hp}.learning_rate": {"loguniform": [1.0e-4, 1.0e-3]}, f"{hp}.beta": {"uniform": [1e-3, 1e-2]}},
        "objective": {"tag": "Environment/Cumulative Reward", "mode": "max", "last": 1},
        "budget": {"trials": 2, "max_steps": MAX_STEPS, "concurrent": 1},
        "scheduler": {"name": "tpe", "early_stopping": "asha", "grace_steps": 1200}}))
    args = ["run.yaml", "sweep.yaml", "--env=3DBall", "--run-id=sweep", f"--base-port={free_port()}"]
    trials = tmp_path / "results" / "sweep" / "trials"

    first = tune(tmp_path, *args)
    deadline = time.time() + 120
    while not (trials / "trial_000.history.csv").exists():  # a trial is under way
        assert first.poll() is None, first.communicate()[0]
        assert time.time() < deadline
        time.sleep(0.2)
    first.kill()
    first.wait()
    deadline = time.time() + 60
    while running(str(trials)):  # the trials' runs end with their sweep
        assert time.time() < deadline, "a trial outlived its killed sweep"
        time.sleep(0.5)

    second = tune(tmp_path, *args, "--resume")
    out = second.communicate(timeout=300)[0]
    assert second.returncode == 0, out
    run = tmp_path / "results" / "sweep"
    rows = list(csv.DictReader(open(run / "trials.csv")))
    assert [r["trial"] for r in rows] == ["trial_000", "trial_001"]
    for r in rows:
        assert r["status"] in ("completed", "stopped early"), out
        assert int(r["agent_steps"]) == MAX_STEPS or r["status"] == "stopped early"
        assert 1.0e-4 <= float(r[f"{hp}.learning_rate"]) <= 1.0e-3
    assert any(r["status"] == "completed" for r in rows)
    assert "Best: trial_00" in out
    assert (run / f"{behavior}.onnx").exists()
    members = list(csv.DictReader(open(run / "members.csv")))
    assert {m["trial"] for m in members} == {"trial_000", "trial_001"}
    assert os.listdir(run / "hparams")
    ports = [line.rsplit("on port ", 1)[1].split(":")[0] for name in ("trial_000", "trial_001")
             for line in open(trials / f"{name}.log") if line.startswith("--- ")]
    assert len(set(ports)) == len(ports)  # every start of every trial had ports of its own
    assert len(ports) >= 3  # the trial the kill interrupted started again
    best = run / "best.yaml"
    assert learn_r22.main([str(best), "--env=3DBall", "--dry-run", f"--results-dir={tmp_path}/again"]) == 0
