"""Team self-play evaluation: does a Release 22 self-play run's final export beat fixed opponents?

ELO (``Self-play/ELO``) rates the learner against its own snapshots, which rise with it; fixed
opponents settle whether it improved. The final export (``<Scene>.onnx``) plays the first team's
side (``<Scene>?team=0``) against

* an **early snapshot** of the same run: the ``<Scene>-<step>.onnx`` written beside its first kept
  checkpoint (by default; ``--early`` names another file);
* a **random** player (uniform actions);
* for Soccer, the scene's **scripted** team (both members run to the ball and push it together).

Scenes: ``Tennis`` (PPO, ``config/ppo/Tennis.yaml``; the modern Tennis' points, +1 to the winner,
-1 to the loser, decision period 5), ``Soccer`` (MA-POCA, ``config/poca/Soccer.yaml``; goals
paid as group rewards) and ``SoccerTwos`` (the same scene trained with Release 22's
``poca/SoccerTwos.yaml`` settings, ``config/poca/SoccerTwos.yaml``). They are played on the scene
directly with the decision period the run trained with, each policy acting through onnxruntime as Unity would
(``academy.internal.OnnxInternalBrain``). A game is won or lost by the sign of the first team's
last reward (own plus group reward), as self-play scores it; one that runs out is a draw. In
Soccer the policies' most probable action is the same (forward) in nearly every state, so greedy
play (the default) makes every pair of them play the same games; compare them with
``--stochastic``, as Unity plays an export unless Deterministic Inference is ticked.

    python bench/selfplay_teams.py results/tennis --games 50
    python bench/selfplay_teams.py results/soccer --scene Soccer --games 200
    python bench/selfplay_teams.py results/soccertwos --scene SoccerTwos --train 600000 --games 50

prints one line per opponent: ``vs <opponent>: won W, lost L, drawn D (win rate ...)``. ``--train
STEPS`` first trains the run folder with the scene's config (``max_steps`` STEPS, a checkpoint and
export every ``--checkpoint-every`` steps, the behaviour named as the scene names it over gRPC),
then prints the ELO over the run (``Self-play/ELO`` at each summary, and ``training_status.json``'s).
"""
from __future__ import annotations

import argparse
import glob
import importlib
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Match:
    """How one two-team scene is played here: its class, its two brains, its decision period."""

    scene: str          # "module:Class"
    first: str          # the brain of team 0 (the final export's side)
    second: str
    period: int
    config: str         # the run config that trains it

    def load(self):
        module, _, cls = self.scene.partition(":")
        return getattr(importlib.import_module(module), cls)


MATCHES = {
    "Tennis": Match("academy.envs.tennis:Tennis", "TennisBrain", "ghost-TennisBrain", 5, "config/ppo/Tennis.yaml"),
    "Soccer": Match("academy.envs.soccer:Soccer", "SoccerBlue", "SoccerPurple", 1, "config/poca/Soccer.yaml"),
    "SoccerTwos": Match("academy.envs.soccer:Soccer", "SoccerBlue", "SoccerPurple", 1,
                        "config/poca/SoccerTwos.yaml"),
}


def behavior_name(match: Match) -> str:
    """The scene's behaviour as it goes out over gRPC, without ``?team=N``."""
    from unityagents.brain import team_base

    scene = match.load()
    return team_base(getattr(scene, "behavior_names", {}).get(match.first, f"{match.first}?team=0"))


def train(match: Match, run_dir: str, steps: int, checkpoint_every: int, seed: int) -> None:
    """Train ``run_dir`` with the match's config under the scene's behaviour name."""
    import yaml

    import learn_r22

    with open(os.path.join(ROOT, match.config)) as f:
        config = yaml.safe_load(f)
    (block,) = config["behaviors"].values()
    # Every export is kept, so the earliest is there to play against.
    block.update(max_steps=steps, checkpoint_interval=checkpoint_every, keep_checkpoints=steps // checkpoint_every + 1)
    config["behaviors"] = {behavior_name(match): block}
    results, run_id = os.path.split(os.path.abspath(run_dir))
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, f"{run_id}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    with socket.socket() as probe:  # a free port: other runs may hold the default one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    code = learn_r22.main([path, f"--env={match.scene.rpartition(':')[2]}", f"--run-id={run_id}",
                           f"--results-dir={results}", f"--seed={seed}", "--force", f"--base-port={port}"])
    if code:
        raise SystemExit(f"training exited with {code}")
    print(f"trained {steps} learner steps in {time.monotonic() - started:.0f} s", flush=True)


