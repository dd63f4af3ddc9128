"""MA-POCA against independent PPO on PushCollab (gRPC): the last-100 mean group reward, side by side.

Each run trains ``PushBlockCollab?team=0`` over the modern protocol (``UnityEnvironment(...,
protocol="grpc")`` and a ``TrainerController``, as ``learn.py --protocol grpc`` does) in its own
process, with the shipped ``config/poca/PushCollab.yaml`` block for POCA and the same block with
``trainer: ppo`` for PPO (PPO then learns from each agent's own reward plus its group reward), the
same ``max_steps``. The measure is the scene's own stat, sent once per group episode on the stats
channel (``Academy/PushCollabBrain Group Reward``: the group reward the group earned in that
episode, blocks scored minus the existential penalty), so both trainers are scored by the same
number; reported: the mean of the last 100 group episodes of the run, and the wall time. The two
trainers alternate seed by seed so that a changing machine load does not favour one.

    python bench/poca_vs_ppo.py --seeds 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "config", "poca", "PushCollab.yaml")
BEHAVIOUR = "PushBlockCollab?team=0"
STAT = "Academy/PushCollabBrain Group Reward"
LOST_STAT = "Academy/PushCollabBrain Members Lost"

#: One training run in a fresh process; prints the scene's group rewards as one JSON line.
DRIVER = """
import json, logging, sys
sys.path.insert(0, {root!r})
logging.basicConfig(level=logging.WARNING)
from runner.settings.trainer_config import load_trainer_config
from trainers.trainer.registry import load_registry
from trainers.trainer.base import Trainer
from runner.controller import TrainerController
from unityagents import UnityEnvironment
config = load_trainer_config({config!r}, load_registry())
env = UnityEnvironment("PushCollab", base_port={port}, protocol="grpc", seed={seed}, log_dir="logs")
group_rewards, lost = [], []
record = Trainer.add_stat
def recording(self, key, value, aggregation=None):
    if key == {stat!r}:
        group_rewards.append(value)
    elif key == {lost_stat!r}:
        lost.append(value)
    record(self, key, value, aggregation)
Trainer.add_stat = recording
TrainerController(env, config, env_name="PushCollab", run_path={run!r}, seed={seed}).start_learning()
print("GROUP_REWARDS " + json.dumps(group_rewards))
print("MEMBERS_LOST " + json.dumps(lost))
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_for(trainer: str, max_steps: Optional[float], folder: str) -> str:
    """The shipped POCA block, as ``trainer`` (poca or ppo), with ``max_steps`` if given."""
    with open(CONFIG) as f:
        raw = yaml.safe_load(f)
    block = dict(raw[BEHAVIOUR], trainer=trainer)
    if max_steps is not None:
        block["max_steps"] = float(max_steps)
    path = os.path.join(folder, f"{trainer}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({BEHAVIOUR: block}, f, sort_keys=False)
    return path


def run(trainer: str, seed: int, max_steps: Optional[float] = None, timeout: float = 1800) -> Dict[str, object]:
    """Train once; ``{"group_rewards": [...], "last100": mean, "wall": seconds, "output": tail}``."""
    with tempfile.TemporaryDirectory() as folder:
        config = config_for(trainer, max_steps, folder)
        script = DRIVER.format(root=ROOT, config=config, port=free_port(), seed=seed, stat=STAT, run=trainer,
                               lost_stat=LOST_STAT)
        started = time.time()
        proc = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True,
                              timeout=timeout)
        wall = time.time() - started
    out = proc.stdout + proc.stderr
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GROUP_REWARDS ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{trainer} seed {seed} failed (exit {proc.returncode}):\n{out[-3000:]}")
    rewards = json.loads(line.split(" ", 1)[1])
    lost_line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("MEMBERS_LOST "))
    lost = json.loads(lost_line.split(" ", 1)[1])[-100:]
    last = rewards[-100:]
    return {"group_rewards": rewards, "last100": float(sum(last) / len(last)) if last else float("nan"),
            "lost100": float(sum(lost) / len(lost)) if lost else float("nan"),
            "episodes": len(rewards), "wall": wall, "output": out[-2000:]}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--max-steps", type=float, default=None, help="agent steps per run (default: the YAML's)")
    parser.add_argument("--trainers", default="poca,ppo", help="comma-separated, run in this order per seed")
    args = parser.parse_args(argv)
    trainers = [t for t in args.trainers.split(",") if t]
    results: Dict[str, List[float]] = {t: [] for t in trainers}
    print(f"PushCollab over gRPC, last-100 mean group reward, max_steps {args.max_steps or 'from the YAML'}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'seed':>4} {'trainer':>7} {'last-100 group reward':>21} {'members lost':>12} {'group episodes':>14} "
          f"{'wall s':>7}")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for t in trainers:
            r = run(t, seed, args.max_steps)
            results[t].append(r["last100"])
            print(f"{seed:>4} {t:>7} {r['last100']:>21.3f} {r['lost100']:>12.2f} {r['episodes']:>14} "
                  f"{r['wall']:>7.0f}", flush=True)
    print("mean (min .. max) over seeds:")
    for t in trainers:
        v = results[t]
        print(f"  {t:>5}: {statistics.mean(v):.3f} ({min(v):.3f} .. {max(v):.3f})")


if __name__ == "__main__":
    main()
