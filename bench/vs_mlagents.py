"""Side by side: our trainer vs Unity's own ``mlagents-learn`` 1.1.0, same scene, same settings, over gRPC.

The scene is the built-in 3DBall serving the modern protocol (``python -m academy 3DBall
--mlagents-port N``), wrapped as a "build": an executable ``Ball3D.x86_64`` that ``mlagents-learn
--env`` launches exactly as it launches a Unity player (``--mlagents-port``, ``-logFile``,
``-batchmode -nographics``). Our trainer launches the same wrapper with ``--protocol grpc``. Both get
the same PPO settings: ML-Agents' own 3DBall settings (``--settings mlagents``: 12k-step rollouts,
3 epochs of minibatches of 64) or ours (``--settings ours``: the shipped ``Ball3DBrain`` block). Each
run is a subprocess whose console lines are time-stamped as they arrive, so both sides are timed the
same way: seconds from launch (start-up included) and agent-steps/s between the first summary line
and the first summary whose mean reward reaches the target (start-up excluded).

Unity's trainer declares Python <= 3.10.12, so it lives in its own virtual environment:

    python -m venv mla-venv
    mla-venv/bin/pip install torch==2.13.0
    mla-venv/bin/pip install --no-deps --ignore-requires-python mlagents==1.1.0 mlagents-envs==1.1.0
    mla-venv/bin/pip install protobuf==3.20.3 grpcio numpy==1.23.5 attrs "cattrs<1.7" h5py pyyaml \\
        tensorboard Pillow cloudpickle filelock gym pettingzoo six "setuptools<70"
    python bench/vs_mlagents.py --mlagents mla-venv/bin/mlagents-learn [--seeds 1] [--settings mlagents] \
        [--threaded]

Without ``--mlagents`` the script runs the ``mlagents-learn`` found on PATH (an activated virtual
environment's), and stops with one line saying so when there is none.

``--threaded`` gives both trainers ``threaded: true`` (Release 22: the trainer in a thread of its own;
ours: the on-policy update on a background thread beside acting).

``--keep DIR`` keeps each run's TensorBoard events in ``DIR/ours-<seed>`` and ``DIR/mlagents-learn-<seed>``;
``--plot PNG`` draws seed 0's two runs (``bench/plot_runs.py``: reward against agent-steps and against
wall time); ``--full`` runs both to ``--budget`` instead of stopping at the target (the table's
figures are the same: the first summary at the target).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Tuple

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_runs import draw, event_folder  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEHAVIOR = "3DBall"  # the built-in 3DBall's behaviour over gRPC, as in Unity's example

#: PPO settings as both trainers spell them: (hyperparameters, network, time_horizon, summary_freq).
SETTINGS = {
    # ML-Agents' config/ppo/3DBall.yaml, Release 22.
    "mlagents": dict(batch_size=64, buffer_size=12000, learning_rate=3.0e-4, beta=1.0e-3, epsilon=0.2,
                     lambd=0.99, num_epoch=3, hidden_units=128, num_layers=2, normalize=True, gamma=0.99,
                     time_horizon=1000, summary_freq=12000),
    # Our shipped Ball3DBrain block (trainer_configurations.yaml).
    "ours": dict(batch_size=256, buffer_size=1536, learning_rate=3.0e-4, beta=5.0e-3, epsilon=0.2,
                 lambd=0.95, num_epoch=10, hidden_units=128, num_layers=2, normalize=True, gamma=0.99,
                 time_horizon=128, summary_freq=2400),
}

#: How the plot's title names each choice of --settings.
WHOSE = {"mlagents": "ML-Agents' own", "ours": "our shipped"}

OURS_LINE = re.compile(rf"{BEHAVIOR}\S*: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)")
THEIRS_LINE = re.compile(rf"{BEHAVIOR}\. Step: (\d+)\. Time Elapsed: [\d.]+ s\. Mean Reward: (-?\d+\.\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_build(folder: str, frame_time_ms: float, scene: str = "3DBall") -> str:
    """An executable that starts a built-in scene (3DBall unless named) as a modern Unity player would be started."""
    path = os.path.join(folder, "Ball3D.x86_64" if scene == "3DBall" else f"{scene}.x86_64")
    extra = f" --frame-time-ms {frame_time_ms}" if frame_time_ms else ""
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\ncd {ROOT!s} && exec {sys.executable} -m academy {scene}{extra} \"$@\"\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def ours_config(s: Dict, budget: int, threaded: bool = False) -> Dict:
    keys = ("batch_size", "buffer_size", "learning_rate", "beta", "epsilon", "lambd", "num_epoch",
            "hidden_units", "num_layers", "normalize", "gamma", "time_horizon", "summary_freq")
    block = {k: s[k] for k in keys}
    block.update(trainer="ppo", max_steps=budget, learning_rate_schedule="linear", threaded=threaded)
    return {f"{BEHAVIOR}?team=0": block}


def mlagents_config(s: Dict, budget: int, threaded: bool = False) -> Dict:
    hyper = {k: s[k] for k in ("batch_size", "buffer_size", "learning_rate", "beta", "epsilon", "lambd",
                               "num_epoch")}
    hyper["learning_rate_schedule"] = "linear"
    return {"behaviors": {BEHAVIOR: {
        "trainer_type": "ppo", "hyperparameters": hyper,
        "network_settings": {"normalize": s["normalize"], "hidden_units": s["hidden_units"],
                             "num_layers": s["num_layers"]},
        "reward_signals": {"extrinsic": {"gamma": s["gamma"], "strength": 1.0}},
        "max_steps": budget, "time_horizon": s["time_horizon"], "summary_freq": s["summary_freq"],
        "threaded": threaded}}}


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def timed_run(cmd: List[str], cwd: str, pattern: re.Pattern, target: float,
              timeout: float, full: bool = False) -> Dict[str, Optional[float]]:
    """Run ``cmd``; time-stamp the summary lines; stop it once the target is reached (``full``: let
    it run to its own end; the figures are still those of the first summary at the target).

    The run gets a process group of its own, and the whole group is stopped: a trainer stopped
    alone would leave the scene it launched (and a launcher's child trainer) running. A watchdog
    stops it at ``timeout`` even when it prints nothing.
    """
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    watchdog = threading.Timer(timeout, _signal_group, (proc.pid, signal.SIGTERM))
    watchdog.daemon = True
    watchdog.start()
    rows: List[Tuple[int, float, float]] = []
    tail: List[str] = []
    try:
        for line in proc.stdout:
            tail = (tail + [line])[-20:]
            m = pattern.search(line)
            if m:
                rows.append((int(m[1]), float(m[2]), time.monotonic() - start))
                if rows[-1][1] >= target and not full:
                    break
            if time.monotonic() - start > timeout:
                break
    finally:
        watchdog.cancel()
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(1.0)
        _signal_group(proc.pid, signal.SIGKILL)  # whatever of the group outlived the trainer
    if not rows:
        raise SystemExit(f"{cmd[0]} printed no summary line; its last output:\n{''.join(tail)}")
    hit = next((row for row in rows if row[1] >= target), None)
    last = hit or rows[-1]
    first = rows[0]
    rate = (last[0] - first[0]) / (last[2] - first[2]) if last[2] > first[2] else None
    return {"steps": hit[0] if hit else None, "seconds": hit[2] if hit else None, "rate": rate,
            "last_mean": last[1], "last_step": last[0]}


def run_ours(build: str, s: Dict, seed: int, target: float, budget: int, scratch: str,
             threaded: bool = False, full: bool = False) -> Dict:
    config = os.path.join(scratch, f"ours-{seed}.yaml")
    with open(config, "w") as f:
        yaml.safe_dump(ours_config(s, budget, threaded), f)
    cmd = [sys.executable, os.path.join(ROOT, "learn.py"), build, "--train", "--protocol", "grpc",
           "--no-graphics", "--seed", str(seed), "--trainer-config", config, "--run-path", f"ours-{seed}",
           "--base-port", str(free_port())]
    return timed_run(cmd, scratch, OURS_LINE, target, timeout=3600, full=full)


def run_theirs(mlagents: str, build: str, s: Dict, seed: int, target: float, budget: int, scratch: str,
               threaded: bool = False, full: bool = False) -> Dict:
    config = os.path.join(scratch, f"theirs-{seed}.yaml")
    with open(config, "w") as f:
        yaml.safe_dump(mlagents_config(s, budget, threaded), f)
    cmd = [mlagents, config, f"--env={build}", f"--run-id=theirs-{seed}", "--results-dir", scratch, "--force",
           "--no-graphics", "--seed", str(seed), "--base-port", str(free_port()), "--torch-device", "cpu"]
    return timed_run(cmd, scratch, THEIRS_LINE, target, timeout=3600, full=full)


def _fmt(x: Optional[float], digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mlagents", default=shutil.which("mlagents-learn"),
                   help="Unity's mlagents-learn (default: the one on PATH)")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--settings", choices=sorted(SETTINGS), default="mlagents")
    p.add_argument("--target", type=float, default=90.0)
    p.add_argument("--budget", type=int, default=500000, help="max_steps of both runs")
    p.add_argument("--frame-time-ms", type=float, default=0.0, help="emulated engine frame per decision")
    p.add_argument("--threaded", action="store_true",
                   help="threaded: true for both trainers (each updates on a thread of its own beside acting)")
    p.add_argument("--keep", metavar="DIR", help="keep each run's TensorBoard events here")
    p.add_argument("--plot", metavar="PNG", help="draw seed 0's two runs (reward against agent-steps and time)")
    p.add_argument("--full", action="store_true", help="run both to --budget rather than stop at the target")
    args = p.parse_args(argv)
    if not args.mlagents or not os.access(args.mlagents, os.X_OK):
        raise SystemExit(f"mlagents-learn not found at {args.mlagents}: install it as this script's docstring says "
                         "and pass --mlagents PATH.")
    s = SETTINGS[args.settings]
    print(f"3DBall over gRPC, {args.settings} settings{', threaded' if args.threaded else ''}, target {args.target}, "
          f"frame {args.frame_time_ms} ms")
    print("| seed | ours: steps to target | s | agent-steps/s | mlagents-learn: steps to target | s | "
          "agent-steps/s | rate ours / theirs | time ours / theirs |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        keep = args.keep or (os.path.join(scratch, "kept") if args.plot else None)
        if keep:
            os.makedirs(keep, exist_ok=True)
        build = make_build(scratch, args.frame_time_ms)
        for seed in range(args.seeds):
            a = run_ours(build, s, seed, args.target, args.budget, scratch, args.threaded, args.full)
            b = run_theirs(args.mlagents, build, s, seed, args.target, args.budget, scratch, args.threaded,
                           args.full)
            rate = a["rate"] / b["rate"] if a["rate"] and b["rate"] else None
            time_ratio = a["seconds"] / b["seconds"] if a["seconds"] and b["seconds"] else None
            print(f"| {seed} | {_fmt(a['steps'])} | {_fmt(a['seconds'], 1)} | {_fmt(a['rate'])} | "
                  f"{_fmt(b['steps'])} | {_fmt(b['seconds'], 1)} | {_fmt(b['rate'])} | {_fmt(rate, 2)} | "
                  f"{_fmt(time_ratio, 2)} |", flush=True)
            if keep:
                shutil.copytree(event_folder(os.path.join(scratch, "summaries")), os.path.join(keep, f"ours-{seed}"))
                shutil.copytree(event_folder(os.path.join(scratch, f"theirs-{seed}")),
                                os.path.join(keep, f"mlagents-learn-{seed}"))
                shutil.rmtree(os.path.join(scratch, "summaries"))
        if args.plot:
            draw({"ours (learn.py, gRPC)": os.path.join(keep, "ours-0"),
                  "Unity's mlagents-learn 1.1.0": os.path.join(keep, "mlagents-learn-0")}, args.plot,
                 f"3DBall over gRPC, {WHOSE[args.settings]} PPO settings, seed 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
