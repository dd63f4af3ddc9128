"""How environment throughput scales with ``--num-envs``, and what the trainer process pays for it.

All measured side by side in one run, over the real sockets, on the built-in 3DBall (12 agents
per environment):

1. Environment steps per second for N = 1, 2, 4, 8 environments in an ``EnvironmentSet``, with
   random actions, (a) on 3DBall as it is (a cheap scene: the trainer's own send/decode work and
   the CPU cores bound it) and (b) with ``--frame-time-ms 5`` (each decision sleeps 5 ms, as a
   heavy Unity build waits on its frames). Targets: (b) >= 0.8 N times N = 1 up to N = 8;
   (a) >= 1.6x at N = 2 on two cores.
2. With a real PPO policy in the loop: the trainer process's CPU time per agent-step at N = 1
   and N = 8, inferring once over all agents (what the controller does) against once per
   environment, which shows what batching inference saves.
3. The schedule: synchronous (send to all, gather all, infer once: what ``EnvironmentSet``
   does) against double-buffered (infer for one half while the other half simulates), at
   N = 8 with the 5 ms frame time.

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
from unityagents.environment_set import EnvironmentSet  # noqa: E402

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


def random_rate(n: int, frame_ms: float, seconds: float, rng: np.random.Generator) -> float:
    """Environment steps per second (N x ticks / s) with random actions."""
    with open_set(n, frame_ms) as envs:
        info = envs.reset()
        def tick(info):
            return envs.step({BRAIN: rng.uniform(-1, 1, (len(info[BRAIN].agents), 2))})
        for _ in range(20):
            info = tick(info)
        ticks, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            info = tick(info)
            ticks += 1
            if envs.needs_reset:
                info, _ = envs.reset_finished()
        return n * ticks / (time.perf_counter() - start)


class Policy:
    """PPO's acting graph for 3DBall in one session, as the controller builds it."""

    def __init__(self, brains):
        from trainers.ppo_models import create_agent_model
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

    ``mode``: ``batched`` (one ``session.run`` over every agent), ``per-env`` (one per
    environment), or ``double`` (double-buffered: two halves, each inferred while the other
    simulates; the environments are driven directly, as such a schedule would have to).
    """
    with open_set(n, frame_ms) as envs:
        policy = Policy(envs.brains)
        info = envs.reset()
        workers = envs._workers  # the double-buffered schedule drives the environments itself

        def sync_tick(info):
            states = info[BRAIN].states
            if mode == "batched":
                actions = policy.act(states)
            else:
                actions = np.concatenate([policy.act(states[i * 12:(i + 1) * 12]) for i in range(n)])
            return envs.step({BRAIN: actions})

        halves = [list(range(0, n // 2)), list(range(n // 2, n))] if n > 1 else [[0]]
        latest: Dict[int, np.ndarray] = {}

        def double_start():
            for i, w in enumerate(workers):
                w.step_send({BRAIN: policy.act(info[BRAIN].states[i * 12:(i + 1) * 12])})

        def double_tick(_):
            for half in halves:
                for i in half:  # this half answered: infer for it and send at once; the other half simulates
                    states = workers[i].receive()[BRAIN].states
                    latest[i] = states
                states = np.concatenate([latest[i] for i in half])
                actions = policy.act(states)
                for k, i in enumerate(half):
                    workers[i].step_send({BRAIN: actions[k * 12:(k + 1) * 12]})
            return None

        if mode == "double":
            double_start()
            tick: Callable = double_tick
        else:
            tick = sync_tick
        for _ in range(20):
            info = tick(info)
        ticks = 0
        cpu, start = time.process_time(), time.perf_counter()
        while time.perf_counter() - start < seconds:
            info = tick(info)
            ticks += 1
            if mode != "double" and envs.needs_reset:
                info, _ = envs.reset_finished()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        if mode == "double":
            for w in workers:
                w.receive()
        return n * ticks / wall, 1e6 * cpu / (n * 12 * ticks)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per cell")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)

    print("1. environment steps/s, random actions (ratio: against N = 1 of the same column)")
    print("| N | 3DBall | x | 3DBall, 5 ms frames | x | target 0.8 N |")
    print("|---|---|---|---|---|---|")
    base: Dict[float, float] = {}
    for n in (1, 2, 4, 8):
        cells = []
        for frame in (0.0, 5.0):
            rate = random_rate(n, frame, args.seconds, rng)
            base.setdefault(frame, rate)
            cells.append(f"{rate:,.0f} | {rate / base[frame]:.2f}")
        print(f"| {n} | {' | '.join(cells)} | {0.8 * n:.1f} |")

    print("\n2. trainer process CPU per agent-step with PPO inference (3DBall, no frame time)")
    print("| N | inference | env steps/s | trainer CPU µs / agent-step |")
    print("|---|---|---|---|")
    for n in (1, 8):
        for mode in (("batched",) if n == 1 else ("batched", "per-env")):
            rate, cpu = policy_run(n, 0.0, args.seconds, mode)
            print(f"| {n} | {mode} | {rate:,.0f} | {cpu:.1f} |")

    print("\n3. schedule at N = 8, 5 ms frames, PPO inference")
    print("| schedule | env steps/s | trainer CPU µs / agent-step |")
    print("|---|---|---|")
    for mode, name in (("batched", "synchronous"), ("double", "double-buffered")):
        rate, cpu = policy_run(8, 5.0, args.seconds, mode)
        print(f"| {name} | {rate:,.0f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
