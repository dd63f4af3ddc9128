"""What each door of ``UnityEnvironment`` costs per step, side by side on one 3DBall.

Three ways to step the same environment (12 agents, random actions), in interleaved blocks so that
load on the machine hits them alike:

1. ``step_behaviors(ActionTuple)``: the step types, what the environment set and the bridges use;
2. ``step(array)``: the original API, a numpy array in, ``{brain: BrainInfo}`` out;
3. ``set_actions`` + ``step()`` + ``get_steps``: mlagents_envs' low-level API.

Prints the median CPU microseconds of this process per step (the scene runs in its own process)
and each door's ratio to (1)::

    python bench/python_api.py [--protocol api2|grpc] [--steps 3000]
"""
from __future__ import annotations

import argparse
import socket
import statistics
import time

import numpy as np

from unityagents import UnityEnvironment
from unityagents.base_env import ActionTuple


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", default="api2", choices=("api2", "grpc"))
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    env = UnityEnvironment("3DBall", base_port=free_port(), seed=0, protocol=args.protocol)
    try:
        env.reset()
        name = env.external_brain_names[0]
        spec = env.behavior_specs[name].action_spec

        def steps_types(a):
            env.step_behaviors(ActionTuple(a))

        def original(a):
            return env.step(a)[name].states

        def low_level(a):
            env.set_actions(name, ActionTuple(a))
            env.step()
            env.get_steps(name)

        doors = {"step_behaviors(ActionTuple)": steps_types, "step(array) -> BrainInfo": original,
                 "set_actions + step() + get_steps": low_level}
        cpu = {d: [] for d in doors}
        block = 100
        for b in range(args.steps // block):
            for door, fn in doors.items():
                actions = rng.uniform(-1, 1, (block, 12, spec.continuous_size)).astype(np.float32)
                start = time.process_time()
                for a in actions:
                    fn(a)
                    if env.global_done:
                        env.reset()
                if b:  # the first block warms up
                    cpu[door].append((time.process_time() - start) / block * 1e6)
    finally:
        env.close()
    base = statistics.median(cpu["step_behaviors(ActionTuple)"])
    for door, values in cpu.items():
        median = statistics.median(values)
        print(f"{args.protocol} {door:36s} {median:8.1f} us CPU/step  ratio {median / base:.2f}")


if __name__ == "__main__":
    main()
