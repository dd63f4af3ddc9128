"""Stable-Baselines3 PPO on ``UnityToGymWrapper(default_registry["Basic"].make())``: the lines of
ML-Agents' own Colab examples, unchanged but for the imports, reaching the registry's target.

    from unityagents.registry import default_registry                 # mlagents_envs.registry
    from unityagents.envs.unity_gym_env import UnityToGymWrapper      # mlagents_envs.envs.unity_gym_env
    env = UnityToGymWrapper(default_registry["Basic"].make(), uint8_visual=True)
    model = stable_baselines3.PPO("MlpPolicy", env).learn(...)

Trains in blocks of ``--block`` steps; after each block the deterministic policy plays
``--episodes`` episodes in a second copy of the scene, and the run stops when their mean reward
reaches the registry's ``expected_reward`` for Basic (0.94, the optimum: the large goal by the
shortest path). Prints, per seed, the training steps and seconds to the target, then one
``RESULT`` line. Torch runs on one thread, to keep the shared CPUs free.

    pip install -r bench/requirements.txt        # stable-baselines3, torch (CPU)
    python bench/sb3_registry_basic.py [--seeds 0 1 2] [--budget 30000]
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from unityagents.envs.unity_gym_env import UnityToGymWrapper  # noqa: E402
from unityagents.registry import default_registry  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def evaluate(model, env, episodes: int) -> float:
    """The deterministic policy's mean episode reward over ``episodes`` episodes."""
    total = 0.0
    for _ in range(episodes):
        obs, _ = env.reset()
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
    return total / episodes


def run(seed: int, budget: int, block: int, episodes: int) -> tuple:
    import stable_baselines3
    import torch

    torch.set_num_threads(1)
    entry = default_registry["Basic"]
    train = UnityToGymWrapper(entry.make(base_port=free_port(), seed=seed), uint8_visual=True,
                              action_space_seed=seed)
    check = UnityToGymWrapper(entry.make(base_port=free_port(), seed=seed + 100))
    try:
        model = stable_baselines3.PPO("MlpPolicy", train, n_steps=256, batch_size=64, n_epochs=4,
                                      learning_rate=3e-4, ent_coef=0.01, seed=seed, verbose=0, device="cpu")
        steps, seconds, score = 0, 0.0, float("-inf")
        while steps < budget:
            start = time.perf_counter()
            model.learn(block, reset_num_timesteps=False)
            seconds += time.perf_counter() - start
            steps = model.num_timesteps
            score = evaluate(model, check, episodes)
            print(f"seed {seed}: {steps} steps, {seconds:.1f} s of training, deterministic mean {score:.3f}",
                  flush=True)
            if score >= entry.expected_reward - 1e-3:
                return True, steps, seconds, score
        return False, steps, seconds, score
    finally:
        train.close()
        check.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=30000, help="training steps at most, per seed")
    parser.add_argument("--block", type=int, default=1024, help="training steps between evaluations")
    parser.add_argument("--episodes", type=int, default=5, help="evaluation episodes")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    target = default_registry["Basic"].expected_reward
    results = [run(seed, args.budget, args.block, args.episodes) for seed in args.seeds]
    for seed, (reached, steps, seconds, score) in zip(args.seeds, results):
        print(f"seed {seed}: {'reached' if reached else 'did not reach'} {target} "
              f"(deterministic mean {score:.3f}) after {steps} steps, {seconds:.1f} s of training")
    print(f"RESULT {sum(r[0] for r in results)}/{len(results)} seeds reached Basic's expected reward {target}; "
          f"steps {[r[1] for r in results]}")


if __name__ == "__main__":
    main()
