"""How environment throughput scales with ``--num-envs``, and what the trainer process pays for it.

All measured side by side in one run, over the real sockets, on the built-in 3DBall (12 agents
per environment):

1. Environment steps per second for N = 1, 2, 4, 8 environments in an ``EnvironmentSet``, with
   random actions, stepped synchronously and overlapped, (a) on 3DBall as it is (a cheap scene:
   the trainer's own send/decode work and the CPU cores bound it) and (b) with
   ``--frame-time-ms 5`` (each decision sleeps 5 ms, as a heavy Unity build waits on its frames).
   Targets: (b) >= 0.8 N times N = 1 up to N = 8; (a) >= 1.6x at N = 2 on two cores.
2. With a real PPO policy in the loop: the trainer process's CPU time per agent-step at N = 1
   and N = 8, inferring once over all agents (what the controller does) against once per
   environment, which shows what batching inference saves.
3. The schedule: synchronous (send to all, gather all, infer once: ``EnvironmentSet.step``)
   against overlapped (infer for the environments that answered while the others simulate:
   ``send`` / ``collect``, what ``TrainerController`` does with two or more), at N = 8 with the
   5 ms frame time.

    python bench/scaling.py [--seconds 4]
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from unityagents import UnityEnvironment  # noqa: E402
from unityagents.base_env import ActionTuple  # noqa: E402
from unityagents.vector.environment_set import EnvironmentSet  # noqa: E402

BRAIN = "Ball3DBrain"


def free_ports(n: int) -> int:
    """A base port with ``n`` free ports after it (checked by binding them)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for i in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()


def open_set(n: int, frame_ms: float) -> EnvironmentSet:
    base = free_ports(n)
    args = ["--frame-time-ms", str(frame_ms)] if frame_ms else []
    return EnvironmentSet(lambda i: UnityEnvironment("3DBall", base_port=base, worker_id=i, seed=i,
                                                     env_args=args), n)


def drive(envs: EnvironmentSet, schedule: str, act: Callable[[np.ndarray], np.ndarray], seconds: float,
          warm: int = 20) -> Tuple[int, float, float]:
    """(environment steps, wall seconds, trainer-process CPU seconds) of ``seconds`` of stepping.

    ``sync``: ``EnvironmentSet.step`` (send to all, wait for all, act over all); ``overlapped``:
    ``send`` / ``collect`` (act over the environments that answered while the others simulate),
    as ``TrainerController`` drives them.
    """
    info = envs.reset()
    steps, clock, cpu = 0, None, 0.0
    ready = list(range(envs.n_envs))
    ticks = 0
    while clock is None or time.perf_counter() - clock < seconds:
        if ticks == warm:
            steps, clock, cpu = 0, time.perf_counter(), time.process_time()
        if schedule == "sync":
            info = envs.step({BRAIN: ActionTuple(act(info[BRAIN][0].obs[0]))})
            steps += envs.n_envs
            if envs.needs_reset:
                info, _ = envs.reset_finished()
        else:
            if envs.needs_idle_reset:
                restarted, _ = envs.reset_idle()
                ready = sorted(set(ready).union(restarted) - set(envs.in_flight))
            if ready:
                envs.send(ready, {BRAIN: ActionTuple(act(envs.merged(ready)[BRAIN][0].obs[0]))})
            ready = envs.collect()
            steps += len(ready)
        ticks += 1
    wall, cpu = time.perf_counter() - clock, time.process_time() - cpu
    envs._drain()
    return steps, wall, cpu


def random_rate(n: int, frame_ms: float, seconds: float, rng: np.random.Generator, schedule: str) -> float:
    """Environment steps per second with random actions."""
    with open_set(n, frame_ms) as envs:
        steps, wall, _ = drive(envs, schedule, lambda states: rng.uniform(-1, 1, (len(states), 2)), seconds)
        return steps / wall


class Policy:
    """PPO's acting graph for 3DBall in one session, as the controller builds it."""

    def __init__(self, brains):
        from trainers.ppo.models import create_agent_model
        from trainers.tf_utils import tf

        self.graph = tf.Graph()
        with self.graph.as_default():
            self.model = create_agent_model(brains[BRAIN], h_size=128, num_layers=2, normalize=True)
            self.sess = tf.Session(graph=self.graph)
            self.sess.run(tf.global_variables_initializer())
        self.graph.finalize()

    def act(self, states: np.ndarray) -> np.ndarray:
        m = self.model
        return self.sess.run(m.output, {m.state_in: states, m.batch_size: len(states)})


def policy_run(n: int, frame_ms: float, seconds: float, mode: str) -> Tuple[float, float]:
    """(environment steps/s, trainer CPU µs per agent-step) with PPO inference in the loop.

    ``mode``: ``batched`` (synchronous, one ``session.run`` over every agent), ``per-env``
    (synchronous, one per environment), or ``overlapped`` (one over the environments that
    answered, while the others simulate).
    """
    with open_set(n, frame_ms) as envs:
        policy = Policy(envs.brains)

        def per_env(states):
            return np.concatenate([policy.act(states[i:i + 12]) for i in range(0, len(states), 12)])

        act = per_env if mode == "per-env" else policy.act
        steps, wall, cpu = drive(envs, "overlapped" if mode == "overlapped" else "sync", act, seconds)
        return steps / wall, 1e6 * cpu / (12 * steps)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per cell")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)

    print("1. environment steps/s, random actions (x: against N = 1 of the same frame time; N = 1 is "
          "always stepped synchronously)")
    print("| N | 3DBall sync | x | overlapped | x | 5 ms frames sync | x | overlapped | x | target 0.8 N |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base: Dict[float, float] = {}
    for n in (1, 2, 4, 8):
        cells = []
        for frame in (0.0, 5.0):
            for schedule in ("sync", "overlapped"):
                rate = base[frame] if n == 1 and schedule == "overlapped" else \
                    random_rate(n, frame, args.seconds, rng, schedule)
                base.setdefault(frame, rate)
                cells.append(f"{rate:,.0f} | {rate / base[frame]:.2f}")
        print(f"| {n} | {' | '.join(cells)} | {0.8 * n:.1f} |", flush=True)

    print("\n2. trainer process CPU per agent-step with PPO inference (3DBall, no frame time)")
    print("| N | schedule, inference | env steps/s | trainer CPU µs / agent-step |")
    print("|---|---|---|---|")
    for n in (1, 8):
        for mode in (("batched",) if n == 1 else ("batched", "per-env", "overlapped")):
            rate, cpu = policy_run(n, 0.0, args.seconds, mode)
            print(f"| {n} | {mode} | {rate:,.0f} | {cpu:.1f} |", flush=True)

    print("\n3. schedule at N = 8, 5 ms frames, PPO inference")
    print("| schedule | env steps/s | trainer CPU µs / agent-step |")
    print("|---|---|---|")
    for mode, name in (("batched", "synchronous"), ("overlapped", "overlapped")):
        rate, cpu = policy_run(8, 5.0, args.seconds, mode)
        print(f"| {name} | {rate:,.0f} | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
