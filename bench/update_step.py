"""Where a PPO minibatch step's time goes: its CPU per call at 256, 64 and 16 rows on 3DBall's graph.

The shipped ``Ball3DBrain`` trainer is filled from the in-process ``tests/fake_env.py`` scene until
its first update is due; then its compiled minibatch step (``PPOOptimizer._update_call``, what
``update`` calls 60 times per update) is timed on the first 256, 64 and 16 rows of that buffer. The
time that stays when the rows shrink is the executor's fixed cost over the step's ops; the rest
grows with the rows. ``--intra-op-threads`` sets the session's threads (0: TensorFlow's default).
Environment variables such as ``TF_XLA_FLAGS`` or ``TF_ENABLE_ONEDNN_OPTS`` apply as usual::

    python bench/update_step.py [--calls 500] [--intra-op-threads 0]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--intra-op-threads", type=int, default=0)
    args = parser.parse_args()
    from runner.settings.trainer_config import load_trainer_config
    from tests.fake_env import FakeEnv, Loop
    from trainers.tf_utils import tf
    from trainers.trainer.registry import load_registry
    from unityagents.brain import BrainParameters

    brain = BrainParameters("Ball3DBrain", dict(stateSize=8, actionSize=2, actionSpaceType=1, stateSpaceType=1,
                                                memorySize=0))
    settings = load_trainer_config(os.path.join(ROOT, "trainer_configurations.yaml"), load_registry()
                                   ).settings_for("Ball3DBrain")
    threads = args.intra_op_threads
    sess = tf.Session(graph=tf.Graph(), config=tf.ConfigProto(intra_op_parallelism_threads=threads,
                                                              inter_op_parallelism_threads=threads))
    trainer = settings.trainer_class(sess, {"Ball3DBrain": brain}, "Ball3DBrain",
                                     dict(settings.parameters, graph_scope="", summary_path=""), True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    Loop(FakeEnv(brain, n_agents=12)).until_ready(trainer)
    arrays, inputs = trainer.update_arrays(), trainer.update_inputs()
    call = trainer._update_call([], [])
    scalars = [trainer.sequence_length, 1e-5, 0.2, 0.005]  # a small learning rate: the weights barely move
    for rows in (256, 64, 16):
        values = [arrays[key][:rows] for _, key, _ in inputs]
        for _ in range(50):
            call(rows, *scalars, *values)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.calls):
            call(rows, *scalars, *values)
        print(f"{rows:4d} rows: {(time.perf_counter() - wall) / args.calls * 1e6:6.0f} us wall, "
              f"{(time.process_time() - cpu) / args.calls * 1e6:6.0f} us CPU per minibatch step")


if __name__ == "__main__":
    main()
