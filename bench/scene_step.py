"""A built-in scene's own work per gRPC step, in-process: parsing the trainer's actions, applying
them, stepping and building the reply, serialising it (what the scene's process adds to the wire).

``academy.grpc_communicator.ModernUnity`` is driven without a socket, as its gRPC loop drives it:
each step parses a serialised ``UnityMessageProto`` of the trainer's actions (seeded random actions
for the agents that asked, recorded in a first pass, since who asks depends on the episode), applies
it, runs the Academy until some agent reports, and serialises the reply. Prints per scene the µs per
step of each phase (wall time after 200 steps of warm-up), and the first 16 hex digits of the sha256
of every reply, in order: a before/after check of a change that must not alter a byte the scene
sends (run it in each checkout)::

    python bench/scene_step.py [--scenes 3DBall Basic Hallway] [--steps 5000]

Between a trainer's turns the caches are cold, so a step costs the scene several times this in a
run; ``bench/trained_scaling.py --scene ... --profile`` gives the scene process's CPU there.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
WARM_UP = 200


def new_scene(name: str):
    import academy.grpc_communicator as gc
    from academy import load_scene
    from academy.academy import Academy

    unity = gc.ModernUnity(Academy(load_scene(name)(seed=0), train_mode=True), client=None)
    first = unity._reset()
    return unity, first


def trainer_message(unity, rng: np.random.Generator) -> bytes:
    """The trainer's next message: an action for each agent that asked for a decision."""
    import academy.grpc_communicator as gc

    message = gc.pb.UnityMessageProto()
    message.header.status = 200
    rl = message.unity_input.rl_input
    rl.command = gc.pb.STEP
    for b in unity.brains:
        spec = b.spec
        for _ in range(unity.deciding[b.name].size):
            entry = rl.agent_actions[unity.names[b.name]].value.add()
            if spec.action_space == "discrete":
                entry.discrete_actions.append(int(rng.integers(spec.action_size)))
            else:
                entry.continuous_actions.extend(rng.uniform(-1, 1, spec.action_size).tolist())
                entry.discrete_actions.extend(int(rng.integers(k)) for k in spec.discrete_branches)
    return message.SerializeToString()


def measure(name: str, steps: int) -> str:
    import academy.grpc_communicator as gc

    unity, first = new_scene(name)
    rng = np.random.default_rng(0)
    messages = []
    for _ in range(steps + WARM_UP):  # who decides depends on the episodes: record the trainer's side first
        messages.append(trainer_message(unity, rng))
        unity._apply_actions(gc.pb.UnityMessageProto.FromString(messages[-1]).unity_input.rl_input)
        unity._run_until_report()
    unity, first = new_scene(name)
    digest = hashlib.sha256(first.SerializeToString(deterministic=True))
    phases = dict.fromkeys(("parse", "apply actions", "step + build reply", "serialise"), 0.0)
    for i, data in enumerate(messages):
        t0 = time.perf_counter()
        received = gc.pb.UnityMessageProto.FromString(data)
        t1 = time.perf_counter()
        unity._apply_actions(received.unity_input.rl_input)
        t2 = time.perf_counter()
        reply = unity._run_until_report()
        t3 = time.perf_counter()
        reply.SerializeToString()
        t4 = time.perf_counter()
        digest.update(reply.SerializeToString(deterministic=True))  # a fixed map order: the same bytes each run
        if i >= WARM_UP:
            for key, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                phases[key] += dt
    return (f"{name}, µs per gRPC step in the scene's process: "
            + ", ".join(f"{key} {value / steps * 1e6:.1f}" for key, value in phases.items())
            + f"; sha256 of its {len(messages) + 1} replies {digest.hexdigest()[:16]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", nargs="+", default=["3DBall"])
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # random actions take masked ones, which a scene reports each time
    for name in args.scenes:
        print(measure(name, args.steps), flush=True)


if __name__ == "__main__":
    main()
