"""Self-play evaluation: does the final ``TennisBrain`` beat an early version of itself and a random player?

The ghost's ELO (``Self-play/ELO``) only compares the learner with its recent snapshots, which
rise with it, so a steady rating cannot tell "improved" from "stalled". This script settles it
with fixed opponents, played through the exported graph the way Unity's Internal brain plays it
(``academy.internal.InternalBrain``: scope ``TennisBrain/``, ``epsilon`` fed 0, so each policy
acts at its mean):

* the final export ``<run dir>/Tennis.bytes`` against an **early checkpoint** of the same run
  (by default the earliest one the run kept; ``learn.py --keep-checkpoints`` decides how many),
  frozen here with the same export code ``learn.py`` uses;
* the final export against a **random** player (uniform actions in [-1, 1]).

The final brain plays the left court (``TennisBrain``'s side), the opponent the right
(``ghost-TennisBrain``'s side); the scene mirrors states, so both see the court alike. A rally's
result is scored like the ghost's ELO games (``GhostTrainer.episode_scores``): the side with the
higher rally reward wins, equal rewards are a draw.

    python bench/selfplay.py models/tennis --rallies 200

prints one line per opponent: ``vs <opponent>: won W, lost L, drawn D (win rate ...)``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import List, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LEFT, RIGHT = "TennisBrain", "ghost-TennisBrain"


class RandomPolicy:
    """Uniform random actions: the floor any trained player must clear."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def decide(self, states, observations, memories):
        return self.rng.uniform(-1.0, 1.0, (len(states), 2)), memories


def checkpoints(run_dir: str) -> List[str]:
    """The checkpoint prefixes the run kept, oldest first."""
    from trainers.tf_utils import tf

    state = tf.train.get_checkpoint_state(run_dir)
    if state is None:
        raise SystemExit(f"{run_dir}: no checkpoint; pass the models/<run-path> folder of a Tennis run.")
    return [p if os.path.isabs(p) else os.path.join(run_dir, os.path.basename(p))
            for p in state.all_model_checkpoint_paths]


def export_checkpoint(prefix: str, scope: str, path: str) -> str:
    """Freeze ``scope``'s policy at checkpoint ``prefix`` into ``path``, as ``learn.py`` exports it."""
    from trainers.export.frozen_graph import contract_inputs, export_graph
    from trainers.tf_utils import tf

    graph = tf.Graph()
    with graph.as_default(), tf.Session(graph=graph) as sess:
        saver = tf.train.import_meta_graph(prefix + ".meta", clear_devices=True)
        saver.restore(sess, prefix)
        export_graph(sess, [f"{scope}/action"], path, keep_nodes=contract_inputs(graph, f"{scope}/"))
    return path


def play(left_policy, right_policy, rallies: int, seed: int) -> Tuple[int, int, int]:
    """(wins, losses, draws) of the left player over the first ``rallies`` finished rallies."""
    from academy.academy import Academy
    from academy.brain import BrainConfig
    from academy.envs.tennis import Tennis
    from trainers.ghost.trainer import GhostTrainer

    academy = Academy(Tennis(seed), {LEFT: BrainConfig("internal", left_policy),
                                     RIGHT: BrainConfig("internal", right_policy)})
    left, right = (next(b for b in academy.brains if b.name == name) for name in (LEFT, RIGHT))
    academy.reset()
    scores: List[float] = []
    while len(scores) < rallies:
        academy.decide()
        academy.advance()
        # Both agents of a court are done together (a dead ball ends the point for both).
        assert np.array_equal(left.done, right.done), "Tennis ended one side of a court only"
        rows = np.flatnonzero(left.done)
        scores += GhostTrainer.episode_scores((right.episode_reward + right.reward)[rows].tolist(),
                                              (left.episode_reward + left.reward)[rows].tolist())
        if academy.finish_step():
            academy.reset()
    scores = scores[:rallies]
    return scores.count(1.0), scores.count(0.0), scores.count(0.5)


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="models/<run-path> of a Tennis run (holds Tennis.bytes and checkpoints)")
    parser.add_argument("--early", help="checkpoint prefix of the early opponent (default: the earliest kept)")
    parser.add_argument("--rallies", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from academy.envs.tennis import Tennis
    from academy.internal import InternalBrain

    spec = {s.name: s for s in Tennis.brains}
    final_path = os.path.join(args.run_dir, "Tennis.bytes")
    if not os.path.isfile(final_path):
        raise SystemExit(f"{final_path} not found: train with `learn.py Tennis --train` first.")
    early = args.early or checkpoints(args.run_dir)[0]
    with tempfile.TemporaryDirectory() as scratch:
        early_path = export_checkpoint(early, LEFT, os.path.join(scratch, "early.bytes"))
        opponents = [
            (f"early checkpoint {os.path.basename(early)}",
             InternalBrain(early_path, spec[RIGHT], LEFT, seed=args.seed)),
            ("random policy", RandomPolicy(args.seed)),
        ]
        for name, opponent in opponents:
            final = InternalBrain(final_path, spec[LEFT], LEFT, seed=args.seed)
            won, lost, drawn = play(final, opponent, args.rallies, args.seed)
            print(f"vs {name}: won {won}, lost {lost}, drawn {drawn} "
                  f"(win rate {won / args.rallies:.2f}, loss rate {lost / args.rallies:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
