"""``--num-areas``: agents per environment process and agent-steps/s, side by side with one area.

One built-in scene over gRPC (``UnityEnvironment(..., num_areas=N)``, what ``unityagents-learn
--num-areas N`` opens), stepped with random actions for a fixed time: how many agents the one
process serves, and how many agent decisions per second come back. Then the same with training:
``unityagents-learn`` on a small PPO config, the console's agent-steps/s at the end.

    python bench/num_areas.py --scene 3DBall --areas 1 4 --seconds 15
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONFIG = """behaviors:
  {name}:
    trainer_type: ppo
    hyperparameters: {{batch_size: 256, buffer_size: 2048, num_epoch: 3}}
    network_settings: {{hidden_units: 64, num_layers: 2, normalize: true}}
    max_steps: {max_steps}
    summary_freq: {summary}
"""


def stepping(scene: str, areas: int, seconds: float) -> tuple:
    """(agents in the process, agent decisions per second) over ``seconds`` of random actions."""
    import socket

    from unityagents import UnityEnvironment

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with UnityEnvironment(scene, base_port=port, protocol="grpc", num_areas=areas) as env:
        env.reset_behaviors()
        names = list(env.behavior_specs)
        agents = sum(len(env._steps_of(n)[0]) for n in names)
        decisions, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            actions = {n: env.behavior_specs[n].action_spec.random_action(len(env._steps_of(n)[0])) for n in names}
            steps = env.step_behaviors(actions)
            decisions += sum(len(d) for d, _ in steps.values())
        return agents, decisions / (time.perf_counter() - started)


def training(scene: str, name: str, areas: int, max_steps: int) -> float:
    """The last agent-steps/s the console reports for a short PPO run."""
    folder = tempfile.mkdtemp(prefix=f"areas{areas}-")
    path = os.path.join(folder, "c.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(CONFIG.format(name=name, max_steps=max_steps, summary=max_steps // 4))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, "-m", "trainers.learn_r22", path, f"--env={scene}", "--run-id=r",
                          f"--results-dir={os.path.join(folder, 'results')}", f"--num-areas={areas}",
                          f"--base-port={port}"],
                         env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=True).stdout
    rates = re.findall(r"(\d+) agent-steps/s", out)
    return float(rates[-1]) if rates else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="3DBall")
    parser.add_argument("--behavior", "--behaviour", default="3DBall")
    parser.add_argument("--areas", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--train-steps", type=int, default=40000, help="0: skip the training runs")
    args = parser.parse_args()
    print(f"{'num_areas':>9} {'agents':>7} {'env agent-steps/s':>18} {'training agent-steps/s':>23}")
    base = None
    for areas in args.areas:
        agents, rate = stepping(args.scene, areas, args.seconds)
        trained = training(args.scene, args.behavior, areas, args.train_steps) if args.train_steps else float("nan")
        base = base or (rate, trained)
        print(f"{areas:>9} {agents:>7} {rate:>11.0f} ({rate / base[0]:.2f}x) {trained:>15.0f} "
              f"({trained / base[1]:.2f}x)")


if __name__ == "__main__":
    main()
