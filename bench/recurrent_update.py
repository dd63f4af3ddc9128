"""The recurrent update's CPU: the LSTM's loop against its fused twin, and one step of each trainer.

Builds the graphs of Hallway's Release 22 settings (``bench/zoo.py``: 128 hidden units in 2 layers,
memory 128, sequences of 64) and times, in one process, the CPU (``time.process_time``) of:

* PPO's LSTM forward on one minibatch (128 rows = 2 sequences) two ways: the ``while_loop`` that
  acts and is exported, and its fused ``BlockLSTM`` twin (``trainers.models.fused_lstm``), which
  the losses read (the largest difference between the two on the real steps is printed: 0 where
  both kernels add in the same order);
* PPO's minibatch step as the update calls it (gradient from ``BlockLSTMGrad``, flat Adam);
* SAC's gradient step (512 rows = 8 sequences; critics, actor, temperature, targets in one op).

Every sequence holds ``--real-steps`` real steps and padding for the rest (PPO's left-padded, as the
Buffer pads a trajectory's first sequence; SAC's padded at the end, as its replay pads an episode's
last block): the built-in Hallway's learnt episodes last about 7 steps, so most of an update's rows
are padding, which the fused kernel skips.

Rounds alternate between the calls, so a change of machine load hits all of them alike; prints the
median CPU ms per call::

    python bench/recurrent_update.py [--rounds 8] [--per-round 5] [--real-steps 42]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

UNITS, STEPS = 128, 64


def _ppo(brain, rng, real):
    from trainers.models import fused_lstm
    from trainers.ppo.models import create_agent_model

    model = create_agent_model(brain, h_size=128, num_layers=2, use_recurrent=True, m_size=UNITS, beta=1e-2)
    n = 2
    mask = np.ones((n, STEPS), np.float32)
    mask[:, : STEPS - real] = 0  # a trajectory's first sequence is left-padded
    feed = {model.batch_size: n, model.sequence_length: STEPS, model.state_in: rng.normal(size=(n * STEPS, 6)),
            model.memory_in: rng.normal(size=(n, UNITS)) * 0.1, model.taken_actions: rng.integers(0, 4, n * STEPS),
            model.old_log_probs: np.full(n * STEPS, -1.386), model.old_value: np.zeros(n * STEPS),
            model.advantages: rng.normal(size=n * STEPS), model.returns: rng.normal(size=n * STEPS),
            model.masks: mask.reshape(-1)}
    return model, feed, mask.reshape(-1), fused_lstm


def _sac(brain, rng, real):
    from trainers.sac.models import SACModel

    model = SACModel(brain, 128, 2, False, ["extrinsic"], {"extrinsic": 0.99}, {"extrinsic": True}, 0.1, 0.005,
                     3e-4, use_recurrent=True, m_size=UNITS)
    n = 8
    rows = n * STEPS
    mask = np.ones((n, STEPS), np.float32)
    mask[:, real:] = 0  # an episode's last block is padded at its end
    feed = {model.state: rng.normal(size=(rows, 6)), model.next_state: rng.normal(size=(rows, 6)),
            model.batch_size: rows, model.taken_actions: rng.integers(0, 4, (rows, 1)),
            model.dones: np.zeros(rows), model.rewards["extrinsic"]: rng.normal(size=rows),
            model.sequence_length: STEPS, model.masks: mask.reshape(-1),
            model.memory_in: rng.normal(size=(n, UNITS)) * 0.1, model.next_memory_in: rng.normal(size=(n, UNITS)) * 0.1,
            model.action_masks: np.ones((rows, 4)), model.next_action_masks: np.ones((rows, 4))}
    return model, feed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--per-round", type=int, default=5)
    parser.add_argument("--real-steps", type=int, default=STEPS * 2 // 3,
                        help="real steps in each sequence, the rest padding (the built-in Hallway's learnt "
                             "episodes are about 7 steps long)")
    args = parser.parse_args()
    from trainers.models import _loops
    from trainers.tf_utils import compiled_call, tf
    from unityagents.brain import BrainParameters

    brain = BrainParameters("HallwayBrain", dict(stateSize=6, actionSize=4, actionSpaceType=0, stateSpaceType=1,
                                                 memorySize=UNITS))
    rng = np.random.default_rng(0)
    calls = {}
    with tf.Graph().as_default() as graph:
        ppo, ppo_feed, real, fused_lstm = _ppo(brain, rng, args.real_steps)
        loop = _loops(graph)[0].outputs
        twin = fused_lstm(loop)
        sess = tf.Session(graph=graph)
        sess.run(tf.global_variables_initializer())
        looped, fused = sess.run([loop, twin], ppo_feed)
        difference = float(np.abs(looped[real > 0] - fused[real > 0]).max())
        for name, fetches in (("PPO: LSTM forward, the loop", [loop]), ("PPO: LSTM forward, the fused twin", [twin]),
                              ("PPO: the minibatch step", [ppo.update_batch])):
            calls[name] = (compiled_call(sess, fetches, list(ppo_feed)), list(ppo_feed.values()))
    with tf.Graph().as_default() as graph:
        sac, sac_feed = _sac(brain, rng, args.real_steps)
        sac_sess = tf.Session(graph=graph)
        sac_sess.run(tf.global_variables_initializer())
        calls["SAC: the gradient step"] = (compiled_call(sac_sess, [*sac.metrics.values(), sac.train_op],
                                                         list(sac_feed)), list(sac_feed.values()))
    for call, values in calls.values():
        call(*values)
    cpu = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, (call, values) in calls.items():
            start = time.process_time()
            for _ in range(args.per_round):
                call(*values)
            cpu[name].append((time.process_time() - start) / args.per_round * 1e3)
    print(f"Hallway's Release 22 sizes, {args.real_steps} real steps in each sequence of {STEPS}, median CPU ms per "
          f"call over {args.rounds} rounds of {args.per_round} (load {os.getloadavg()[0]:.1f}):")
    for name, values in cpu.items():
        print(f"  {name:36s} {np.median(values):7.2f}")
    print(f"  largest difference between the loop and its twin on the real steps: {difference:.2e}")


if __name__ == "__main__":
    main()
