"""Stable-Baselines3's PPO on one of the zoo's single-agent scenes: through ``UnityToGymWrapper`` or in-process.

``bench/zoo.py --sb3 PYTHON`` runs this script with an interpreter that has SB3 and torch (``pip install -r
bench/requirements.txt`` in a ``--system-site-packages`` virtual environment), beside our trainer and
``mlagents-learn`` on the same scene and seeds:

* ``--mode wrapper``: what an SB3 user with a Unity build runs,
  ``UnityToGymWrapper(UnityEnvironment(<build>), uint8_visual=True)``, the scene in its own process over gRPC;
* ``--mode inprocess``: the same built-in scene's ``Academy`` stepped in this process behind a plain
  ``gymnasium.Env`` (``InProcessScene``): no socket, no second process, the floor of what a wrapper can cost.

SB3's PPO takes the scene's Release 22 settings where the two algorithms share a meaning: ``n_steps`` =
``buffer_size`` (one environment), ``batch_size``, ``n_epochs`` = ``num_epoch``, ``learning_rate`` (linear
decay with ``learning_rate_schedule: linear``), ``clip_range`` = ``epsilon``, ``gae_lambda`` = ``lambd``,
``gamma``, ``ent_coef`` = ``beta``, and ``hidden_units`` x ``num_layers`` tanh layers (the camera through
SB3's ``CnnPolicy``). Torch runs on one thread.

It prints a summary line every ``--summary-freq`` agent-steps in Release 22's console format (``<Behavior>.
Step: N. Time Elapsed: T s. Mean Reward: R``, the mean of the episodes finished since the last line), which
``bench/zoo.py`` times as it times both trainers::

    python bench/zoo_sb3.py --scene ppo/Basic --mode wrapper --build <executable> [--seed 0] [--summary-freq 2000]
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import warnings
from typing import Any, Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import gymnasium  # noqa: E402
from gymnasium import spaces  # noqa: E402

#: The zoo's scenes SB3 can run: one agent, one discrete branch (SB3's SAC takes no discrete actions).
SINGLE_AGENT = ("ppo/Basic", "ppo/GridWorld")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class InProcessScene(gymnasium.Env):
    """A built-in scene's only agent, stepped in this process, as ``UnityToGymWrapper`` presents it: the first
    camera (uint8) or else the vector observations; one discrete branch; a max-step end is ``truncated``."""

    def __init__(self, scene: str, seed: int = 0):
        from academy import load_scene
        from academy.academy import Academy
        from academy.scene import CameraSensor, modern_observations

        self.academy = Academy(load_scene(scene)(seed), train_mode=True)
        self.academy.scene.rng = np.random.default_rng(seed)  # as a served scene takes the trainer's seed
        # The same resets as over the socket: the connection's first RESET, then the wrapper's, to read its spaces.
        self.academy.reset()
        self.academy.reset()
        brains = [b for b in self.academy.brains if b.config.kind == "external"]
        if len(brains) != 1 or len(brains[0].ids) != 1:
            raise SystemExit(f"{scene}: InProcessScene takes one external brain of one agent; it has "
                             f"{[(b.name, len(b.ids)) for b in brains]}")
        self.brain = brains[0]
        spec = self.brain.spec
        self._observe = lambda: modern_observations(self.academy.scene, spec)
        sensors = spec.modern_sensors()
        self._camera = next((i for i, s in enumerate(sensors) if isinstance(s, CameraSensor)), None)
        self._vectors = [i for i, s in enumerate(sensors) if not isinstance(s, CameraSensor)]
        if spec.action_space != "discrete":
            raise SystemExit(f"{scene}: InProcessScene takes one discrete branch; the brain's actions are "
                             f"{spec.action_space}")
        self.action_space = spaces.Discrete(spec.action_size)
        first = self._obs(self._observe())
        self.observation_space = (spaces.Box(0, 255, first.shape, np.uint8) if self._camera is not None
                                  else spaces.Box(-np.inf, np.inf, first.shape, np.float32))

    def _obs(self, values: List[np.ndarray]) -> np.ndarray:
        if self._camera is not None:
            return np.asarray(values[self._camera][0], np.uint8)
        return np.concatenate([values[i][0].ravel() for i in self._vectors]).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.academy.reset()
        return self._obs(self._observe()), {}

    def step(self, action: Any):
        brain = self.brain
        brain.action[:] = float(np.asarray(action).ravel()[0])
        self.academy.advance()
        obs = self._obs(self._observe())  # the last observation of an ending episode, before its reset
        reward = float(brain.reward[0] + brain.group_reward[0])
        done = bool(brain.done[0]) or self.academy.done
        truncated = done and 0 < brain.spec.max_step < int(brain.steps[0])
        self.academy.finish_step()
        if self.academy.done:
            self.academy.reset()
        return obs, reward, done and not truncated, truncated, {}


def make_env(mode: str, scene: str, build: str, seed: int) -> gymnasium.Env:
    if mode == "inprocess":
        return InProcessScene(scene, seed)
    from unityagents import UnityEnvironment
    from unityagents.envs.unity_gym_env import UnityToGymWrapper

    unity = UnityEnvironment(file_name=build, base_port=free_port(), seed=seed, no_graphics=True, protocol="grpc")
    return UnityToGymWrapper(unity, uint8_visual=True, action_space_seed=seed)


def ppo_arguments(block: Dict[str, Any], camera: bool) -> Dict[str, Any]:
    """SB3 PPO's keywords for a Release 22 PPO block (the module docstring lists the mapping); the caller adds
    the layers' activation, a torch class."""
    hyper, network = block["hyperparameters"], block["network_settings"]
    lr = float(hyper["learning_rate"])
    layers = [int(network["hidden_units"])] * int(network["num_layers"])
    return dict(
        policy="CnnPolicy" if camera else "MlpPolicy",
        n_steps=int(hyper["buffer_size"]), batch_size=int(hyper["batch_size"]), n_epochs=int(hyper["num_epoch"]),
        learning_rate=(lambda left: lr * left) if hyper.get("learning_rate_schedule") == "linear" else lr,
        clip_range=float(hyper["epsilon"]), gae_lambda=float(hyper["lambd"]),
        gamma=float(block["reward_signals"]["extrinsic"]["gamma"]), ent_coef=float(hyper["beta"]),
        policy_kwargs=dict(net_arch=layers))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scene", required=True, choices=SINGLE_AGENT)
    p.add_argument("--mode", required=True, choices=("wrapper", "inprocess"))
    p.add_argument("--build", help="the scene's executable (--mode wrapper)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--summary-freq", type=int, default=2000)
    p.add_argument("--max-steps", type=int, default=10_000_000)
    args = p.parse_args(argv)
    if args.mode == "wrapper" and not args.build:
        p.error("--mode wrapper needs --build, the scene's executable (bench/zoo.py makes one)")
    warnings.filterwarnings("ignore", category=UserWarning)
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from zoo import ZOO

    torch.set_num_threads(1)
    scene, behavior, _, block = ZOO[args.scene]
    env = make_env(args.mode, scene, args.build, args.seed)
    camera = len(env.observation_space.shape) == 3
    start = time.monotonic()

    class Summaries(BaseCallback):
        """Release 22's summary line every ``summary_freq`` agent-steps, from the episodes that ended since."""

        def __init__(self):
            super().__init__()
            self.returns: List[float] = []
            self.running = 0.0
            self.next = args.summary_freq

        def _on_step(self) -> bool:
            self.running += float(self.locals["rewards"][0])
            if self.locals["dones"][0]:
                self.returns.append(self.running)
                self.running = 0.0
            if self.num_timesteps >= self.next:
                self.next += args.summary_freq
                if self.returns:
                    print(f"{behavior}. Step: {self.num_timesteps}. Time Elapsed: {time.monotonic() - start:.3f} s. "
                          f"Mean Reward: {np.mean(self.returns):.3f}. Std of Reward: {np.std(self.returns):.3f}.",
                          flush=True)
                self.returns = []
            return True

    kwargs = ppo_arguments(block, camera)
    kwargs["policy_kwargs"]["activation_fn"] = torch.nn.Tanh
    try:
        model = stable_baselines3.PPO(env=env, seed=args.seed, device="cpu", verbose=0, **kwargs)
        model.learn(args.max_steps, callback=Summaries())
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
