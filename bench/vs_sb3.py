"""Side by side: our PPO over the socket vs Stable-Baselines3 PPO in-process, on the same 3DBall.

Ours: ``learn.py 3DBall --train`` with the shipped configuration and ``--num-envs`` 1 and 2,
through the API-2 socket to scene processes. SB3: ``stable_baselines3.PPO`` on the same scene
stepped in-process as a vector env of its 12 platforms, (i) with our shipped settings (2x128 tanh
networks, observation normalisation, 128-step rollouts, minibatches of 256, 10 epochs, linear
learning rate 3e-4, entropy 0.005) and (ii) with SB3's best settings for this scene (the same plus
reward normalisation). Each reports the agent-steps and seconds (from the start of training,
start-up excluded) at which the mean reward of the episodes finished in the last rollout /
summary window first reaches 90, and its agent-steps per second.

    pip install -r bench/requirements.txt
    python bench/vs_sb3.py [--seeds 3] [--budget 150000] [--threaded]

``--threaded`` adds our runs with ``threaded: true``: the update runs on a background thread while
the trainer keeps acting (each update's data partly from the policy one update old). ``--wrapper``
adds SB3 with its best settings through ``unityagents.bridges.gym.UnityVectorEnv`` on 3DBall
launched in its own process, over the same socket as ours (what an SB3 user with a build runs; the
adapter is ``bench/gym_sb3.py``'s), and the ratio of ours' best time to its.

``--keep DIR`` keeps each run's TensorBoard events in ``DIR/<run>-<seed>`` (SB3's under our reward tag,
the mean of the episodes finished in each rollout, as our summaries count it); ``--plot PNG`` draws
seed 0's runs (``bench/plot_runs.py``: reward against agent-steps and against wall time); ``--full``
lets SB3 run to the budget, as ours does, rather than stop at the target (the table is the same).

or with SB3 in its own virtual environment (every run uses the Python that runs the script):

    python -m venv --system-site-packages sb3-venv
    sb3-venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    sb3-venv/bin/pip install stable-baselines3
    sb3-venv/bin/python bench/vs_sb3.py --seeds 3 --budget 60000
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import numpy as np
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from plot_runs import TAGS, draw, event_folder  # noqa: E402

from academy import load_scene  # noqa: E402
from academy.academy import Academy  # noqa: E402

#: The reward tag SB3's runs are kept under: ours (and ML-Agents'), so the plot reads both alike.
REWARD_TAG = TAGS[0]

LINE = re.compile(r"Ball3DBrain: Step: (\d+)\. Mean Reward: (-?\d+\.\d+)\..*? ([\d.]+) agent-steps/s\. "
                  r"Elapsed: (\d+):(\d+):(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(seed: int, target: float, num_envs: int, budget: int, threaded: bool = False,
         keep: str = "") -> Dict[str, Optional[float]]:
    """``learn.py 3DBall --train`` in this process, timed from the trainers' build to each summary line;
    ``threaded``: the shipped settings with ``threaded: true`` (the update on a background thread).

    In-process only so that the log records carry exact times (the console prints whole seconds);
    the environments are the usual scene processes behind the socket.
    """
    import logging

    import learn

    records: List[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    logger = logging.getLogger("unityagents")
    logger.addHandler(handler)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        config = os.path.join(scratch, "config.yaml")
        with open(os.path.join(ROOT, "trainer_configurations.yaml")) as f:
            shipped = yaml.safe_load(f)
        shipped["Ball3DBrain"] = dict(shipped["Ball3DBrain"], max_steps=budget, threaded=threaded)
        with open(config, "w") as f:
            yaml.safe_dump(shipped, f)
        os.chdir(scratch)
        try:
            code = learn.main(["3DBall", "--train", "--seed", str(seed), "--num-envs", str(num_envs),
                               "--trainer-config", config, "--base-port", str(free_port())])
        finally:
            os.chdir(cwd)
            logger.removeHandler(handler)
        if keep and code == 0:
            shutil.copytree(event_folder(os.path.join(scratch, "summaries")), keep)
    if code != 0:
        raise SystemExit(f"learn.py exited with {code}")
    start = next(r.created for r in records if r.getMessage().startswith("PPOTrainer for brain"))
    rows = []
    for r in records:
        m = LINE.search(r.getMessage())
        if m:
            rows.append((int(m[1]), float(m[2]), float(m[3]), r.created - start))
    hit = next((row for row in rows if row[1] >= target), None)
    return {"steps": hit[0] if hit else None, "seconds": hit[3] if hit else None,
            "rate": rows[-1][2] if rows else None}


#: SB3 with our shipped 3DBall settings, and SB3's best settings for this scene (short rollouts, small
#: minibatches, 10 epochs, observation and reward normalisation).
SB3_SETTINGS = {
    "same": dict(n_steps=128, batch_size=256, n_epochs=10, norm_reward=False),
    "best": dict(n_steps=128, batch_size=256, n_epochs=10, norm_reward=True),
}


def sb3(seed: int, target: float, budget: int, settings: str, keep: str = "",
        full: bool = False) -> Dict[str, Optional[float]]:
    # SB3 imports TensorBoard, which imports TensorFlow when it is installed; TensorFlow and PyTorch
    # in one process crash here. TensorBoard works without TensorFlow, so keep it out.
    sys.modules.setdefault("tensorflow", None)
    import gymnasium as gym
    from stable_baselines3.common.vec_env import VecEnv

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
            a.set_external_actions({"action": {"Ball3DBrain": self._actions.tolist()}})
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

    return sb3_ppo_to_target(Ball3DVecEnv(seed), seed, target, budget, SB3_SETTINGS[settings], keep, full)


def sb3_wrapper(seed: int, target: float, budget: int, settings: str, keep: str = "",
                full: bool = False) -> Dict[str, Optional[float]]:
    """SB3 PPO through ``UnityVectorEnv`` on 3DBall in a scene process of its own, over the socket."""
    sys.modules.setdefault("tensorflow", None)  # as in ``sb3``: TensorBoard without TensorFlow
    from gym_sb3 import sb3_adapter

    from unityagents import UnityEnvironment
    from unityagents.bridges.gym import UnityVectorEnv

    env = UnityEnvironment("3DBall", base_port=free_port(), seed=seed)
    return sb3_ppo_to_target(sb3_adapter(UnityVectorEnv(env)), seed, target, budget, SB3_SETTINGS[settings],
                             keep, full)


def sb3_ppo_to_target(raw, seed: int, target: float, budget: int, settings: Dict[str, Any],
                      keep: str = "", full: bool = False) -> Dict[str, Optional[float]]:
    """SB3 PPO for ``budget`` agent-steps on the SB3 vector env ``raw`` (which lists the rewards of its
    finished episodes in ``raw.finished``), with observation normalisation and ``settings`` (as in
    ``SB3_SETTINGS``); the rest of the settings are our shipped ones (see the module docstring).

    Returns the agent-steps (``steps``) and seconds (``seconds``, from the start of training) at which
    the mean reward of the episodes finished in a rollout first reaches ``target`` (None if never),
    the agent-steps per second (``rate``) and the last rollout's mean (``final``). ``keep``: the folder
    that gets the run's TensorBoard events, that mean under our reward tag at each rollout's end;
    ``full``: go on to ``budget`` after the target.
    """
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(raw, norm_obs=True, norm_reward=settings["norm_reward"])
    result: Dict[str, Optional[float]] = {"steps": None, "seconds": None, "rate": None, "final": None}

    class StopAtTarget(BaseCallback):
        def _on_training_start(self):
            self.start, self.seen = time.time(), 0

        def _on_rollout_end(self):
            window, self.seen = raw.finished[self.seen:], len(raw.finished)
            if window:
                result["final"] = float(np.mean(window))
                self.logger.record(REWARD_TAG, result["final"])
            if window and np.mean(window) >= target and result["steps"] is None:
                result["steps"], result["seconds"] = self.num_timesteps, time.time() - self.start

        def _on_step(self):
            return full or result["steps"] is None

    torch.manual_seed(seed)
    # Small MLPs run fastest on one thread; more threads only add contention on a small machine.
    torch.set_num_threads(1)
    model = PPO("MlpPolicy", env, n_steps=settings["n_steps"], batch_size=settings["batch_size"],
                n_epochs=settings["n_epochs"], learning_rate=lambda progress: 3e-4 * progress, gamma=0.99,
                gae_lambda=0.95, ent_coef=0.005,
                clip_range=0.2, policy_kwargs=dict(net_arch=dict(pi=[128, 128], vf=[128, 128]),
                                                   activation_fn=torch.nn.Tanh),
                device="cpu", seed=seed, verbose=0)
    if keep:
        from stable_baselines3.common.logger import configure

        model.set_logger(configure(keep, ["tensorboard"]))
    start = time.time()
    try:
        model.learn(total_timesteps=budget, callback=StopAtTarget())
    finally:
        env.close()
    result["rate"] = model.num_timesteps / (time.time() - start)
    return result


def _child(kind: str, seed: int, target: float, budget: int, extra, keep: str = "",
           full: bool = False) -> Dict[str, Optional[float]]:
    """One run in its own process; its result comes back as the last line of its output (JSON)."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, str(seed), str(target),
                           str(budget), str(extra), keep, "full" if full else "to-target"],
                          capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the {kind} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> None:
    if len(sys.argv) == 9 and sys.argv[1] == "--child":
        kind, extra, keep, full = sys.argv[2], sys.argv[6], sys.argv[7], sys.argv[8] == "full"
        seed, target, budget = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
        if kind == "ours":
            num_envs, _, threaded = extra.partition(":")
            result = ours(seed, target, int(num_envs), budget, threaded == "threaded", keep)
        elif kind == "sb3-wrapper":
            result = sb3_wrapper(seed, target, budget, extra, keep, full)
        else:
            result = sb3(seed, target, budget, extra, keep, full)
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--budget", type=int, default=150000, help="agent-step budget of each run")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 2], help="our --num-envs to try")
    parser.add_argument("--threaded", action="store_true",
                        help="also run ours with threaded: true (the update on a background thread beside acting)")
    parser.add_argument("--wrapper", action="store_true",
                        help="also run SB3 (its best settings) through UnityVectorEnv over the socket")
    parser.add_argument("--keep", metavar="DIR", help="keep each run's TensorBoard events here")
    parser.add_argument("--plot", metavar="PNG", help="draw seed 0's runs (reward against agent-steps and time)")
    parser.add_argument("--full", action="store_true", help="SB3 runs to --budget rather than stop at the target")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        keep = args.keep or (scratch if args.plot else "")
        table_runs = table(args, keep)
        if args.plot:
            draw(table_runs, args.plot, "3DBall, seed 0: ours against Stable-Baselines3")


