"""One SAC gradient step's CPU, per variant of the update op, and one decision's, side by side in one process.

Variants (3DBall-sized: state 8, 2 continuous actions, batch 128, hidden 64):

* ``fused``: the trainer's step (``trainers.sac.update``): one Adam over all parameters as one
  flat vector, the targets moved as one vector;
* ``apply_adam``: the same losses with one ``tf.train.AdamOptimizer`` per loss (a fused
  ``ApplyAdam`` kernel per variable) and a soft update per target variable, as a reference.

Each variant runs the same fixed minibatch through its own trainer's compiled step
(``trainers.tf_utils.compiled_call``); rounds of ``--per-round`` steps alternate between the
variants, so a change of machine load hits all of them alike. Prints the median and the lower
quartile of the CPU microseconds (``time.process_time``) per gradient step, the executed nodes per
step, and the ratio of the medians. Then acting: the CPU of ``act`` on one decision of 12 agents
through the trainer's compiled calls (``trainers.tf_utils.CompiledRuns``) and through
``Session.run`` with a feed dict, alternated the same way.

    python bench/sac_step.py [--rounds 30] [--per-round 20]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from trainers.sac import SACTrainer  # noqa: E402
from trainers.sac.models import SACModel  # noqa: E402
from trainers.tf_utils import compiled_call, tf  # noqa: E402
from unityagents.brain import BrainParameters  # noqa: E402

BRAIN = {"stateSize": 8, "actionSize": 2, "actionSpaceType": 1, "stateSpaceType": 1}
BATCH = 128
AGENTS = 12  # 3DBall's platforms: the agents of one decision


def apply_adam_optimizer(self: SACModel, tau: float) -> None:
    """The reference step: three ``AdamOptimizer`` (an ``ApplyAdam`` per variable) after a barrier
    of identities on every gradient and metric, then a soft update op per target variable."""
    losses = ((self.policy_loss, self.policy_variables, "policy_adam"),
              (self.q1_loss + self.q2_loss, self.online_variables, "value_adam"),
              (self.entropy_loss, [self.log_alpha], "entropy_adam"))
    gradients = [tf.gradients(loss, variables) for loss, variables, _ in losses]
    with tf.control_dependencies([g for grads in gradients for g in grads] + list(self.metrics.values())):
        gradients = [[tf.identity(g) for g in grads] for grads in gradients]
    applied = tf.group(*[tf.train.AdamOptimizer(self.learning_rate, name=name).apply_gradients(
        list(zip(grads, variables))) for grads, (_, variables, name) in zip(gradients, losses)])
    with tf.control_dependencies([applied]):
        self.train_op = tf.group(*[tf.assign(t, tau * o.read_value() + (1.0 - tau) * t.read_value())
                                   for o, t in zip(self.online_variables, self.target_variables)])


def make_trainer() -> SACTrainer:
    brain = BrainParameters("Brain", BRAIN)
    params = {"graph_scope": "", "summary_path": "", "batch_size": BATCH, "buffer_size": 5000,
              "hidden_units": 64, "max_steps": 1000}
    sess = tf.Session(graph=tf.Graph())
    trainer = SACTrainer(sess, {brain.brain_name: brain}, brain.brain_name, params, training=True, seed=3)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    return trainer


def minibatch(rng: np.random.Generator) -> Dict[str, np.ndarray]:
    def floats(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return {"states": floats(BATCH, 8), "next_states": floats(BATCH, 8),
            "actions": np.tanh(floats(BATCH, 2)), "rewards": floats(BATCH),
            "dones": (rng.random(BATCH) < 0.05).astype(np.float32)}


def step_of(trainer: SACTrainer, batch: Dict[str, np.ndarray]) -> Callable[[], None]:
    """The trainer's compiled gradient step on ``batch``, fed once (the feed's own cost is not measured)."""
    m = trainer.model
    feed = trainer.update_feed(batch)
    call = compiled_call(trainer.sess, list(m.metrics.values()) + [m.train_op], list(feed))
    values = list(feed.values())
    return lambda: call(*values)


def executed_nodes(trainer: SACTrainer, batch: Dict[str, np.ndarray]) -> int:
    m = trainer.model
    meta = tf.RunMetadata()
    trainer.sess.run(list(m.metrics.values()) + [m.train_op], trainer.update_feed(batch),
                     options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=meta)
    return sum(len(d.node_stats) for d in meta.step_stats.dev_stats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--per-round", type=int, default=20)
    args = parser.parse_args()
    batch = minibatch(np.random.default_rng(0))
    trainers = {"fused": make_trainer()}
    fused = SACModel._optimizer
    SACModel._optimizer = apply_adam_optimizer
    try:
        trainers["apply_adam"] = make_trainer()
    finally:
        SACModel._optimizer = fused
    steps = {name: step_of(t, batch) for name, t in trainers.items()}
    nodes = {name: executed_nodes(t, batch) for name, t in trainers.items()}
    costs: Dict[str, List[float]] = {name: [] for name in steps}
    for step in steps.values():
        step()
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.process_time()
            for _ in range(args.per_round):
                step()
            costs[name].append((time.process_time() - start) / args.per_round * 1e6)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.per_round} steps each")
    for name, values in costs.items():
        print(f"{name:12s} median {np.median(values):6.0f}  lower quartile {np.percentile(values, 25):6.0f} "
              f"us CPU per gradient step, {nodes[name]} nodes executed")
    print(f"fused / apply_adam (medians): {np.median(costs['fused']) / np.median(costs['apply_adam']):.2f}")
    acting = acting_costs(trainers["fused"], args.rounds, args.per_round)
    for name, values in acting.items():
        print(f"acting, {name:12s} median {np.median(values):6.0f} us CPU per decision of {AGENTS} agents")
    return 0


def acting_costs(trainer: SACTrainer, rounds: int, per_round: int) -> Dict[str, List[float]]:
    """``act`` on one decision of ``AGENTS`` agents: through the trainer's compiled calls, and with
    ``Session.run`` and a feed dict in their place, alternated round by round."""
    from runner.agent_processor import brain_info
    from unityagents.base_env import DecisionSteps, TerminalSteps

    rng = np.random.default_rng(1)
    spec = trainer.brain.behavior_spec
    steps = (DecisionSteps([rng.standard_normal((AGENTS, 8)).astype(np.float32)], np.zeros(AGENTS),
                           np.arange(AGENTS)), TerminalSteps.empty(spec))
    info = brain_info(trainer.brain, steps)
    compiled = trainer._runs

    class SessionRun:
        def run(self, fetches, feed):
            return trainer.sess.run(dict(fetches), feed)

    ways = {"compiled": compiled, "Session.run": SessionRun()}
    costs: Dict[str, List[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            trainer._runs = way
            trainer.act(info)
            start = time.process_time()
            for _ in range(per_round):
                trainer.act(info)
            costs[name].append((time.process_time() - start) / per_round * 1e6)
    trainer._runs = compiled
    return costs


if __name__ == "__main__":
    sys.exit(main())
