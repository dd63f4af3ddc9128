"""Team self-play evaluation: does a Release 22 self-play run's final ``Tennis.onnx`` beat fixed opponents?

ELO (``Self-play/ELO``) rates the learner against its own snapshots, which rise with it; fixed
opponents settle whether it improved. The final export plays the left court (``Tennis?team=0``'s
side) against

* an **early snapshot** of the same run: the ``Tennis-<step>.onnx`` written beside its first kept
  checkpoint (by default; ``--early`` names another file);
* a **random** player (uniform actions in [-1, 1]).

The games are the modern Tennis' points (``modern_protocol``: +1 to the winner, -1 to the loser),
played on the scene directly with the decision period the run trained with (5 frames), each
policy acting through onnxruntime as Unity would (``academy.internal.OnnxInternalBrain``). A
point is won or lost by the sign of the left side's last reward, as self-play scores it; a rally
that runs out (1000 decisions) is a draw.

    python bench/selfplay_teams.py results/tennis --games 50

prints one line per opponent: ``vs <opponent>: won W, lost L, drawn D (win rate ...)``.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from typing import Callable, List, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

Policy = Callable[[np.ndarray], np.ndarray]


def onnx_policy(path: str, deterministic: bool) -> Policy:
    from academy.envs.tennis import Tennis
    from academy.internal import OnnxInternalBrain

    brain = OnnxInternalBrain(path, Tennis.brains[0], deterministic=deterministic)
    return lambda states: brain.decide(states, [], np.zeros((len(states), 0)))[0]


def random_policy(seed: int) -> Policy:
    rng = np.random.default_rng(seed)
    return lambda states: rng.uniform(-1.0, 1.0, (len(states), 2))


def play(left: Policy, right: Policy, games: int, seed: int = 0, period: int = 5) -> Tuple[int, int, int]:
    """(won, lost, drawn) of ``left`` over the first ``games`` points of the 8 courts."""
    from academy.envs.tennis import LEFT, RIGHT, Tennis
    from trainers.ghost.self_play import game_result

    scene = Tennis(seed)
    scene.modern_protocol = True
    scene.academy_reset()
    courts = np.arange(scene.brains[0].n_agents)
    scene.reset_agents(LEFT, courts)
    results: List[float] = []
    actions = {}
    frame = 0
    while len(results) < games:
        if frame % period == 0:
            actions = {LEFT: left(scene.states(LEFT)), RIGHT: right(scene.states(RIGHT))}
        out = scene.step(actions)
        reward, dead = out[LEFT]
        ended = np.flatnonzero(dead)
        results += [game_result(reward[k]) for k in ended]
        if ended.size:
            scene.reset_agents(LEFT, ended)
        frame += 1
    results = results[:games]
    return results.count(1.0), results.count(0.0), results.count(0.5)


def step_files(run_dir: str) -> List[str]:
    """The run's ``Tennis-<step>.onnx`` files, lowest step first."""
    files = glob.glob(os.path.join(run_dir, "**", "Tennis-*.onnx"), recursive=True)
    return sorted(files, key=lambda p: int(re.findall(r"-(\d+)\.onnx$", p)[0]))


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="results/<run-id> of a Tennis self-play run (holds Tennis.onnx)")
    parser.add_argument("--early", help="the early snapshot's .onnx (default: the lowest-step Tennis-<step>.onnx)")
    parser.add_argument("--games", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean")
    args = parser.parse_args(argv)

    final = os.path.join(args.run_dir, "Tennis.onnx")
    if not os.path.isfile(final):
        raise SystemExit(f"{final} not found: train with `unityagents-learn config/ppo/Tennis.yaml --env=Tennis` "
                         "first.")
    early = args.early or (step_files(args.run_dir) or [None])[0]
    if early is None:
        raise SystemExit(f"{args.run_dir}: no Tennis-<step>.onnx; pass --early <file>.")
    deterministic = not args.stochastic
    opponents = [(f"early snapshot {os.path.basename(early)}", onnx_policy(early, deterministic)),
                 ("random policy", random_policy(args.seed))]
    for name, opponent in opponents:
        won, lost, drawn = play(onnx_policy(final, deterministic), opponent, args.games, args.seed)
        print(f"vs {name}: won {won}, lost {lost}, drawn {drawn} (win rate {won / args.games:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
