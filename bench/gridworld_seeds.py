"""GridWorld across seeds: the shipped GridWorldBrain block, trained once per seed, its final means.

GridWorld's only input is an 84x84 camera, so a run is slow (a few minutes on 2 cores) and a
setting that works on one seed can plateau on another; this script trains the block as shipped
(or changed by ``--set``) with ``learn.py GridWorld --train`` for each seed, in a fresh process
and a scratch directory, and reads the console's summary lines. Reported per seed: the last mean
reward, the mean of the last three summaries (less sensitive to one summary's few episodes), the
best mean of the run, the agent-steps reached and the wall time; then the minimum and the mean of
the first two columns over the seeds. The target of the shipped block is a last mean of 0.8 on
every seed.

    python bench/gridworld_seeds.py --seeds 0,1,2
    python bench/gridworld_seeds.py --seeds 0,1 --parallel 2 --set buffer_size=1024 --set num_epoch=3
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "trainer_configurations.yaml")
BRAIN = "GridWorldBrain"
LINE = re.compile(rf"{BRAIN}: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)\.")
TARGET = 0.8


def free_port() -> int:
    """A port free on 127.0.0.1 now, for the scene that learn.py starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_overrides(pairs: List[str]) -> Dict[str, object]:
    """``key=value`` pairs, each value read as YAML (so ``5e-4`` is a number and ``true`` a bool)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set expects key=value (e.g. buffer_size=1024), got {pair!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def write_config(base: str, overrides: Dict[str, object], path: str) -> None:
    """``base`` with the GridWorldBrain block changed by ``overrides``, written to ``path``."""
    with open(base, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    block = config.get(BRAIN)
    if not isinstance(block, dict):
        raise SystemExit(f"{base}: expected a {BRAIN} block (a mapping), found {block!r}; pass a "
                         f"--config that has one")
    block.update(overrides)
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)


def run_seed(seed: int, config: str, extra: List[str], log_dir: Optional[str]) -> Dict[str, float]:
    """One ``learn.py GridWorld --train`` run; its summary lines reduced to the reported figures."""
    with tempfile.TemporaryDirectory() as scratch:
        start = time.time()
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "learn.py"), "GridWorld", "--train", "--seed", str(seed),
             "--trainer-config", config, "--base-port", str(free_port()), *extra],
            cwd=scratch, capture_output=True, text=True)
        wall = time.time() - start
    output = proc.stdout + proc.stderr
    if log_dir:
        with open(os.path.join(log_dir, f"gridworld_seed{seed}.log"), "w", encoding="utf-8") as f:
            f.write(output)
    rows = [(int(step), float(mean)) for step, mean in LINE.findall(output)]
    if proc.returncode != 0 or not rows:
        raise SystemExit(f"learn.py GridWorld, seed {seed}: exit code {proc.returncode}, {len(rows)} summary "
                         f"lines; expected 0 and at least one. Its output ends:\n{output[-3000:]}")
    means = [m for _, m in rows]
    return {"final": means[-1], "last3": statistics.mean(means[-3:]), "best": max(means),
            "steps": rows[-1][0], "wall": wall}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds [default: 0,1,2]")
    parser.add_argument("--config", default=CONFIG, help="trainer YAML to start from [default: the shipped one]")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one key of the GridWorldBrain block (repeatable)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once; their wall times then include each other's load [default: 1]")
    parser.add_argument("--log-dir", help="keep each run's console output here")
    parser.add_argument("--learn-args", default="", help="extra learn.py options, one quoted string")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    overrides = parse_overrides(args.set)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        config = os.path.join(scratch, "gridworld.yaml")
        write_config(os.path.abspath(args.config), overrides, config)
        with ThreadPoolExecutor(max(1, args.parallel)) as pool:
            results = list(pool.map(lambda s: run_seed(s, config, args.learn_args.split(), args.log_dir), seeds))
    changes = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "none"
    print(f"GridWorld, {BRAIN} of {os.path.relpath(os.path.abspath(args.config), ROOT)}, overrides: {changes}")
    print(f"{'seed':>4} {'final':>7} {'last 3':>7} {'best':>6} {'steps':>7} {'wall s':>7}")
    for seed, r in zip(seeds, results):
        print(f"{seed:>4} {r['final']:>7.3f} {r['last3']:>7.3f} {r['best']:>6.3f} {r['steps']:>7d} {r['wall']:>7.0f}")
    finals, last3 = [r["final"] for r in results], [r["last3"] for r in results]
    print(f" min {min(finals):>7.3f} {min(last3):>7.3f}")
    print(f"mean {statistics.mean(finals):>7.3f} {statistics.mean(last3):>7.3f}")
    print(f"seeds with a final mean >= {TARGET}: {sum(f >= TARGET for f in finals)}/{len(finals)}")


if __name__ == "__main__":
    main()
