"""The environment layer's own CPU per raw step: 3DBall over API-2, no trainer, random actions.

Drives one ``EnvironmentSet`` (N = 1, the synchronous schedule) for ``--seconds`` and prints the
steps per second and the trainer process's CPU (``time.process_time``) per step: decoding the
message into the step types, merging, the action check and the send. Run it in the root of each
checkout to compare two versions (it imports the code of the working directory)::

    cd <checkout> && python bench/step_cpu.py [--seconds 4]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    import scaling

    rng = np.random.default_rng(0)
    with scaling.open_set(1, 0.0) as envs:
        steps, wall, cpu = scaling.drive(envs, "sync", lambda s: rng.uniform(-1, 1, (len(s), 2)), args.seconds)
    print(f"{os.getcwd()}: {steps / wall:.0f} steps/s, trainer-process CPU {cpu / steps * 1e6:.0f} us per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
