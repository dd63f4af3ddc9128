"""Side by side: our PPO over the socket vs Stable-Baselines3 PPO in-process, on the same 3DBall.

Ours: ``learn.py 3DBall --train`` with the shipped configuration, through the API-2 socket and a
second process. SB3: ``stable_baselines3.PPO`` on the same scene stepped in-process as a vector
env of its 12 platforms, with comparable settings (2x128 tanh policy and value networks,
observation normalisation, 12k-transition rollouts, minibatches of 1200, 3 epochs, linear
learning rate 3e-4, entropy 0.005). Both report the agent-steps and seconds (from the start of
training, start-up excluded) at which the mean reward of the episodes finished in the last
rollout / summary window first reaches 90, and their agent-steps per second.

    pip install -r bench/requirements.txt
    python bench/vs_sb3.py [--seeds 3] [--budget 300000]
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from academy import load_scene  # noqa: E402
from academy.academy import Academy  # noqa: E402

LINE = re.compile(r"Ball3DBrain: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)\..*? ([\d.]+) agent-steps/s\. "
                  r"Elapsed: (\d+):(\d+):(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(seed: int, target: float) -> Dict[str, Optional[float]]:
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "learn.py"), "3DBall", "--train", "--seed",
                               str(seed), "--base-port", str(free_port())], cwd=scratch, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    rows = [(int(m[0]), float(m[1]), float(m[2]), int(m[3]) * 3600 + int(m[4]) * 60 + int(m[5]))
            for m in LINE.findall(proc.stdout + proc.stderr)]
    hit = next((r for r in rows if r[1] >= target), None)
    return {"steps": hit[0] if hit else None, "seconds": hit[3] if hit else None,
            "rate": rows[-1][2] if rows else None}


def sb3(seed: int, target: float, budget: int) -> Dict[str, Optional[float]]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecEnv, VecNormalize

    class Ball3DVecEnv(VecEnv):
        """The built-in 3DBall's 12 platforms as an SB3 vector env, stepped in-process."""

        def __init__(self, seed: int):
            self.academy = Academy(load_scene("3DBall")(seed=seed), train_mode=True)
            self.brain = self.academy.brains[0]
            super().__init__(12, gym.spaces.Box(-np.inf, np.inf, (8,), np.float32),
                             gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
            self.episode_reward = np.zeros(12)
            self.episode_length = np.zeros(12, dtype=int)
            self.finished: List[float] = []
            self._actions = None

        def reset(self):
            self.academy.reset()
            return self.academy.scene.states("Ball3DBrain").astype(np.float32)

        def step_async(self, actions):
            self._actions = np.clip(actions, -1, 1)

        def step_wait(self):
            a = self.academy
            a.set_external_actions({"action": {"Ball3DBrain": self._actions}})
            a.decide()
            a.advance()
            out = {}

            def emit(brain):
                out["reward"], out["done"] = brain.reward.copy(), brain.done.copy()
                out["obs"] = a.scene.states(brain.name).astype(np.float32)

            if a.finish_step(emit):
                a.reset()
            self.episode_reward += out["reward"]
            self.episode_length += 1
            infos = [{} for _ in range(12)]
            for i in np.flatnonzero(out["done"]):
                infos[i]["episode"] = {"r": self.episode_reward[i], "l": self.episode_length[i]}
                self.finished.append(self.episode_reward[i])
                self.episode_reward[i], self.episode_length[i] = 0.0, 0
            return out["obs"], out["reward"].astype(np.float32), out["done"], infos

        def close(self):
            pass

        def get_attr(self, name, indices=None):
            return [getattr(self, name)] * 12

        def set_attr(self, name, value, indices=None):
            setattr(self, name, value)

        def env_method(self, name, *args, indices=None, **kwargs):
            return [None] * 12

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * 12

    raw = Ball3DVecEnv(seed)
    env = VecNormalize(raw, norm_obs=True, norm_reward=False)
    result: Dict[str, Optional[float]] = {"steps": None, "seconds": None, "rate": None}

    class StopAtTarget(BaseCallback):
        def _on_training_start(self):
            self.start = time.time()
            self.seen = 0

        def _on_rollout_end(self):
            window, self.seen = raw.finished[self.seen:], len(raw.finished)
            if window and np.mean(window) >= target and result["steps"] is None:
                result["steps"], result["seconds"] = self.num_timesteps, time.time() - self.start

        def _on_step(self):
            return result["steps"] is None

    torch.manual_seed(seed)
    # Small MLPs run fastest on one thread; more threads only add contention on a small machine.
    torch.set_num_threads(1)
    model = PPO("MlpPolicy", env, n_steps=1000, batch_size=1200, n_epochs=3,
                learning_rate=lambda progress: 3e-4 * progress, gamma=0.99, gae_lambda=0.95, ent_coef=0.005,
                clip_range=0.2, policy_kwargs=dict(net_arch=dict(pi=[128, 128], vf=[128, 128]),
                                                   activation_fn=torch.nn.Tanh),
                device="cpu", seed=seed, verbose=0)
    callback = StopAtTarget()
    start = time.time()
    model.learn(total_timesteps=budget, callback=callback)
    result["rate"] = model.num_timesteps / (time.time() - start)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--budget", type=int, default=300000, help="SB3 agent-step budget")
    args = parser.parse_args()
    fmt = lambda x, f="{:.0f}": "-" if x is None else f.format(x)  # noqa: E731
    print(f"{'seed':>4} | {'ours: steps':>11} {'s':>5} {'steps/s':>8} | {'SB3: steps':>10} {'s':>5} "
          f"{'steps/s':>8} | {'time ours/SB3':>13}")
    ratios = []
    for seed in range(args.seeds):
        a, b = ours(seed, args.target), sb3(seed, args.target, args.budget)
        ratio = a["seconds"] / b["seconds"] if a["seconds"] and b["seconds"] else None
        if ratio is not None:
            ratios.append(ratio)
        print(f"{seed:>4} | {fmt(a['steps']):>11} {fmt(a['seconds']):>5} {fmt(a['rate']):>8} | "
              f"{fmt(b['steps']):>10} {fmt(b['seconds']):>5} {fmt(b['rate']):>8} | {fmt(ratio, '{:.2f}'):>13}")
    if ratios:
        print(f"median time-to-{args.target:.0f} ratio, ours / SB3: {np.median(ratios):.2f} (goal <= 0.5)")


if __name__ == "__main__":
    main()
