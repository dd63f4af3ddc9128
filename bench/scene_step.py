"""The built-in 3DBall's own work per gRPC step, in-process: parsing the trainer's actions, applying
them, stepping and building the reply, serialising it (what the scene's process adds to the wire).

``academy.grpc_communicator.ModernUnity`` is driven without a socket: each step parses the same
serialised ``UnityMessageProto`` of 12 continuous actions, applies it, runs the Academy until it
reports, and serialises the reply::

    python bench/scene_step.py [--steps 5000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    import academy.grpc_communicator as gc
    from academy import load_scene
    from academy.academy import Academy

    unity = gc.ModernUnity(Academy(load_scene("3DBall")(seed=0), train_mode=True), client=None)
    unity._reset()
    message = gc.pb.UnityMessageProto()
    message.header.status = 200
    rl = message.unity_input.rl_input
    rl.command = gc.pb.STEP
    actions = rl.agent_actions["3DBall?team=0"].value
    rng = np.random.default_rng(0)
    for _ in range(12):
        actions.add().continuous_actions.extend(rng.uniform(-1, 1, 2).tolist())
    data = message.SerializeToString()
    phases = dict.fromkeys(("parse", "apply actions", "step + build reply", "serialise"), 0.0)
    for i in range(args.steps + 200):  # 200 steps of warm-up
        t0 = time.perf_counter()
        received = gc.pb.UnityMessageProto.FromString(data)
        t1 = time.perf_counter()
        unity._apply_actions(received.unity_input.rl_input)
        t2 = time.perf_counter()
        reply = unity._run_until_report()
        t3 = time.perf_counter()
        reply.SerializeToString()
        t4 = time.perf_counter()
        if i >= 200:
            for key, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                phases[key] += dt
    print("3DBall, us per gRPC step in the scene's process: " +
          ", ".join(f"{key} {value / args.steps * 1e6:.1f}" for key, value in phases.items()))


if __name__ == "__main__":
    main()
