"""Where MA-POCA's CPU goes with poca/SoccerTwos' shapes, without a scene: the update and the collecting.

SoccerTwos' Release 22 file trains 512-unit networks (2 layers) on minibatches of 2,048 member-steps,
three epochs over buffers of 20,480; the built-in Soccer sends 6 floats per agent, one discrete branch
of 3, two members per group, 8 groups per team. This script builds one ``POCATrainer`` with those
settings in its own session and prints, in CPU ms (every thread of this process):

* one minibatch step of the update (the compiled call the update makes 30 times per buffer), and
  the gradient of the group critic alone: both passes, the value pass (the member and its mates
  by observation), the baseline pass (the mates with their actions), and the critic's forward;
* per agent-step, what collecting costs: acting for the 16 agents of a team, and the group steps,
  the critic's evaluation of each game's member-steps when the game ends and the returns
  (``process_experience``), over games of up to 40 steps; and ``take_update_batch`` per row.

::

    python bench/poca_update.py [--steps 1500] [--repeats 3]

The machine should be otherwise idle; the figures are each measure's best of ``--repeats``.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())
from runner.collector import ExperienceCollector  # noqa: E402
from trainers.poca.trainer import POCATrainer  # noqa: E402
from trainers.tf_utils import tf  # noqa: E402
from trainers.trainer.brain_info import BrainInfo  # noqa: E402
from unityagents.brain import BrainParameters  # noqa: E402

BRAIN = BrainParameters("SoccerTwos", {"stateSize": 6, "actionSize": 3, "memorySize": 0, "cameraResolutions": [],
                                       "actionDescriptions": ["stay", "forward", "back"], "actionSpaceType": 0,
                                       "stateSpaceType": 1})
AGENTS, GROUPS, GAME = 16, 8, 40
BATCH = 2048


def best(run, repeats: int) -> float:
    """The least CPU seconds of ``run()`` over ``repeats`` calls, after one call to warm up."""
    run()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=1500, help="environment steps of collecting (16 agents each)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
    sess = tf.Session(graph=graph)
    params = {"graph_scope": "", "summary_path": "", "batch_size": BATCH, "buffer_size": 10 ** 9,
              "time_horizon": 1000, "hidden_units": 512, "num_layers": 2, "max_steps": 10 ** 8, "num_epoch": 3,
              "normalize": False, "learning_rate_schedule": "constant"}
    trainer = POCATrainer(sess, {BRAIN.brain_name: BRAIN}, BRAIN.brain_name, params, training=True)
    c = trainer.critic
    with graph.as_default():
        value_loss, baseline_loss = tf.reduce_sum(tf.square(c.value)), tf.reduce_sum(tf.square(c.baseline))
        critic_parts = {name: [g for g in tf.gradients(loss, c.variables) if g is not None] for name, loss in
                        (("both passes", value_loss + baseline_loss), ("value pass", value_loss),
                         ("baseline pass", baseline_loss))}
        critic_parts["forward (both)"] = [c.value, c.baseline]
        sess.run(tf.global_variables_initializer())
    rng = np.random.default_rng(0)

    # Collecting: 8 groups of 2 playing games of up to GAME steps; a goal ends a game at random.
    collector, agents = ExperienceCollector.for_trainer(trainer), list(range(AGENTS))
    groups = [1 + i // 2 for i in range(AGENTS)]
    clock = np.zeros(GROUPS, int)

    def info(done: np.ndarray) -> BrainInfo:
        ends = [bool(done[i // 2]) for i in range(AGENTS)]
        return BrainInfo([], rng.random((AGENTS, 6)).astype(np.float32), None, [0.0] * AGENTS, agents, ends,
                         max_reached=[False] * AGENTS, group_id=groups,
                         group_rewards=[float(e) * (1.0 if i % 4 < 2 else -1.0) for i, e in enumerate(ends)])

    current, acting, processing = info(np.zeros(GROUPS, bool)), 0.0, 0.0
    for _ in range(args.steps):
        start = time.process_time()
        _, _, _, outputs = trainer.take_action({BRAIN.brain_name: current})
        middle = time.process_time()
        clock += 1
        done = (clock >= GAME) | (rng.random(GROUPS) < 0.04)
        after = info(done)
        trainer.process_experience(collector.collect({BRAIN.brain_name: current}, {BRAIN.brain_name: after},
                                                     outputs))
        acting, processing = acting + middle - start, processing + time.process_time() - middle
        clock[done] = 0
        current = info(np.zeros(GROUPS, bool)) if done.any() else after
    rows = len(trainer.rows)
    start = time.process_time()
    batch = trainer.take_update_batch()
    taking = time.process_time() - start
    agent_steps = args.steps * AGENTS
    print(f"collecting, CPU us per agent-step ({agent_steps} agent-steps, {rows} member-steps moved): "
          f"acting {1e6 * acting / agent_steps:.0f}, group steps + critic + returns "
          f"{1e6 * processing / agent_steps:.0f}; take_update_batch {1e6 * taking / rows:.1f} us per row")

    # One minibatch step of the update, as ``update`` feeds it, and the critic's gradient by pass.
    rows_of = np.arange(BATCH)
    feed = trainer.minibatch_feed(batch, rows_of, trainer.current_learning_rate())
    step = [trainer.update_op(), *trainer.update_metrics()]
    whole = best(lambda: sess.run(step, feed), args.repeats)
    print(f"update, CPU ms per minibatch of {BATCH}: the whole step {1e3 * whole:.0f} "
          f"(x{3 * 20480 // BATCH} per 20,480 agent-steps: {1e6 * whole * 3 / BATCH:.0f} us per agent-step)")
    critic_feed = {t: feed[t] for t in (c.own_state, c.mate_states, c.mate_actions, c.mate_present)}
    for name, fetches in critic_parts.items():
        spent = best(lambda fetches=fetches: sess.run(fetches, critic_feed), args.repeats)
        print(f"  the critic's {name}: {1e3 * spent:.0f} ({spent / whole:.2f} of the step)")


if __name__ == "__main__":
    main()
