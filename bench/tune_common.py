"""Helpers of the tune_*.py benchmarks: one unityagents-learn run, one unityagents-tune sweep, their rewards."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import yaml

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CONFIG = os.path.join(ROOT, "config", "ppo", "3DBall.yaml")
TAG = "Environment/Cumulative Reward"


def base_config() -> Tuple[dict, str]:
    """ML-Agents' 3DBall run config and its behaviour's name (read from the file)."""
    raw = yaml.safe_load(open(CONFIG, encoding="utf-8"))
    return raw, next(iter(raw["behaviors"]))


def env() -> Dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))


def learn(folder: str, config: dict, run_id: str, port: int) -> Tuple[List[Tuple[int, float]], float]:
    """One unityagents-learn run of ``config`` on built-in 3DBall: its (step, mean reward) summaries and seconds."""
    from unityagents_tune.trial import EventReader

    path = os.path.join(folder, run_id + ".yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    start = time.time()
    subprocess.run([sys.executable, "-m", "trainers.learn_r22", path, "--env=3DBall", f"--run-id={run_id}",
                    f"--results-dir={folder}", f"--base-port={port}", "--force"], env=env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return EventReader(os.path.join(folder, run_id), TAG).read(), time.time() - start


def tune(folder: str, config: dict, sweep: dict, run_id: str, port: int, *extra: str,
         wait: bool = True) -> subprocess.Popen:
    """``unityagents-tune`` on built-in 3DBall in a subprocess (its output in ``<folder>/<run_id>.out``)."""
    cpath, spath = os.path.join(folder, run_id + "-config.yaml"), os.path.join(folder, run_id + "-sweep.yaml")
    with open(cpath, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    with open(spath, "w", encoding="utf-8") as f:
        yaml.safe_dump(sweep, f)
    out = open(os.path.join(folder, run_id + ".out"), "a", encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "unityagents_tune.cli", cpath, spath, "--env=3DBall",
                                f"--run-id={run_id}", f"--results-dir={folder}", f"--base-port={port}", *extra],
                               env=env(), stdout=out, stderr=subprocess.STDOUT)
    if wait:
        process.wait()
    return process


def rows(path: str) -> List[Dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def first_passing(summaries: List[Tuple[int, float]], threshold: float) -> Optional[int]:
    return next((step for step, value in summaries if value >= threshold), None)


def mean_last(summaries: List[Tuple[int, float]], n: int) -> float:
    values = [v for _, v in summaries[-n:]]
    return sum(values) / len(values) if values else float("nan")
