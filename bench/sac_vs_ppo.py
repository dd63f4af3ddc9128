"""SAC against our PPO on 3DBall: agent-steps and seconds to a mean reward of 90, side by side.

For each seed, PPO (the shipped ``trainer_configurations.yaml``) and then SAC
(``config/sac/3DBall.yaml``) train through ``learn.py 3DBall --train`` over the real socket, with
the same ``--max-steps`` and ``--env-args`` (e.g. ``"--frame-time-ms 5"``: each environment step
costs 5 ms more, as a real Unity build's would, which is where reusing samples pays). Reported per
run: the agent-steps and the trainer's elapsed seconds at the first summary whose mean reward reaches
the target, the lowest mean after it (collapse check), the last mean, and the process's wall time.
Alternating the two trainers seed by seed keeps a changing machine load from favouring one.

    python bench/sac_vs_ppo.py --seeds 1
    python bench/sac_vs_ppo.py --seeds 1 --env-args "--frame-time-ms 5"
    python bench/sac_vs_ppo.py --seeds 3 --trainers ppo,sac,sac2 --config sac2=my_sac_variant.yaml

``--config NAME=PATH`` adds a variant (e.g. another ``steps_per_update``) measured in the same runs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from typing import Dict, List, Optional

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from train import run_seed  # noqa: E402  (bench/train.py: one learn.py run, parsed)

BRAIN = "Ball3DBrain"
CONFIGS = {"ppo": os.path.join(ROOT, "trainer_configurations.yaml"),
           "sac": os.path.join(ROOT, "config", "sac", "3DBall.yaml")}


def with_max_steps(path: str, max_steps: float, folder: str, name: str) -> str:
    """A copy of the configuration ``path`` whose 3DBall block trains for ``max_steps`` agent steps."""
    with open(path) as f:
        raw = yaml.safe_load(f)
    raw[BRAIN] = dict(raw.get(BRAIN) or {}, max_steps=float(max_steps))
    out = os.path.join(folder, f"{name}.yaml")
    with open(out, "w") as f:
        yaml.safe_dump(raw, f, sort_keys=False)
    return out


def _fmt(value: Optional[float], width: int, digits: int = 0) -> str:
    return f"{'-' if value is None else f'{value:.{digits}f}':>{width}}"


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (default 1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--max-steps", type=float, default=6.0e4, help="agent steps per run (default 6e4)")
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--env-args", default="", help='extra scene arguments, e.g. "--frame-time-ms 5"')
    parser.add_argument("--trainers", default="ppo,sac", help="comma-separated, run in this order per seed")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=PATH",
                        help="another configuration to run as trainer NAME (e.g. a SAC variant), repeatable")
    args = parser.parse_args(argv)
    for item in args.config:
        name, sep, path = item.partition("=")
        if not sep or not name or not os.path.isfile(path):
            parser.error(f"--config expects NAME=PATH of an existing YAML file, got {item!r}")
        CONFIGS[name] = os.path.abspath(path)
    trainers = [t for t in args.trainers.split(",") if t]
    results: Dict[str, List[Dict[str, Optional[float]]]] = {t: [] for t in trainers}
    print(f"3DBall, target mean {args.target}, {args.max_steps:.0f} agent steps per run, "
          f"env args {args.env_args or '(none)'}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'seed':>4} {'trainer':>7} {'steps to target':>15} {'s to target':>11} {'min after':>9} "
          f"{'final':>6} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as folder:
        configs = {t: with_max_steps(CONFIGS[t], args.max_steps, folder, t) for t in trainers}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for t in trainers:
                extra = ["--trainer-config", configs[t], "--run-path", t]
                if args.env_args:
                    extra.append(f"--env-args={args.env_args}")
                r = run_seed("3DBall", BRAIN, seed, args.target, extra)
                results[t].append(r)
                print(f"{seed:>4} {t:>7} {_fmt(r['steps_to_target'], 15)} {_fmt(r['seconds_to_target'], 11)} "
                      f"{_fmt(r['min_after'], 9, 1)} {_fmt(r['final'], 6, 1)} {_fmt(r['wall'], 7)}", flush=True)
    print(f"median over the runs that reached {args.target} (reached / runs):")
    for t in trainers:
        reached = [r for r in results[t] if r["steps_to_target"] is not None]
        steps = statistics.median(r["steps_to_target"] for r in reached) if reached else None
        seconds = statistics.median(r["seconds_to_target"] for r in reached) if reached else None
        print(f"  {t}: {_fmt(steps, 8)} agent steps, {_fmt(seconds, 5)} s ({len(reached)}/{len(results[t])})")


if __name__ == "__main__":
    main()
