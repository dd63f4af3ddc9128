"""Stable-Baselines3 PPO on 3DBall through ``unityagents.bridges.gym.UnityVectorEnv`` over the socket, against SB3 on
the in-process scene, in one run; then what the wrapper costs per step.

The in-process run steps the scene's Academy in this process behind the same wrapper and SB3
adapter (``InProcessEnv``), so the two differ only by the socket and the second process. Both use
``bench/vs_sb3.py``'s settings (2x128 tanh networks, observation normalisation, 12k-transition
rollouts, minibatches of 1200, 3 epochs, linear learning rate 3e-4, entropy 0.005) and report the
agent-steps and seconds (training only, start-up excluded) at which the mean reward of the episodes
finished in the last rollout first reaches the target, and the agent-steps per second.

The per-step cost compares, on one open 3DBall environment with the same random actions, a raw
``UnityEnvironment.step`` with ``UnityVectorEnv.step`` (and with the SB3 adapter on top), as the
median of blocks of steps.

    pip install -r bench/requirements.txt
    python bench/gym_sb3.py [--seeds 2] [--budget 300000] [--target 90]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List, Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from vs_sb3 import free_port, sb3_ppo_to_target  # noqa: E402

from unityagents import UnityEnvironment  # noqa: E402
from unityagents.base_env import ActionTuple, BehaviorSteps, DecisionSteps, TerminalSteps  # noqa: E402
from unityagents.brain import BrainParameters  # noqa: E402
from unityagents.bridges.gym import UnityVectorEnv  # noqa: E402


def sb3_adapter(vec: UnityVectorEnv):
    """An SB3 ``VecEnv`` over a gymnasium ``VectorEnv`` in SAME_STEP autoreset mode (SB3's own convention)."""
    from stable_baselines3.common.vec_env import VecEnv

    class GymnasiumVecEnv(VecEnv):
        def __init__(self):
            super().__init__(vec.num_envs, vec.single_observation_space, vec.single_action_space)
            self.episode_reward = np.zeros(vec.num_envs)
            self.finished: List[float] = []
            self._actions = None

        def reset(self):
            obs, _ = vec.reset()
            return obs

        def step_async(self, actions):
            self._actions = np.clip(actions, -1, 1)

        def step_wait(self):
            obs, rewards, terminations, truncations, infos = vec.step(self._actions)
            dones = terminations | truncations
            self.episode_reward += rewards
            out = [{} for _ in range(vec.num_envs)]
            for i in np.flatnonzero(dones):
                out[i]["TimeLimit.truncated"] = bool(truncations[i])
                if "final_obs" in infos and infos["_final_obs"][i]:
                    out[i]["terminal_observation"] = infos["final_obs"][i]
                self.finished.append(float(self.episode_reward[i]))
                self.episode_reward[i] = 0.0
            return obs, rewards.astype(np.float32), dones, out

        def close(self):
            vec.close()

        def get_attr(self, name, indices=None):
            return [getattr(self, name)] * vec.num_envs

        def set_attr(self, name, value, indices=None):
            setattr(self, name, value)

        def env_method(self, name, *args, indices=None, **kwargs):
            return [None] * vec.num_envs

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * vec.num_envs

    return GymnasiumVecEnv()


class InProcessEnv:
    """The built-in 3DBall stepped in this process, behind the few ``UnityEnvironment`` members the
    wrappers use: the same wrapper and SB3 adapter run on it, so only the socket differs."""

    def __init__(self, scene: str = "3DBall", seed: int = 0):
        from academy import load_scene
        from academy.academy import Academy

        self.academy = Academy(load_scene(scene)(seed), train_mode=True)
        self.external_brain_names = [b.name for b in self.academy.brains if b.config.kind == "external"]
        self.brains = {b.name: BrainParameters(b.name, b.spec.parameters_json()) for b in self.academy.brains}
        self.global_done = False

    def _infos(self, finish: bool) -> Dict[str, BehaviorSteps]:
        a, out = self.academy, {}

        def emit(brain):  # as API-2 maps onto the steps: every agent decides, a done one also ended
            states, reward, done = a.scene.states(brain.name).astype(np.float32), brain.reward, brain.done
            ids = np.asarray(brain.ids)
            out[brain.name] = (DecisionSteps([states], np.where(done, 0.0, reward), ids),
                               TerminalSteps([states[done]], reward[done], np.zeros(int(done.sum()), bool), ids[done]))

        if finish:
            self.global_done = bool(a.finish_step(emit))
        else:
            for brain in a.brains:
                emit(brain)
        return out

    def reset(self, train_mode: bool = True) -> Dict[str, BehaviorSteps]:
        self.academy.reset()
        self.global_done = False
        return self._infos(finish=False)

    def step(self, action: Dict[str, ActionTuple]) -> Dict[str, BehaviorSteps]:
        self.academy.set_external_actions({"action": {k: v.continuous.ravel().tolist() for k, v in action.items()}})
        self.academy.decide()
        self.academy.advance()
        return self._infos(finish=True)

    def close(self) -> None:
        pass


#: 12k-transition rollouts (1000 steps of the 12 platforms), minibatches of 1200, 3 epochs.
SETTINGS = dict(n_steps=1000, batch_size=1200, n_epochs=3, norm_reward=False)


def train_sb3(make_env, seed: int, target: float, budget: int) -> Dict[str, Optional[float]]:
    """SB3 PPO (``SETTINGS``) through UnityVectorEnv over ``make_env()``; steps and seconds to ``target``."""
    return sb3_ppo_to_target(sb3_adapter(UnityVectorEnv(make_env())), seed, target, budget, SETTINGS)


class _CannedEnv:
    """Answers every step at once with the steps of one recorded answer: what is left is the wrapper's own work."""

    def __init__(self, env: UnityEnvironment):
        self.brains, self.external_brain_names = env.brains, env.external_brain_names
        self.infos = env.reset_behaviors()
        self.global_done = False

    def reset_behaviors(self, train_mode: bool = True):
        return self.infos

    def step_behaviors(self, action):
        return self.infos


def step_cost(steps: int = 3000, block: int = 250) -> Dict[str, float]:
    """Median microseconds per 3DBall step over the socket (raw, wrapped, wrapped + SB3 adapter; blocks
    interleaved so that load on the machine hits all three alike) and of the wrapper alone on canned data."""
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (steps, 12, 2)).astype(np.float32)
    with UnityEnvironment("3DBall", base_port=free_port(), seed=0) as env:
        vec = UnityVectorEnv(env, close_env=False)
        adapter = sb3_adapter(vec)
        canned = UnityVectorEnv(_CannedEnv(env), close_env=False)
        env.reset()

        def sb3_step(a):
            adapter.step_async(a)
            adapter.step_wait()

        steppers = {"raw UnityEnvironment.step": lambda a: env.step_behaviors(ActionTuple(a)),
                    "UnityVectorEnv.step": vec.step, "UnityVectorEnv + SB3 adapter": sb3_step,
                    "UnityVectorEnv alone (canned)": canned.step}
        times: Dict[str, List[float]] = {name: [] for name in steppers}
        for b in range(steps // block):
            for name, fn in steppers.items():
                t = time.perf_counter()
                for a in actions[b * block:(b + 1) * block]:
                    fn(a)
                times[name].append((time.perf_counter() - t) / block * 1e6)
    return {name: float(np.median(t)) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--budget", type=int, default=300000, help="agent-step budget of each run")
    parser.add_argument("--cost-only", action="store_true", help="only measure the per-step cost")
    args = parser.parse_args()

    if not args.cost_only:
        # torch's compiler stack (triton) segfaults on import once TensorFlow is loaded, and SB3's
        # logger pulls TensorFlow in through tensorboard: load torch's side first.
        import torch._dynamo  # noqa: F401

    cost = step_cost()
    base = cost["raw UnityEnvironment.step"]
    print("per environment step (12 agents), median of interleaved blocks of 250:")
    for name, us in cost.items():
        if "canned" in name:  # no environment behind it: the wrapper's own work per step
            print(f"  {name:<30} {us:8.1f} us   ({us / base:.1%} of a raw step)")
        else:
            print(f"  {name:<30} {us:8.1f} us   (+{us - base:6.1f} us, x{us / base:.2f})")
    if args.cost_only:
        return

    fmt = lambda x, f="{:.0f}": "-" if x is None else f.format(x)  # noqa: E731
    print(f"{'seed':>4} | {'socket: steps':>13} {'s':>5} {'steps/s':>8} | {'in-process: steps':>17} {'s':>5} "
          f"{'steps/s':>8} | {'time socket/in-process':>22}")
    for seed in range(args.seeds):
        a = train_sb3(lambda s=seed: UnityEnvironment("3DBall", base_port=free_port(), seed=s), seed, args.target,
                      args.budget)
        b = train_sb3(lambda s=seed: InProcessEnv("3DBall", s), seed, args.target, args.budget)
        ratio = a["seconds"] / b["seconds"] if a["seconds"] and b["seconds"] else None
        print(f"{seed:>4} | {fmt(a['steps']):>13} {fmt(a['seconds']):>5} {fmt(a['rate']):>8} | "
              f"{fmt(b['steps']):>17} {fmt(b['seconds']):>5} {fmt(b['rate']):>8} | {fmt(ratio, '{:.2f}'):>22}"
              + ("" if a["steps"] else f"   (socket run ended at mean {fmt(a['final'], '{:.1f}')})")
              + ("" if b["steps"] else f"   (in-process run ended at mean {fmt(b['final'], '{:.1f}')})"))


if __name__ == "__main__":
    main()
