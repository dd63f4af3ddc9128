"""What the socket costs: 3DBall stepped over the API-2 wire vs in-process, vs bare loopback.

Three measurements, side by side in one run:

1. ``UnityEnvironment.step`` on the built-in 3DBall (12 agents) with random actions: the full
   path (JSON, framing, two processes, three lock-step round trips per step);
2. the same scene stepped in-process through ``academy.Academy`` (no socket, no JSON);
3. a bare lock-step round trip between two processes over loopback (TCP_NODELAY, 8-byte
   messages): the floor of any lock-step protocol. A 3DBall step needs three of them
   (STEP/STEPPING, actions/state, RECEIVED/done flag).

The wire's own cost per step is (1) minus (2); the target is at most 1.5x three round trips.

    python bench/protocol.py [--steps 3000]
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from academy import load_scene  # noqa: E402
from academy.academy import Academy  # noqa: E402
from unityagents import UnityEnvironment  # noqa: E402

ECHO_SERVER = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    data = s.recv(8)
    if not data:
        break
    s.sendall(data)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_socket(steps: int, rng: np.random.Generator) -> float:
    """Seconds per ``UnityEnvironment.step`` on 3DBall."""
    env = UnityEnvironment("3DBall", base_port=free_port(), seed=0)
    try:
        env.reset()
        actions = rng.uniform(-1, 1, (steps, 12, 2))
        for i in range(200):  # warm-up
            env.step(actions[i])
            if env.global_done:
                env.reset()
        blocks = []
        for b in range(5):
            start = time.perf_counter()
            for i in range(b * (steps // 5), (b + 1) * (steps // 5)):
                env.step(actions[i])
                if env.global_done:
                    env.reset()
            blocks.append((time.perf_counter() - start) / (steps // 5))
        return float(np.median(blocks))
    finally:
        env.close()


def bench_in_process(steps: int, rng: np.random.Generator) -> float:
    """Seconds per decision of the same scene without the socket."""
    academy = Academy(load_scene("3DBall")(seed=0), train_mode=True)
    academy.reset()
    actions = rng.uniform(-1, 1, (steps, 12, 2))
    start = time.perf_counter()
    for i in range(steps):
        academy.set_external_actions({"action": {"Ball3DBrain": actions[i]}})
        academy.decide()
        academy.advance()
        academy.finish_step(lambda brain: academy.scene.states(brain.name))
    return (time.perf_counter() - start) / steps


def bench_round_trip(n: int) -> float:
    """Seconds per lock-step 8-byte round trip to another process over loopback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    proc = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(listener.getsockname()[1])])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for _ in range(500):
            conn.sendall(b"RECEIVED")
            conn.recv(8)
        blocks = []  # the median of 5 blocks: a single block swings with the scheduler
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n // 5):
                conn.sendall(b"RECEIVED")
                conn.recv(8)
            blocks.append((time.perf_counter() - start) / (n // 5))
        return float(np.median(blocks))
    finally:
        conn.close()
        listener.close()
        proc.wait(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rtt = bench_round_trip(args.steps * 3)
    wire = bench_socket(args.steps, rng)
    local = bench_in_process(args.steps, rng)
    floor = 3 * rtt
    cost = wire - local
    print(f"3DBall over the socket : {1 / wire:9.0f} steps/s  ({wire * 1e6:7.1f} us/step)")
    print(f"3DBall in-process      : {1 / local:9.0f} steps/s  ({local * 1e6:7.1f} us/step)")
    print(f"loopback round trip    : {1 / rtt:9.0f} trips/s  ({rtt * 1e6:7.1f} us/trip)")
    print(f"socket / in-process    : {wire / local:9.2f}x slower")
    print(f"wire cost per step     : {cost * 1e6:9.1f} us (socket minus in-process)")
    print(f"floor: 3 round trips   : {floor * 1e6:9.1f} us")
    print(f"wire cost / floor      : {cost / floor:9.2f}x (target <= 1.5)")


if __name__ == "__main__":
    main()
