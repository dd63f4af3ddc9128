"""A sweep on a 2-node Ray cluster on this machine, killed mid-way (SIGKILL) and resumed.

A head and one more node (each a real raylet, 1 CPU each, on 127.0.0.1 only), and a TPE + ASHA
sweep of --trials trials of --max-steps on built-in 3DBall, 2 at a time, driven by
``unityagents-tune --ray-address <head>``. Once --kill-after trials have started, the sweep's process
is killed with SIGKILL; the trials' runs end with it; ``--resume`` then finishes the sweep.

Printed: the node each trial ran on, the trials' runs alive after the kill, and whether every trial is
accounted for in trials.csv (its status, agent-steps and node).

    python bench/tune_cluster.py [--trials 12] [--max-steps 12000] [--kill-after 4]
"""
from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_common import ROOT, base_config, rows, tune  # noqa: E402

from unityagents_tune.guard import running  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=12000)
    parser.add_argument("--grace", type=int, default=2400)
    parser.add_argument("--kill-after", type=int, default=4)
    parser.add_argument("--port", type=int, default=25000)
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    try:
        raw, behavior = base_config()
        folder = tempfile.mkdtemp(prefix="tune_cluster_")
        sweep = yaml.safe_load(open(os.path.join(ROOT, "config", "tuning", "3DBall_tpe.yaml"), encoding="utf-8"))
        sweep["budget"] = {"trials": args.trials, "max_steps": args.max_steps, "concurrent": 2}
        sweep["scheduler"] = {"name": "tpe", "early_stopping": "asha", "grace_steps": args.grace,
                              "reduction_factor": 3}
        print(f"2-node loopback cluster at {cluster.address}; {args.trials} trials of {args.max_steps}; "
              f"results in {folder}")
        trials_dir = os.path.join(folder, "tpe", "trials")
        start = time.time()
        first = tune(folder, raw, sweep, "tpe", args.port, f"--ray-address={cluster.address}", wait=False)
        while len([f for f in os.listdir(trials_dir) if f.endswith(".history.csv")]
                  if os.path.isdir(trials_dir) else []) < args.kill_after:
            if first.poll() is not None:
                raise SystemExit(f"the sweep ended before the kill; see {folder}/tpe.out")
            time.sleep(0.5)
        first.send_signal(signal.SIGKILL)
        first.wait()
        started = sorted(f[: -len(".history.csv")] for f in os.listdir(trials_dir) if f.endswith(".history.csv"))
        killed_at = time.time() - start
        deadline = time.time() + 90
        while running(str(trials_dir)) and time.time() < deadline:
            time.sleep(0.5)
        print(f"killed the sweep after {killed_at:.0f} s with {len(started)} trials started ({', '.join(started)}); "
              f"trial runs alive {time.time() + 90 - deadline:.0f} s later: {len(running(str(trials_dir)))}")
        second = tune(folder, raw, sweep, "tpe", args.port, f"--ray-address={cluster.address}", "--resume")
        print(f"resumed; exit status {second.returncode}; {time.time() - start:.0f} s in all")
        trials = rows(os.path.join(folder, "tpe", "trials.csv"))
        nodes = collections.Counter(n for r in trials for n in r["node"].split(",") if n)
        statuses = collections.Counter(r["status"] for r in trials)
        run = sum(int(r["agent_steps"]) for r in trials)
        print(f"trials.csv: {len(trials)} of {args.trials} trials; {dict(statuses)}; trials per node {dict(nodes)}; "
              f"{run} agent-steps of {args.trials * args.max_steps}")
        for r in trials:
            starts = sum(1 for line in open(os.path.join(trials_dir, r["trial"] + ".log")) if line.startswith("--- "))
            print(f"  {r['trial']}: {r['status']:<13} {r['agent_steps']:>6} steps on {r['node']:<18} {starts} start(s)"
                  f"{' (resumed)' if starts > 1 else ''}  objective {r['objective']}")
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