#: The label of SB3's run through the wrapper, over the socket.
WRAPPED = "SB3 via UnityVectorEnv, its best settings"


def folder_name(label: str, seed: int) -> str:
    """A run's folder under --keep: its label in the table, as a file name, and the seed."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") + f"-{seed}"


def table(args, keep: str) -> Dict[str, str]:
    """Every run of every seed, printed as a table as it finishes; with ``keep``, their events kept
    there, and seed 0's folders returned by label."""
    def run(name: str, kind: str, seed: int, extra) -> Dict[str, Optional[float]]:
        folder = os.path.join(keep, folder_name(name, seed)) if keep else ""
        return _child(kind, seed, args.target, args.budget, extra, folder, args.full)

    seed0: Dict[str, str] = {}
    fmt = lambda x, f="{:.0f}": "-" if x is None else f.format(x)  # noqa: E731
    print("| seed | run | agent-steps to 90 | seconds to 90 | agent-steps/s |")
    print("|---|---|---|---|---|")
    ratios, wrapper_ratios = [], []
    for seed in range(args.seeds):
        # Each run in a fresh process: TensorFlow and PyTorch in one process crash on some machines.
        results = {f"ours, --num-envs {n}": run(f"ours, --num-envs {n}", "ours", seed, n) for n in args.num_envs}
        if args.threaded:
            results.update({f"ours, --num-envs {n}, threaded": run(f"ours, --num-envs {n}, threaded", "ours", seed,
                                                                   f"{n}:threaded") for n in args.num_envs})
        results["SB3, our settings"] = run("SB3, our settings", "sb3", seed, "same")
        results["SB3, its best settings"] = run("SB3, its best settings", "sb3", seed, "best")
        if args.wrapper:
            results[WRAPPED] = run(WRAPPED, "sb3-wrapper", seed, "best")
        if keep and seed == 0:
            seed0 = {name: os.path.join(keep, folder_name(name, 0)) for name in results}
        for name, r in results.items():
            print(f"| {seed} | {name} | {fmt(r['steps'])} | {fmt(r['seconds'], '{:.1f}')} | {fmt(r['rate'])} |")
        best_ours = min((r["seconds"] for k, r in results.items() if k.startswith("ours") and r["seconds"]),
                        default=None)
        best_sb3 = min((r["seconds"] for k, r in results.items() if k.startswith("SB3,") and r["seconds"]),
                       default=None)
        if best_ours and best_sb3:
            ratios.append(best_ours / best_sb3)
            print(f"| {seed} | time to 90, best ours / best SB3 | | {best_ours / best_sb3:.2f} | |")
        wrapped = results.get(WRAPPED, {}).get("seconds")
        if best_ours and wrapped:
            wrapper_ratios.append(best_ours / wrapped)
            print(f"| {seed} | time to 90, best ours / {WRAPPED} | | {best_ours / wrapped:.2f} | |")
    if ratios:
        print(f"\nmedian time-to-{args.target:.0f} ratio, best ours / best SB3: {np.median(ratios):.2f} "
              "(target <= 0.5)")
    if wrapper_ratios:
        print(f"median time-to-{args.target:.0f} ratio, best ours / {WRAPPED}: {np.median(wrapper_ratios):.2f} "
              "(target <= 0.3)")
    return seed0


if __name__ == "__main__":
    main()
