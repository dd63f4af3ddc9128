"""How long a run's first updates take, from launch: one zoo scene, this checkout and another beside it.

A trainer's first update also waits for TensorFlow to compile the update's graph (prune it, run the
graph optimizer over it, build its executors) unless that compile already ran beside the first steps
(``Trainer.compile_ahead``). This script runs a scene of ``bench/zoo.py`` (its Release 22 settings,
its build, seed 0) with this checkout's ``learn_r22.py`` and, with ``--against DIR``, with the
checkout at DIR, alternating the two ``--runs`` times. Each run is stopped after its ``--updates``-th
update (a SAC update is one gradient step). Per run it prints the seconds from launch to the end of
the graph build and to the end of the first update, the first update's wall time and the median of
the next ones; then per checkout the medians over its runs, and the ratio of the first updates' wall
times::

    python bench/first_update.py --scene ppo/Hallway --runs 3 [--against ../other-checkout] [--updates 4]

The first update's time is the compile it waited for plus the update itself (the next ones show
what an update alone costs). The machine should be otherwise idle; note its load beside the figures.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import vs_mlagents  # noqa: E402
import zoo  # noqa: E402

#: Run in the checkout under test: times the build and every update of the PPO (and POCA) and SAC
#: trainers on the line ``BENCH <what> <seconds since the epoch> [<duration>]``, then runs learn_r22.
WRAPPER = r"""
import os, runpy, sys, time
sys.path.insert(0, os.getcwd())
import runner.controller as controller
import trainers.ppo.trainer as ppo
import trainers.sac.trainer as sac

def say(*parts):
    print("BENCH", *parts, flush=True)

build = controller.TrainerController._build
def timed_build(self):
    result = build(self)
    say("build", repr(time.time()))
    return result
controller.TrainerController._build = timed_build

for cls in (ppo.PPOTrainer, sac.SACTrainer):
    def wrap(update):
        def timed_update(self, batch):
            start = time.time()
            result = update(self, batch)
            say("update", repr(start), repr(time.time() - start))
            return result
        return timed_update
    cls.update = wrap(cls.update)

sys.argv = ["learn_r22.py"] + sys.argv[1:]
runpy.run_path("learn_r22.py", run_name="__main__")
"""


def one_run(checkout: str, config: str, build: str, scratch: str, updates: int, timeout: float) -> Dict:
    cmd = [sys.executable, "-c", WRAPPER, config, f"--env={build}", "--run-id=first-update",
           f"--results-dir={scratch}", "--force", "--no-graphics", "--seed=0",
           f"--base-port={vs_mlagents.free_port()}"]
    launched = time.time()
    proc = subprocess.Popen(cmd, cwd=checkout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    built: Optional[float] = None
    times: List[tuple] = []
    tail: List[str] = []
    try:
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-12:]
            parts = line.split()
            if parts[:2] == ["BENCH", "build"]:
                built = float(parts[2]) - launched
            elif parts[:2] == ["BENCH", "update"]:
                times.append((float(parts[2]) - launched, float(parts[3])))
                if len(times) >= updates:
                    break
            if time.time() - launched > timeout:
                break
    finally:
        vs_mlagents._signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
    if built is None or not times:
        raise SystemExit(f"{checkout}: the run gave no build or update line within {timeout:.0f} s; its last "
                         "lines:\n" + "\n".join(tail))
    first_start, first = times[0]
    rest = [d for _, d in times[1:]]
    return {"build": built, "first_end": first_start + first, "first": first,
            "next": statistics.median(rest) if rest else None}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="ppo/Hallway", choices=sorted(zoo.ZOO))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--against", help="another checkout's root, run alternately with this one")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed to each run")
    args = parser.parse_args(argv)
    checkouts = {"this": ROOT}
    if args.against:
        if not os.path.isfile(os.path.join(args.against, "learn_r22.py")):
            raise SystemExit(f"--against {args.against}: no learn_r22.py there; give the root of a checkout.")
        checkouts["against"] = os.path.abspath(args.against)
    scene = zoo.ZOO[args.scene][0]
    results: Dict[str, List[Dict]] = {label: [] for label in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        config = zoo.run_config(args.scene, tmp, 2000)
        build = vs_mlagents.make_build(tmp, 0.0, scene)
        for i in range(args.runs):
            for label, checkout in checkouts.items():
                r = one_run(checkout, config, build, os.path.join(tmp, f"{label}-{i}"), args.updates, args.timeout)
                results[label].append(r)
                following = "-" if r["next"] is None else f"{r['next'] * 1000:.0f} ms"
                print(f"{args.scene} {label} run {i}: built at {r['build']:.2f} s, first update "
                      f"{r['first'] * 1000:.0f} ms (ends at {r['first_end']:.2f} s), next ones {following}", flush=True)
    medians = {}
    for label, runs in results.items():
        medians[label] = statistics.median(r["first"] for r in runs)
        print(f"{args.scene} {label} ({checkouts[label]}): medians over {len(runs)} runs: built at "
              f"{statistics.median(r['build'] for r in runs):.2f} s, first update {medians[label] * 1000:.0f} ms, "
              f"first update ends {statistics.median(r['first_end'] - r['build'] for r in runs):.2f} s after the build")
    if "against" in medians:
        print(f"{args.scene}: first update, this / against: {medians['this'] / medians['against']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
