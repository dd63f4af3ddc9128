"""ML-Agents' own PPO settings for 3DBall and Basic, unchanged, against the built-in scenes: steps to a target reward.

The settings are those of Release 22's ``config/ppo/3DBall.yaml`` and ``config/ppo/Basic.yaml``
(their values, written here into a temporary folder at run time; no copy of Unity's files is
shipped). Each run is ``unityagents-learn <file> --env=<scene>``; the script reads its console
lines and reports the first step at which the summary's mean reward reaches the target (3DBall: 90,
Basic: 0.9), then stops the run with Ctrl-C (it saves, as a user's Ctrl-C does).

    python bench/mlagents_configs.py                 # both
    python bench/mlagents_configs.py --only Basic --seed 1
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Release 22's config/ppo/3DBall.yaml, key for key.
PPO_3DBALL = """behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters:
      batch_size: 64
      buffer_size: 12000
      learning_rate: 0.0003
      beta: 0.001
      epsilon: 0.2
      lambd: 0.99
      num_epoch: 3
      learning_rate_schedule: linear
    network_settings:
      normalize: true
      hidden_units: 128
      num_layers: 2
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 500000
    time_horizon: 1000
    summary_freq: 12000
"""
#: Release 22's config/ppo/Basic.yaml, key for key.
PPO_BASIC = """behaviors:
  Basic:
    trainer_type: ppo
    hyperparameters:
      batch_size: 32
      buffer_size: 256
      learning_rate: 0.0003
      beta: 0.005
      epsilon: 0.2
      lambd: 0.95
      num_epoch: 3
      learning_rate_schedule: linear
    network_settings:
      normalize: false
      hidden_units: 20
      num_layers: 1
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.9
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 500000
    time_horizon: 3
    summary_freq: 2000
"""
RUNS = {"3DBall": (PPO_3DBALL, 90.0), "Basic": (PPO_BASIC, 0.9)}
LINE = re.compile(r"Step: (\d+)\. Mean Reward: (-?\d+(?:\.\d+)?)")


def run(scene: str, seed: int, wall_limit: float) -> dict:
    text, target = RUNS[scene]
    folder = tempfile.mkdtemp(prefix=f"mlagents-{scene}-")
    path = os.path.join(folder, f"{scene}.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with socket.socket() as s:  # a free port: other runs may use the default 5005
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "trainers.learn_r22", path, f"--env={scene}", "--run-id=r",
           f"--results-dir={os.path.join(folder, 'results')}", f"--seed={seed}", f"--base-port={port}"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reached, history = None, []
    for line in proc.stdout:
        m = LINE.search(line)
        if m:
            step, reward = int(m.group(1)), float(m.group(2))
            history.append((step, reward))
            if reward >= target and reached is None:
                reached = (step, time.monotonic() - started)
                proc.send_signal(signal.SIGINT)
        if reached is None and time.monotonic() - started > wall_limit:
            proc.send_signal(signal.SIGINT)
            break
    proc.wait()
    return {"scene": scene, "target": target, "reached": reached, "history": history, "code": proc.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(RUNS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wall-limit", type=float, default=540.0, help="seconds per run at most")
    args = parser.parse_args()
    for scene in [args.only] if args.only else ["Basic", "3DBall"]:
        r = run(scene, args.seed, args.wall_limit)
        shown = ", ".join(f"{s}: {v:g}" for s, v in r["history"][-6:])
        if r["reached"]:
            step, seconds = r["reached"]
            print(f"{scene}: mean reward >= {r['target']:g} at step {step} ({seconds:.0f} s wall, seed {args.seed}); "
                  f"last summaries {shown}")
        else:
            print(f"{scene}: mean reward {r['target']:g} not reached within {args.wall_limit:.0f} s; last {shown}")


if __name__ == "__main__":
    main()
