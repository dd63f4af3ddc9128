"""One SAC gradient step's CPU: the public ``Session.make_callable`` against ``compiled_call``.

Side by side in one process, alternated three times, 300 steps each (3DBall-sized: state 8,
2 continuous actions, batch 128, hidden 64), after filling the replay buffer from a fake stream.
Prints the CPU microseconds (``time.process_time``) per gradient step of each path and their ratio.

    python bench/sac_step.py
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def public_callable(sess, fetches, feeds):
    """The public path: a feed dict and ``Session.run`` under the hood on every call."""
    run = sess.make_callable(list(fetches), list(feeds))
    return lambda *values: list(run(*values))


def main() -> int:
    import trainers.sac.trainer as sac_trainer
    from tests.trainers.ppo.test_ppo import FakeStream
    from tests.trainers.sac.test_sac import CONTINUOUS, collect, make_sac
    from trainers.tf_utils import compiled_call

    trainer = make_sac(dict(CONTINUOUS, stateSize=8), batch_size=128, hidden_units=64, buffer_size=5000)
    collect(trainer, FakeStream(trainer.brain), 300)
    batch = trainer.replay.sample(128, trainer.rng)
    costs = {"make_callable": [], "compiled_call": []}
    for _ in range(3):
        for name, maker in (("make_callable", public_callable), ("compiled_call", compiled_call)):
            sac_trainer.compiled_call = maker
            trainer._update_call = None
            trainer.update(batch)  # builds the callable
            start = time.process_time()
            for _ in range(300):
                trainer.update(batch)
            costs[name].append((time.process_time() - start) / 300 * 1e6)
    sac_trainer.compiled_call = compiled_call
    for name, values in costs.items():
        print(f"{name:14s} " + " ".join(f"{v:6.0f}" for v in values) + " us CPU per gradient step")
    ratio = min(costs["compiled_call"]) / min(costs["make_callable"])
    print(f"compiled_call / make_callable (best of 3): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
