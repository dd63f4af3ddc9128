"""Variable-length observations: the attention encoder against the padded-and-flattened baseline on Sorter.

Per seed, the same PPO settings (the shipped ``SorterBrain`` block, ``--max-steps`` agent steps)
train twice over gRPC through ``learn.py``: on ``Sorter``, whose tiles arrive as a BufferSensor
(``[5, 8]``, dimension properties ``[VariableSize, None]``: entity embedding and residual
self-attention), and on ``SorterFlat``, the same observation sent as one vector sensor of 40 floats
(an MLP over the padded slots). The two runs of a seed alternate, so a changing machine load
favours neither. Reported per run: the mean reward of the last summary, the best summary, and
the score of the exported ``SorterBrain.onnx`` run by the academy as Unity runs it (one ``obs_k``
per sensor, stochastic actions) over ``--episodes`` episodes. For scale: random actions score
about -0.06 and the scripted heuristic (which reads the hidden tile order) 0.90.

    python bench/variable_length.py                 # 3 seeds, 6e4 steps each
    python bench/variable_length.py --seeds 1 --max-steps 3e4
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
from typing import Dict, List, Optional

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRAIN = "SorterBrain"
BEHAVIOUR = "Sorter"  # the brain's name over gRPC (Unity's example's)
LINE = re.compile(r"Sorter\?team=0: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)\.")
VARIANTS = {"attention": "Sorter", "flattened": "SorterFlat"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_with(max_steps: float, folder: str) -> str:
    """The shipped configuration with ``SorterBrain.max_steps`` set."""
    with open(os.path.join(ROOT, "trainer_configurations.yaml"), encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    raw[BRAIN] = dict(raw[BRAIN], max_steps=float(max_steps))
    path = os.path.join(folder, "sorter.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(raw, f, sort_keys=False)
    return path


def academy_score(scene: str, onnx: str, episodes: int, seed: int) -> float:
    out = subprocess.run([sys.executable, "-m", "academy", scene, "--seed", str(seed + 100), "--episodes",
                          str(episodes), "--brain", f"{BRAIN}=internal:{onnx}"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return float([s for s in out.stdout.splitlines() if s.startswith("mean_reward")][-1].split()[-1])


def run(scene: str, seed: int, config: str, episodes: int) -> Dict[str, Optional[float]]:
    with tempfile.TemporaryDirectory() as scratch:
        start = time.time()
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "learn.py"), scene, "--protocol", "grpc", "--train",
                               "--seed", str(seed), "--trainer-config", config, "--run-path", "bench",
                               "--base-port", str(free_port())], cwd=scratch, capture_output=True, text=True)
        wall = time.time() - start
        if proc.returncode != 0:
            raise SystemExit(f"learn.py {scene} failed for seed {seed}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        means = [float(m[1]) for m in LINE.findall(proc.stdout + proc.stderr)]
        onnx = os.path.join(scratch, "models", "bench", f"{BEHAVIOUR}.onnx")
        score = academy_score(scene, onnx, episodes, seed)
    return {"last": means[-1] if means else None, "best": max(means) if means else None, "onnx": score,
            "wall": wall}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--max-steps", type=float, default=6.0e4, help="agent steps per run (default 6e4)")
    parser.add_argument("--episodes", type=int, default=300, help="academy episodes scoring each ONNX (default 300)")
    args = parser.parse_args(argv)
    results: Dict[str, List[Dict[str, Optional[float]]]] = {v: [] for v in VARIANTS}
    print(f"Sorter, {args.max_steps:.0f} agent steps per run; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'seed':>4} {'model':>10} {'last mean':>9} {'best':>6} {'onnx in academy':>15} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as folder:
        config = config_with(args.max_steps, folder)
        for seed in range(args.seeds):
            for variant, scene in VARIANTS.items():
                r = run(scene, seed, config, args.episodes)
                results[variant].append(r)
                print(f"{seed:>4} {variant:>10} {r['last']:>9.3f} {r['best']:>6.3f} {r['onnx']:>15.3f} "
                      f"{r['wall']:>7.0f}", flush=True)
    print("mean over seeds (last mean / onnx in academy):")
    for variant in VARIANTS:
        rows = results[variant]
        print(f"  {variant:>10}: {statistics.mean(r['last'] for r in rows):.3f} / "
              f"{statistics.mean(r['onnx'] for r in rows):.3f}")


if __name__ == "__main__":
    main()
