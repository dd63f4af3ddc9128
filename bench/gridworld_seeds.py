"""A shipped example across seeds (GridWorld by default): its learn.py block trained once per seed.

GridWorld's only input is an 84x84 camera, so a run is slow (a few minutes on 2 cores) and a
setting that works on one seed can plateau on another; this script trains a scene's block as
shipped (or changed by ``--set``) with ``learn.py <scene> --train`` for each seed, in a fresh
process and a scratch directory, and reads the console's summary lines. Reported per seed: the
last mean reward, the mean of the last three summaries (less sensitive to one summary's few
episodes), the best mean of the run, the agent-steps reached and the wall time; then the minimum
and the mean of the first two columns over the seeds, and how many seeds end at the target.

TensorFlow's CPU kernels round differently, and a seed's course follows them: oneDNN's kernels
are on by default where the CPU has AVX-512 VNNI, Eigen's elsewhere. ``--kernels both`` trains
every seed twice, with ``TF_ENABLE_ONEDNN_OPTS=0`` and ``=1``, and prints the two side by side,
so one machine shows what both kinds of CPU give.

    python bench/gridworld_seeds.py --seeds 0,1,2
    python bench/gridworld_seeds.py --seeds 0,1 --parallel 2 --set buffer_size=1024 --set num_epoch=3
    python bench/gridworld_seeds.py --scene Basic --brain BasicBrain --target 0.9 --seeds 0,1,2,3,4 --kernels both
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
#: The summary line of one brain: "<brain>: Step: N. Mean Reward: R."
LINE = r"{brain}: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)\."
#: --kernels: the values of TF_ENABLE_ONEDNN_OPTS each seed runs with (None: as the machine has it).
KERNELS = {"default": (None,), "onednn": ("1",), "eigen": ("0",), "both": ("0", "1")}


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


def write_config(base: str, brain: str, overrides: Dict[str, object], path: str) -> None:
    """``base`` with ``brain``'s block changed by ``overrides``, written to ``path``."""
    with open(base, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    block = config.get(brain)
    if not isinstance(block, dict):
        raise SystemExit(f"{base}: expected a {brain} block (a mapping), found {block!r}; pass a "
                         f"--config that has one, or the scene's --brain")
    block.update(overrides)
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)


def run_seed(scene: str, brain: str, seed: int, onednn: Optional[str], config: str, extra: List[str],
             log_dir: Optional[str]) -> Dict[str, float]:
    """One ``learn.py <scene> --train`` run; its summary lines reduced to the reported figures."""
    env = dict(os.environ)
    if onednn is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = onednn
    with tempfile.TemporaryDirectory() as scratch:
        start = time.time()
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "learn.py"), scene, "--train", "--seed", str(seed),
             "--trainer-config", config, "--base-port", str(free_port()), *extra],
            cwd=scratch, capture_output=True, text=True, env=env)
        wall = time.time() - start
    output = proc.stdout + proc.stderr
    if log_dir:
        name = f"{scene}_seed{seed}" + ("" if onednn is None else f"_onednn{onednn}")
        with open(os.path.join(log_dir, f"{name}.log"), "w", encoding="utf-8") as f:
            f.write(output)
    rows = [(int(step), float(mean)) for step, mean in re.findall(LINE.format(brain=re.escape(brain)), output)]
    if proc.returncode != 0 or not rows:
        raise SystemExit(f"learn.py {scene}, seed {seed}: exit code {proc.returncode}, {len(rows)} summary "
                         f"lines of {brain}; expected 0 and at least one. Its output ends:\n{output[-3000:]}")
    means = [m for _, m in rows]
    return {"final": means[-1], "last3": statistics.mean(means[-3:]), "best": max(means),
            "steps": rows[-1][0], "wall": wall}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="GridWorld", help="built-in scene [default: GridWorld]")
    parser.add_argument("--brain", default="GridWorldBrain", help="its brain, whose block is trained and read "
                        "[default: GridWorldBrain]")
    parser.add_argument("--target", type=float, default=0.8, help="the final mean counted as reached [default: 0.8]")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds [default: 0,1,2]")
    parser.add_argument("--kernels", choices=tuple(KERNELS), default="default",
                        help="TensorFlow's CPU kernels: as this machine has them, oneDNN's (TF_ENABLE_ONEDNN_OPTS=1), "
                             "Eigen's (=0), or both side by side [default: default]")
    parser.add_argument("--config", default=CONFIG, help="trainer YAML to start from [default: the shipped one]")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one key of the brain's block (repeatable)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once; their wall times then include each other's load [default: 1]")
    parser.add_argument("--log-dir", help="keep each run's console output here")
    parser.add_argument("--learn-args", default="", help="extra learn.py options, one quoted string")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    kernels = KERNELS[args.kernels]
    overrides = parse_overrides(args.set)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    runs = [(seed, k) for k in kernels for seed in seeds]
    with tempfile.TemporaryDirectory() as scratch:
        config = os.path.join(scratch, "config.yaml")
        write_config(os.path.abspath(args.config), args.brain, overrides, config)
        with ThreadPoolExecutor(max(1, args.parallel)) as pool:
            results = list(pool.map(lambda r: run_seed(args.scene, args.brain, r[0], r[1], config,
                                                       args.learn_args.split(), args.log_dir), runs))
    changes = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "none"
    print(f"{args.scene}, {args.brain} of {os.path.relpath(os.path.abspath(args.config), ROOT)}, overrides: {changes}")
    for k in kernels:
        label = {None: "TensorFlow's default kernels", "0": "TF_ENABLE_ONEDNN_OPTS=0 (Eigen's kernels)",
                 "1": "TF_ENABLE_ONEDNN_OPTS=1 (oneDNN's kernels)"}[k]
        rows = [(seed, r) for (seed, kk), r in zip(runs, results) if kk == k]
        print(label)
        print(f"{'seed':>4} {'final':>7} {'last 3':>7} {'best':>6} {'steps':>7} {'wall s':>7}")
        for seed, r in rows:
            print(f"{seed:>4} {r['final']:>7.3f} {r['last3']:>7.3f} {r['best']:>6.3f} {r['steps']:>7d} "
                  f"{r['wall']:>7.0f}")
        finals, last3 = [r["final"] for _, r in rows], [r["last3"] for _, r in rows]
        print(f" min {min(finals):>7.3f} {min(last3):>7.3f}")
        print(f"mean {statistics.mean(finals):>7.3f} {statistics.mean(last3):>7.3f}")
        print(f"seeds with a final mean >= {args.target}: {sum(f >= args.target for f in finals)}/{len(finals)}")


if __name__ == "__main__":
    main()