def print_elo(run_dir: str, name: str) -> None:
    """``Self-play/ELO`` at each summary of the run, and the ELO ``training_status.json`` holds."""
    import json

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(os.path.join(run_dir, name)).Reload().Scalars("Self-play/ELO")
    print("ELO over the run (step: ELO): " + ", ".join(f"{e.step}: {e.value:.0f}" for e in scalars), flush=True)
    status = os.path.join(run_dir, "run_logs", "training_status.json")
    if os.path.isfile(status):
        with open(status) as f:
            print(f"training_status.json: {name}.elo = {json.load(f).get(name, {}).get('elo')}", flush=True)


def onnx_policy(match: Match, path: str, deterministic: bool) -> Policy:
    from academy.internal import OnnxInternalBrain

    brain = OnnxInternalBrain(path, match.load().brains[0], deterministic=deterministic)
    return lambda states: brain.decide(states, [], np.zeros((len(states), 0)))[0]


def random_policy(match: Match, seed: int) -> Policy:
    rng = np.random.default_rng(seed)
    spec = match.load().brains[0]
    if spec.action_space == "discrete":
        return lambda states: rng.integers(0, spec.action_size, (len(states), 1)).astype(float)
    return lambda states: rng.uniform(-1.0, 1.0, (len(states), spec.action_size))


def play(match: Match, first: Policy, second: Optional[Policy], games: int, seed: int = 0) -> Tuple[int, int, int]:
    """(won, lost, drawn) of ``first`` over the first ``games`` games of the scene's areas.

    ``second`` None plays the scene's own heuristic on the second team.
    """
    from trainers.ghost.self_play import game_result

    scene = match.load()(seed)
    scene.modern_protocol = True
    scene.academy_reset()
    rows = np.arange(scene.brains[0].n_agents)
    for brain in (match.first, match.second):
        scene.reset_agents(brain, rows)
    results: List[float] = []
    actions = {}
    frame = 0
    while len(results) < games:
        if frame % match.period == 0:
            actions = {match.first: first(scene.states(match.first)),
                       match.second: (second(scene.states(match.second)) if second is not None
                                      else scene.heuristic(match.second))}
        out = scene.step(actions)
        reward, dead = out[match.first][:2]
        if len(out[match.first]) > 2:   # a group reward (Soccer's goals)
            reward = reward + out[match.first][2]
        # One game per area: its first row (the members of a team end together).
        ended = np.flatnonzero(dead)
        areas = ended if not hasattr(scene, "area") else ended[np.unique(scene.area[ended], return_index=True)[1]]
        results += [game_result(reward[k]) for k in areas]
        if ended.size:
            for brain in (match.first, match.second):
                scene.reset_agents(brain, ended)
        frame += 1
    results = results[:games]
    return results.count(1.0), results.count(0.0), results.count(0.5)


def step_files(run_dir: str, name: str) -> List[str]:
    """The run's ``<name>-<step>.onnx`` files, lowest step first."""
    files = glob.glob(os.path.join(run_dir, "**", f"{name}-*.onnx"), recursive=True)
    return sorted(files, key=lambda p: int(re.findall(r"-(\d+)\.onnx$", p)[0]))


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="results/<run-id> of a team self-play run (holds <Scene>.onnx)")
    parser.add_argument("--scene", choices=sorted(MATCHES), default="Tennis")
    parser.add_argument("--early", help="the early snapshot's .onnx (default: the lowest-step <Scene>-<step>.onnx)")
    parser.add_argument("--games", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean")
    parser.add_argument("--train", type=int, metavar="STEPS", help="train run_dir first, for STEPS learner steps")
    parser.add_argument("--checkpoint-every", type=int, default=50000, help="with --train: steps between exports")
    args = parser.parse_args(argv)

    match = MATCHES[args.scene]
    name = behavior_name(match) if match.config.endswith("SoccerTwos.yaml") else args.scene
    if args.train:
        train(match, args.run_dir, args.train, args.checkpoint_every, args.seed)
    if match.scene.endswith(":Soccer"):
        print_elo(args.run_dir, name)
    final = os.path.join(args.run_dir, f"{name}.onnx")
    if not os.path.isfile(final):
        raise SystemExit(f"{final} not found: train with `unityagents-learn {match.config} --env={args.scene}` "
                         "first, or pass --train STEPS.")
    early = args.early or (step_files(args.run_dir, name) or [None])[0]
    if early is None:
        raise SystemExit(f"{args.run_dir}: no {name}-<step>.onnx; pass --early <file>.")
    deterministic = not args.stochastic
    opponents = [(f"early snapshot {os.path.basename(early)}", onnx_policy(match, early, deterministic)),
                 ("random policy", random_policy(match, args.seed))]
    if match.scene.endswith(":Soccer"):
        opponents.append(("scripted team", None))
    for name, opponent in opponents:
        won, lost, drawn = play(match, onnx_policy(match, final, deterministic), opponent, args.games, args.seed)
        print(f"vs {name}: won {won}, lost {lost}, drawn {drawn} (win rate {won / args.games:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
