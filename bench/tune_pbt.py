"""Population-based training rescues a bad start: ML-Agents' 3DBall settings with learning_rate 1.0e-5.

Side by side on built-in 3DBall, one after the other on this machine:

1. one unityagents-learn run with learning_rate 1.0e-5 for --max-steps agent-steps: its mean reward
   (last 2 summaries) and the first summary at or above 90;
2. unityagents-tune with population-based training, 4 members all starting from the same settings
   (``scheduler.start: config``), learning rate, beta and epsilon mutated every --interval steps:
   the best member's mean reward by --max-steps per member and when a member first passed 90
   (each member's own step counter, which an exploit copies from the member it copies).

    python bench/tune_pbt.py [--max-steps 150000] [--interval 15000] [--skip-single]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_common import base_config, first_passing, learn, mean_last, rows, tune  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=150000)
    parser.add_argument("--interval", type=int, default=15000)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument("--port", type=int, default=21000)
    args = parser.parse_args()
    raw, behavior = base_config()
    block = raw["behaviors"][behavior]
    block["hyperparameters"]["learning_rate"] = 1.0e-5
    block["max_steps"] = args.max_steps
    hp = f"behaviors.{behavior}.hyperparameters"
    folder = tempfile.mkdtemp(prefix="tune_pbt_")
    print(f"3DBall, learning_rate 1.0e-5, {args.max_steps} agent-steps; results in {folder}")
    if not args.skip_single:
        summaries, seconds = learn(folder, raw, "single", args.port)
        print(f"single run:  mean reward (last 2 summaries) {mean_last(summaries, 2):7.2f}  max summary "
              f"{max(v for _, v in summaries):7.2f}  first >= 90: {first_passing(summaries, 90) or 'never'}  "
              f"({seconds:.0f} s)")
    sweep = {"search": {f"{hp}.learning_rate": {"loguniform": [1.0e-5, 1.0e-3]},
                        f"{hp}.beta": {"loguniform": [1.0e-4, 1.0e-2]},
                        f"{hp}.epsilon": {"uniform": [0.1, 0.3]}},
             "objective": {"tag": "Environment/Cumulative Reward", "mode": "max", "last": 2},
             "budget": {"trials": args.members, "max_steps": args.max_steps, "concurrent": args.members},
             "scheduler": {"name": "pbt", "start": "config", "perturbation_interval": args.interval,
                           "quantile_fraction": 0.25, "resample_probability": 0.25}, "seed": 0}
    start = time.time()
    tune(folder, raw, sweep, "pbt", args.port + 100)
    seconds = time.time() - start
    trials = rows(os.path.join(folder, "pbt", "trials.csv"))
    members = rows(os.path.join(folder, "pbt", "members.csv"))
    best = max(trials, key=lambda r: float(r["objective"] or "nan"))
    passed = [(int(m["agent_steps"]), m["trial"]) for m in members
              if m["event"] == "summary" and m["last_value"] and float(m["last_value"]) >= 90]
    exploits = sum(1 for m in members if m["event"] == "exploit")
    print(f"PBT x{args.members}: best member {best['trial']} mean reward (last 2 summaries) "
          f"{float(best['objective']):7.2f} at {best['agent_steps']} steps; first >= 90: "
          f"{min(passed)[0] if passed else 'never'}{' (' + min(passed)[1] + ')' if passed else ''}; "
          f"{exploits} exploits ({seconds:.0f} s)")
    for r in sorted(trials, key=lambda r: r["trial"]):
        print(f"  {r['trial']}: {r['status']:<13} objective {float(r['objective'] or 'nan'):7.2f}  "
              f"lr {float(r[f'{hp}.learning_rate']):.2e}  beta {float(r[f'{hp}.beta']):.2e}  "
              f"epsilon {float(r[f'{hp}.epsilon']):.3f}")


if __name__ == "__main__":
    main()
