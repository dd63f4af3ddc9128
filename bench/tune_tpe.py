"""A TPE + ASHA sweep of 12 trials against ML-Agents' default 3DBall settings, at the same budget per trial.

Side by side on built-in 3DBall, one after the other on this machine:

1. one unityagents-learn run of config/ppo/3DBall.yaml (ML-Agents' settings) for --max-steps;
2. unityagents-tune with Optuna's TPE and ASHA early stopping (grace --grace steps, reduction
   factor 3), 12 trials of at most --max-steps each over learning rate, beta, epsilon, batch size
   and layers (config/tuning/3DBall_tpe.yaml's space), 2 at a time.

Printed: each one's objective (mean reward of the last 3 summaries), the best trial's settings, and
the agent-steps the early stopping saved (against every trial running to --max-steps).

    python bench/tune_tpe.py [--max-steps 24000] [--grace 4800] [--trials 12]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_common import ROOT, base_config, first_passing, learn, mean_last, rows, tune  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=24000)
    parser.add_argument("--grace", type=int, default=4800)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--port", type=int, default=23000)
    parser.add_argument("--skip-default", action="store_true")
    args = parser.parse_args()
    raw, behavior = base_config()
    raw["behaviors"][behavior]["max_steps"] = args.max_steps
    folder = tempfile.mkdtemp(prefix="tune_tpe_")
    print(f"3DBall, {args.max_steps} agent-steps per run; results in {folder}")
    if not args.skip_default:
        summaries, seconds = learn(folder, raw, "default", args.port)
        print(f"ML-Agents' settings: objective {mean_last(summaries, 3):7.2f}  first >= 90: "
              f"{first_passing(summaries, 90) or 'never'}  ({seconds:.0f} s)")
    sweep = yaml.safe_load(open(os.path.join(ROOT, "config", "tuning", "3DBall_tpe.yaml"), encoding="utf-8"))
    sweep["budget"] = {"trials": args.trials, "max_steps": args.max_steps, "concurrent": 2}
    sweep["scheduler"] = {"name": "tpe", "early_stopping": "asha", "grace_steps": args.grace, "reduction_factor": 3}
    start = time.time()
    tune(folder, raw, sweep, "tpe", args.port + 100)
    seconds = time.time() - start
    trials = rows(os.path.join(folder, "tpe", "trials.csv"))
    members = rows(os.path.join(folder, "tpe", "members.csv"))
    passed = {}
    for m in members:
        if m["event"] == "summary" and m["last_value"] and float(m["last_value"]) >= 90:
            passed.setdefault(m["trial"], int(m["agent_steps"]))
    best = max(trials, key=lambda r: (float(r["objective"] or "-inf"), -passed.get(r["trial"], 10 ** 9)))
    run = sum(int(r["agent_steps"]) for r in trials)
    full = args.max_steps * len(trials)
    statuses = {s: sum(1 for r in trials if r["status"] == s) for s in sorted({r["status"] for r in trials})}
    print(f"TPE + ASHA, {len(trials)} trials: best {best['trial']} objective {float(best['objective']):7.2f} "
          f"first >= 90: {passed.get(best['trial'], 'never')} ({seconds:.0f} s); {statuses}")
    print(f"  agent-steps run {run} of {full}: early stopping saved {full - run} ({100 * (full - run) / full:.1f}%)")
    keys = [k for k in trials[0] if k.startswith("behaviors.")]
    print("  best settings: " + ", ".join(f"{k.split('.')[-1]}={best[k]}" for k in keys))
    for r in sorted(trials, key=lambda r: r["trial"]):
        print(f"  {r['trial']}: {r['status']:<13} objective {float(r['objective'] or 'nan'):7.2f} at "
              f"{r['agent_steps']:>6}  first >= 90: {passed.get(r['trial'], '-'):>6}  "
              + ", ".join(f"{k.split('.')[-1]}={float(r[k]):.3g}" for k in keys))


if __name__ == "__main__":
    main()
