"""The recurrent update's gradient: through the LSTM's loop, or from the fused kernel, side by side.

Builds the PPO graph of Hallway's Release 22 settings (``bench/zoo.py``'s ppo/Hallway: 128 hidden
units in 2 layers, memory 128, sequences of 64, minibatches of 128 rows = 2 sequences) and times, in
one session, the CPU of one minibatch's gradient taken two ways over the same loss and variables:
``tf.gradients`` (the loop's own gradient: a second loop that stacks every step's intermediates)
and ``trainers.models.loop_gradients`` (what the update runs: the gradient through one fused
``BlockLSTM`` kernel), alternating, then the whole minibatch step (gradient and Adam) as the update
calls it. Prints CPU ms per call, the ratio, and the largest difference between the two gradients
(float rounding only)::

    python bench/recurrent_update.py [--calls 40] [--sequences 2] [--sequence-length 64]
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
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--sequences", type=int, default=2)
    parser.add_argument("--sequence-length", type=int, default=64)
    args = parser.parse_args()
    from trainers.models import loop_gradients
    from trainers.ppo.models import create_agent_model
    from trainers.tf_utils import tf
    from unityagents.brain import BrainParameters

    brain = BrainParameters("HallwayBrain", dict(stateSize=6, actionSize=4, actionSpaceType=0, stateSpaceType=1,
                                                 memorySize=128))
    graph = tf.Graph()
    with graph.as_default():
        model = create_agent_model(brain, h_size=128, num_layers=2, use_recurrent=True, m_size=128, beta=1e-2)
        through_loop = tf.gradients(model.loss, model.variables)
        fused = loop_gradients(model.loss, model.variables)
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
    n, t = args.sequences, args.sequence_length
    rng = np.random.default_rng(0)
    mask = np.ones((n, t), np.float32)
    mask[0, : t // 3] = 0  # a trajectory's first sequence is left-padded
    feed = {model.batch_size: n, model.sequence_length: t, model.state_in: rng.normal(size=(n * t, 6)),
            model.memory_in: rng.normal(size=(n, 128)) * 0.1, model.taken_actions: rng.integers(0, 4, n * t),
            model.old_log_probs: np.full(n * t, -1.386), model.old_value: np.zeros(n * t),
            model.advantages: rng.normal(size=n * t), model.returns: rng.normal(size=n * t),
            model.masks: mask.reshape(-1)}
    a, b = sess.run([through_loop, fused], feed)
    difference = max(float(np.abs(x - y).max()) for x, y in zip(a, b))
    cpu = {"through the loop": 0.0, "fused kernel": 0.0}
    for _ in range(args.calls):
        for name, fetch in (("through the loop", through_loop), ("fused kernel", fused)):
            start = time.process_time()
            sess.run(fetch, feed)
            cpu[name] += time.process_time() - start
    start = time.process_time()
    for _ in range(args.calls):
        sess.run(model.update_batch, feed)
    step = (time.process_time() - start) / args.calls * 1e3
    loop_ms, fused_ms = (cpu[k] / args.calls * 1e3 for k in ("through the loop", "fused kernel"))
    print(f"{n} sequences x {t} steps, {args.calls} calls each, CPU ms per call (load {os.getloadavg()[0]:.1f}):")
    print(f"  gradient through the loop  {loop_ms:7.2f}")
    print(f"  gradient, fused kernel     {fused_ms:7.2f}   ratio {fused_ms / loop_ms:.2f}")
    print(f"  the update's minibatch step (fused gradient and Adam)  {step:7.2f}")
    print(f"  largest difference between the two gradients: {difference:.2e}")


if __name__ == "__main__":
    main()
