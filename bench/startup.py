"""Start-up: seconds from ``unityagents-learn``'s launch to the scene's connection and to the first summary.

A Unity player takes seconds to start (its splash, the scene's loading) before it connects; our
trainer spends about two of its own importing TensorFlow. The run imports TensorFlow on a thread
of its own while the environments start, so the player's start-up and the import overlap. This
script shows how much of a player's start-up the run hides: it wraps a built-in scene as a build
(``bench/vs_mlagents.py``'s ``make_build``) that first sleeps ``--player-start-s`` seconds, as a
player's start-up would, and runs ``python learn_r22.py <the scene's Release 22 settings> --env=<build>``
``--runs`` times with that sleep and as many without, alternated, each stopped at its first summary::

    python bench/startup.py [--scene ppo/Hallway] [--player-start-s 2] [--runs 5]

Printed per run and as medians: seconds from launch to the "Connected new brain" line and to the
first summary line; then what the player's start-up added to the time to the first summary, as a
share of the sleep (1.00: none of it hidden, 0: all of it).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vs_mlagents  # noqa: E402
import zoo  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def slow_build(folder: str, scene: str, player_start_s: float) -> str:
    """``make_build``'s executable for ``scene``, sleeping ``player_start_s`` seconds before the scene starts."""
    path = vs_mlagents.make_build(folder, 0, scene)
    if player_start_s:
        with open(path) as f:
            lines = f.read().splitlines()
        lines.insert(1, f"sleep {player_start_s}")
        slow = os.path.join(folder, "slow-" + os.path.basename(path))
        with open(slow, "w") as f:
            f.write("\n".join(lines) + "\n")
        shutil.copymode(path, slow)
        return slow
    return path


def one_run(config: str, build: str, scratch: str, seed: int) -> Dict[str, float]:
    """Seconds from launch to the connection and to the first summary line of one run, which is then stopped."""
    cmd = [sys.executable, os.path.join(ROOT, "learn_r22.py"), config, f"--env={build}", "--run-id=startup",
           f"--results-dir={scratch}", "--force", "--no-graphics", f"--seed={seed}",
           f"--base-port={vs_mlagents.free_port()}"]
    marks: Dict[str, float] = {}
    seen: List[str] = []
    start = time.perf_counter()
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=scratch)
    try:
        for line in process.stdout:
            seen = (seen + [line.rstrip()])[-5:]
            if "Connected new brain" in line and "connected" not in marks:
                marks["connected"] = time.perf_counter() - start
            if " Step: " in line and "Mean Reward" in line:
                marks["first summary"] = time.perf_counter() - start
                break
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if "first summary" not in marks:
        last = "\n".join(seen) or "(no output)"
        raise SystemExit(f"startup.py: expected a summary line from {' '.join(cmd)}, but it ended first; its last "
                         f"lines were:\n{last}\nRun that command by hand to see the whole error.")
    return marks


def main(argv: List[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scene", default="ppo/Hallway", choices=sorted(zoo.ZOO), help="a zoo scene (bench/zoo.py)")
    p.add_argument("--player-start-s", type=float, default=2.0, help="the emulated player's start-up, seconds")
    p.add_argument("--runs", type=int, default=5, help="runs with the emulated start-up, and as many without")
    p.add_argument("--summary-freq", type=int, default=2000)
    args = p.parse_args(argv)
    if args.player_start_s <= 0 or args.runs < 1:
        p.error("--player-start-s must be > 0 and --runs >= 1")
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        config = zoo.run_config(args.scene, scratch, args.summary_freq)
        scene = zoo.ZOO[args.scene][0]
        builds = {0.0: slow_build(scratch, scene, 0.0), args.player_start_s: slow_build(scratch, scene,
                                                                                      args.player_start_s)}
        runs: Dict[float, List[Dict[str, float]]] = {s: [] for s in builds}
        for i in range(args.runs):
            for sleep, build in builds.items():
                marks = one_run(config, build, scratch, seed=i)
                runs[sleep].append(marks)
                connected = marks.get("connected", float("nan"))
                print(f"# player start-up {sleep:g} s, seed {i}: connected {connected:.2f} s, "
                      f"first summary {marks['first summary']:.2f} s", flush=True)
    medians = {s: {k: statistics.median(m[k] for m in ms if k in m) for k in ("connected", "first summary")}
               for s, ms in runs.items()}
    print(f"\n{args.scene}, {args.runs} runs each, seconds from launch (medians)")
    print("| player start-up | to the connection | to the first summary |")
    print("|---|---|---|")
    for sleep, m in medians.items():
        print(f"| {sleep:g} s | {m['connected']:.2f} | {m['first summary']:.2f} |")
    added = medians[args.player_start_s]["first summary"] - medians[0.0]["first summary"]
    print(f"\nThe player's {args.player_start_s:g} s of start-up added {added:.2f} s to the first summary: "
          f"{added / args.player_start_s:.2f} of it (1.00: none hidden).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
