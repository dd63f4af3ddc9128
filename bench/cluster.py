"""What running environments as Ray actors costs, and how it scales over two nodes.

Side by side in one run, on a 2-node Ray cluster started on this machine (a head and one more
node, each a real raylet, on 127.0.0.1 only), with the built-in 3DBall and random actions:

1. per-step overhead: µs per environment step through Ray actors against the local backend at
   the same N (N = 1 and 4), no frame time: the cost of a Ray round trip per step;
2. scaling: environment steps/s of 1, 2, 4 and 8 actors spread over the 2 nodes, each decision
   costing 5 ms (``--frame-time-ms 5``, a heavy Unity build), against 1 local environment.
   Target >= 0.8 N.

    python bench/cluster.py [--seconds 4]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, List, Optional

import numpy as np

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray is imported: loopback only
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from scaling import BRAIN, free_ports  # noqa: E402

from unityagents import UnityEnvironment  # noqa: E402
from unityagents.base_env import ActionTuple  # noqa: E402
from unityagents.vector.environment_set import EnvironmentSet  # noqa: E402
from unityagents.vector.ray_backend import RayEnvironmentWorker  # noqa: E402


def rate(make: Callable[[int], object], n: int, seconds: float, rng: np.random.Generator) -> float:
    """Environment steps per second (N x ticks / s) of an ``EnvironmentSet`` of ``n``, random actions."""
    with EnvironmentSet(make, n) as envs:
        info = envs.reset()
        for _ in range(20):
            info = envs.step({BRAIN: ActionTuple(rng.uniform(-1, 1, (len(info[BRAIN][0]), 2)))})
        ticks, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            info = envs.step({BRAIN: ActionTuple(rng.uniform(-1, 1, (len(info[BRAIN][0]), 2)))})
            ticks += 1
        return n * ticks / (time.perf_counter() - start)


def makers(frame_ms: float, n: int):
    base = free_ports(n)
    kwargs = lambda i: dict(file_name="3DBall", base_port=base, worker_id=i, seed=i,  # noqa: E731
                            env_args=["--frame-time-ms", str(frame_ms)] if frame_ms else [])
    return (lambda i: UnityEnvironment(**kwargs(i))), (lambda i: RayEnvironmentWorker(i, kwargs(i)))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per cell")
    args = parser.parse_args(argv)
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 8, "include_dashboard": False})
    cluster.add_node(num_cpus=8)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING")
    rng = np.random.default_rng(0)
    try:
        print("1. per-step cost, 3DBall, random actions, no frame time")
        print("| N | local µs/env-step | Ray actors µs/env-step | Ray overhead µs/env-step |")
        print("|---|---|---|---|")
        for n in (1, 4):
            local, remote = makers(0.0, n)
            a, b = rate(local, n, args.seconds, rng), rate(remote, n, args.seconds, rng)
            print(f"| {n} | {1e6 / a:.0f} | {1e6 / b:.0f} | {1e6 / b - 1e6 / a:.0f} |")

        print("\n2. scaling over 2 nodes, 5 ms per decision (ratio: against 1 local environment)")
        print("| environments | env steps/s | x one local | target 0.8 N |")
        print("|---|---|---|---|")
        local, _ = makers(5.0, 1)
        one = rate(local, 1, args.seconds, rng)
        print(f"| 1 local | {one:,.0f} | 1.00 | - |")
        for n in (1, 2, 4, 8):
            _, remote = makers(5.0, n)
            r = rate(remote, n, args.seconds, rng)
            print(f"| {n} Ray actors | {r:,.0f} | {r / one:.2f} | {0.8 * n:.1f} |")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
