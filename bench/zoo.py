"""The zoo: our trainer beside Unity's ``mlagents-learn`` 1.1.0 on every built-in scene with an ML-Agents example file.

Each scene runs with ML-Agents' own Release 22 example settings for it (their values, written into a
temporary run config at run time; no copy of Unity's files is shipped), unchanged but for
``max_steps`` (the wall-clock ``--budget`` ends a run instead) and a summary every ``--summary-freq``
agent-steps (2,000), so that short runs have a curve. Both trainers read the same file and start the
same built-in scene wrapped as a build (``bench/vs_mlagents.py``'s ``make_build``: ``python -m academy
<scene>`` behind an executable started as a Unity player is, over gRPC), with the same seeds:

* ours: ``python learn_r22.py <file> --env=<build>`` from this checkout;
* Unity's: ``mlagents-learn <file> --env=<build> --torch-device cpu`` from its own virtual environment
  (``--mlagents PATH``, else the one on PATH; ``bench/vs_mlagents.py`` says how to install it). When
  there is none, one line says so and only ours runs.

Each run is timed as ``bench/vs_mlagents.py`` times it (its console's summary lines time-stamped as
they arrive): agent-steps/s between the first summary and the first at the scene's target (or the
last one within the budget), and the wall time from launch to the first summary at the target. A run
stops at the target, or after ``--budget`` seconds. Printed per scene and seed as it comes, then the
markdown table (the mean over seeds; ``--table FILE`` also writes it), and with ``--plots DIR`` one PNG
per scene of seed 0's two runs (``bench/plot_runs.py``: reward against agent-steps and wall time)::

    python bench/zoo.py [--scenes ppo/Basic ppo/GridWorld ...] [--seeds 3] [--budget 600]
        [--mlagents PATH] [--sb3 PYTHON] [--plots docs/images] [--keep DIR] [--table zoo.md]
        [--set KEY=VALUE ...]

``--keep DIR`` keeps seed 0's TensorBoard events (``DIR/ours-<trainer>-<scene>``,
``DIR/mlagents-learn-<trainer>-<scene>``); where matplotlib is missing, the script prints the
``bench/plot_runs.py`` line that draws them later.

``--sb3 PYTHON`` (an interpreter with stable-baselines3 and torch) also runs SB3's PPO on the single-agent
scenes (``bench/zoo_sb3.py``): through ``UnityToGymWrapper`` on the same build, and on the scene stepped
in its own process, with the same seeds; a second table sets our time to the target beside both.

``--set KEY=VALUE`` (repeatable) changes a setting of every chosen scene's block for both trainers, an
ablation of the scene's settings: ``--set threaded=false`` runs both without ``threaded``; a dotted
``KEY`` reaches into a section (``--set hyperparameters.num_epoch=6``), and ``VALUE`` is read as YAML.

``--list`` prints the scenes, their settings' source and targets. Targets are those of the issue's
table and ML-Agents' own example results; SoccerTwos learns by self-play (its mean reward stays near
zero by construction), so it has no target and only its agent-steps/s is compared.

The machine should be otherwise idle; note its load (``uptime``) beside the figures.
"""
from __future__ import annotations

import argparse
import copy
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import mlagents_configs  # noqa: E402
import vs_mlagents  # noqa: E402
import zoo_sb3  # noqa: E402
from plot_runs import draw, event_folder  # noqa: E402


def _ppo(batch: int, buffer: int, beta: float, lambd: float, schedule: str, normalize: bool, hidden: int,
         layers: int, gamma: float, horizon: int, memory: Optional[Dict] = None, threaded: bool = False,
         **extra) -> Dict:
    """A Release 22 PPO behaviour block from its values (epsilon 0.2, 3 epochs, learning rate 3e-4 in every example)."""
    network = {"normalize": normalize, "hidden_units": hidden, "num_layers": layers, "vis_encode_type": "simple"}
    if memory:
        network["memory"] = memory
    block = {"trainer_type": "ppo",
             "hyperparameters": {"batch_size": batch, "buffer_size": buffer, "learning_rate": 3.0e-4, "beta": beta,
                                 "epsilon": 0.2, "lambd": lambd, "num_epoch": 3, "learning_rate_schedule": schedule},
             "network_settings": network,
             "reward_signals": {"extrinsic": {"gamma": gamma, "strength": 1.0}},
             "keep_checkpoints": 5, "time_horizon": horizon, "threaded": threaded}
    block.update(extra)
    return block


def _sac(batch: int, buffer: int, entcoef: float, normalize: bool, hidden: int, horizon: int,
         memory: Optional[Dict] = None) -> Dict:
    """A Release 22 SAC behaviour block from its values (the examples share the rest)."""
    network = {"normalize": normalize, "hidden_units": hidden, "num_layers": 2, "vis_encode_type": "simple"}
    if memory:
        network["memory"] = memory
    return {"trainer_type": "sac",
            "hyperparameters": {"learning_rate": 3.0e-4, "learning_rate_schedule": "constant", "batch_size": batch,
                                "buffer_size": buffer, "buffer_init_steps": 0, "tau": 0.005, "steps_per_update": 10.0,
                                "save_replay_buffer": False, "init_entcoef": entcoef,
                                "reward_signal_steps_per_update": 10.0},
            "network_settings": network,
            "reward_signals": {"extrinsic": {"gamma": 0.99, "strength": 1.0}},
            "keep_checkpoints": 5, "time_horizon": horizon, "threaded": True}


def _from_text(text: str, behavior: str) -> Dict:
    return yaml.safe_load(text)["behaviors"][behavior]


MEMORY = {"sequence_length": 64, "memory_size": 128}

#: "<trainer>/<scene>": (built-in scene, behaviour name over gRPC, target mean reward or None, Release 22's block).
#: The values are those of ML-Agents Release 22's ``config/<trainer>/<scene>.yaml``.
ZOO: Dict[str, tuple] = {
    "ppo/3DBall": ("3DBall", "3DBall", 90.0, _from_text(mlagents_configs.PPO_3DBALL, "3DBall")),
    "ppo/3DBallHard": ("3DBallHard", "3DBallHard", 90.0,
                       _ppo(120, 12000, 1e-3, 0.95, "constant", True, 128, 2, 0.99, 1000, threaded=True)),
    "ppo/Basic": ("Basic", "Basic", 0.9, _from_text(mlagents_configs.PPO_BASIC, "Basic")),
    "ppo/GridWorld": ("GridWorld", "GridWorld", 0.8,
                      _ppo(32, 256, 5e-3, 0.95, "linear", False, 128, 1, 0.9, 5)),
    "ppo/Hallway": ("Hallway", "Hallway", 0.7,
                    _ppo(128, 1024, 1e-2, 0.95, "linear", False, 128, 2, 0.99, 64, memory=MEMORY, threaded=True)),
    "ppo/PushBlock": ("PushBlock", "PushBlock", 4.5,
                      _ppo(128, 2048, 1e-2, 0.95, "linear", False, 256, 2, 0.99, 64, threaded=True)),
    "ppo/Pyramids": ("Pyramids", "Pyramids", 1.75,
                     _ppo(128, 2048, 1e-2, 0.95, "linear", False, 512, 2, 0.99, 128, threaded=True)),
    "poca/SoccerTwos": ("SoccerTwos", "SoccerTwos", None,
                        _ppo(2048, 20480, 5e-3, 0.95, "constant", False, 512, 2, 0.99, 1000,
                             self_play={"save_steps": 50000, "team_change": 200000, "swap_steps": 2000, "window": 10,
                                        "play_against_latest_model_ratio": 0.5, "initial_elo": 1200.0})),
    "sac/3DBall": ("3DBall", "3DBall", 90.0, _sac(64, 200000, 0.5, True, 64, 1000)),
    "sac/Basic": ("Basic", "Basic", 0.9, _sac(64, 50000, 0.01, False, 20, 10)),
    "sac/Hallway": ("Hallway", "Hallway", 0.7, _sac(512, 200000, 0.1, False, 128, 64, memory=MEMORY)),
}
ZOO["poca/SoccerTwos"][3]["trainer_type"] = "poca"
# Pyramids' curiosity signal, as Release 22's file gives it.
ZOO["ppo/Pyramids"][3]["reward_signals"]["curiosity"] = {"gamma": 0.99, "strength": 0.02, "encoding_size": 256,
                                                        "learning_rate": 3.0e-4}


def summary_pattern(behavior: str) -> re.Pattern:
    """A summary line of either trainer: ours ``<Behavior>[?team=N]: Step: N. ... Mean Reward: R`` or
    Release 22's ``<Behavior>. Step: N. Time Elapsed: T s. Mean Reward: R``."""
    return re.compile(rf"{re.escape(behavior)}\S*?[.:] Step: (\d+)\..*?Mean Reward: (-?\d+(?:\.\d+)?)")


def with_settings(block: Dict, assignments: Sequence[str]) -> Dict:
    """``block`` with each ``KEY=VALUE`` of ``assignments`` set: ``KEY`` a dotted path into it
    (``hyperparameters.batch_size``), ``VALUE`` read as YAML (``false``, ``256``, ``linear``)."""
    block = copy.deepcopy(block)
    for assignment in assignments:
        path, sep, text = assignment.partition("=")
        if not sep or not path:
            raise SystemExit(f"--set {assignment!r}: expected KEY=VALUE, e.g. threaded=false or "
                             "hyperparameters.batch_size=256")
        *parents, leaf = path.split(".")
        node = block
        for i, name in enumerate(parents):
            node = node.get(name) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                raise SystemExit(f"--set {assignment!r}: the settings have no section {'.'.join(parents[:i + 1])!r}; "
                                 f"its sections are {sorted(k for k, v in block.items() if isinstance(v, dict))}")
        node[leaf] = yaml.safe_load(text)
    return block


def run_config(key: str, folder: str, summary_freq: int, settings: Sequence[str] = ()) -> str:
    """The scene's Release 22 settings (with ``settings``, ``KEY=VALUE`` each: ``with_settings``) as a
    run config both trainers read; its path."""
    _, behavior, _, block = ZOO[key]
    block = with_settings(block, settings)
    block.update(max_steps=50_000_000, summary_freq=summary_freq)
    path = os.path.join(folder, f"{key.replace('/', '-')}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"behaviors": {behavior: block}}, f, sort_keys=False)
    return path


def ours_cmd(config: str, build: str, run_id: str, scratch: str, seed: int) -> List[str]:
    return [sys.executable, os.path.join(ROOT, "learn_r22.py"), config, f"--env={build}", f"--run-id={run_id}",
            f"--results-dir={scratch}", "--force", "--no-graphics", f"--seed={seed}",
            f"--base-port={vs_mlagents.free_port()}"]


def theirs_cmd(mlagents: str, config: str, build: str, run_id: str, scratch: str, seed: int) -> List[str]:
    return [mlagents, config, f"--env={build}", f"--run-id={run_id}", "--results-dir", scratch, "--force",
            "--no-graphics", "--seed", str(seed), "--base-port", str(vs_mlagents.free_port()), "--torch-device", "cpu"]


def sb3_cmd(python: str, key: str, mode: str, build: str, seed: int, summary_freq: int) -> List[str]:
    return [python, os.path.join(ROOT, "bench", "zoo_sb3.py"), "--scene", key, "--mode", mode, "--build", build,
            "--seed", str(seed), "--summary-freq", str(summary_freq)]


def one_run(cmd: List[str], scratch: str, behavior: str, target: Optional[float], budget: float) -> Dict:
    """``vs_mlagents.timed_run``'s figures, or the reason it gave none (a run without a summary line)."""
    try:
        return vs_mlagents.timed_run(cmd, scratch, summary_pattern(behavior),
                                     float("inf") if target is None else target, timeout=budget)
    except SystemExit as e:  # printed no summary line: report it and go on with the next run
        print(f"# {os.path.basename(cmd[0])} {behavior}: {str(e).splitlines()[0]}", flush=True)
        print("\n".join(str(e).splitlines()[-8:]), flush=True)
        return {}


def _mean(xs: List[Optional[float]]) -> Optional[float]:
    got = [x for x in xs if x is not None]
    return sum(got) / len(got) if got else None


def _fmt(x: Optional[float], digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def table(results: Dict[str, Dict[str, List[Dict]]], with_theirs: bool) -> str:
    """The markdown table: per scene, each trainer's mean agent-steps/s and seconds to the target over its
    seeds (how many reached it), and ours over theirs: the rate, the time and the agent-steps to the target
    (the last apart from speed: how much experience each trainer's learning needs)."""
    head = "| scene (settings) | target | ours agent-steps/s | ours s to target (reached) |"
    rule = "|---|---|---|---|"
    if with_theirs:
        head += " mlagents-learn agent-steps/s | mlagents-learn s to target (reached) | rate ours / theirs | " \
                "time ours / theirs | agent-steps to target ours / theirs |"
        rule += "---|---|---|---|---|"
    lines = [head, rule]
    for key, per in results.items():
        target = ZOO[key][2]
        row = [key, _fmt(target, 2) if target is not None else "- (self-play)"]
        figures = {}
        for who in ("ours", "theirs") if with_theirs else ("ours",):
            runs = [r for r in per.get(who, []) if r]
            rate = _mean([r.get("rate") for r in runs])
            secs = _mean([r.get("seconds") for r in runs])
            steps = _mean([r.get("steps") for r in runs if r.get("seconds") is not None])
            reached = sum(1 for r in runs if r.get("seconds") is not None)
            figures[who] = (rate, secs, steps)
            row += [_fmt(rate), f"{_fmt(secs, 1)} ({reached}/{len(per.get(who, []))})"]
        if with_theirs:
            ours, theirs = figures["ours"], figures["theirs"]
            row += [_fmt(a / b, 2) if a and b else "-" for a, b in zip(ours, theirs)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


SB3_RUNS = ("sb3-wrapper", "sb3-inprocess")


def sb3_table(results: Dict[str, Dict[str, List[Dict]]]) -> str:
    """Our time to the target beside SB3's PPO through ``UnityToGymWrapper`` and in-process, per scene SB3 ran."""
    lines = ["| scene (settings) | target | ours agent-steps/s | ours s to target (reached) | "
             "SB3 via UnityToGymWrapper agent-steps/s | s to target (reached) | "
             "SB3 in-process agent-steps/s | s to target (reached) | "
             "time ours / SB3 wrapper | time ours / SB3 in-process |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, per in results.items():
        if not per.get(SB3_RUNS[0]):
            continue
        row, secs = [key, _fmt(ZOO[key][2], 2)], {}
        for who in ("ours",) + SB3_RUNS:
            runs = [r for r in per.get(who, []) if r]
            secs[who] = _mean([r.get("seconds") for r in runs])
            reached = sum(1 for r in runs if r.get("seconds") is not None)
            row += [_fmt(_mean([r.get("rate") for r in runs])), f"{_fmt(secs[who], 1)} ({reached}/{len(per[who])})"]
        row += [_fmt(secs["ours"] / secs[w], 2) if secs["ours"] and secs[w] else "-" for w in SB3_RUNS]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(key: str, folders: Dict[str, str], out_dir: Optional[str], keep: Optional[str]) -> None:
    """Seed 0's runs of one scene: kept under ``keep`` (``<label>-<trainer>-<scene>``) and drawn into one PNG
    under ``out_dir``; a run without events is named and left out, and without matplotlib one line says
    how to draw the kept runs later."""
    runs = {}
    for label, root in folders.items():
        try:
            found = event_folder(root)
        except SystemExit as e:
            print(f"# plot {key}: {label} left out: {e}")
            continue
        if keep:
            kept = os.path.join(keep, f"{label.split()[0]}-{key.replace('/', '-')}")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(found, kept)
            found = kept
        runs[label] = found
    if not runs or not out_dir:
        return
    out = os.path.join(out_dir, f"zoo-{key.replace('/', '-')}.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"# plot {key}: no matplotlib here (pip install matplotlib); with --keep, draw it later: python "
              f"bench/plot_runs.py --out {out} " + " ".join(f"'{k}={v}'" for k, v in runs.items()))
        return
    draw(runs, out, f"{key}: ML-Agents' Release 22 settings, over gRPC, seed 0")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenes", nargs="+", default=list(ZOO), choices=list(ZOO), metavar="TRAINER/SCENE",
                   help=f"which of the zoo (default all: {' '.join(ZOO)})")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1, the same for both trainers")
    p.add_argument("--budget", type=float, default=600.0, help="wall-clock seconds of each run at most")
    p.add_argument("--summary-freq", type=int, default=2000, help="agent-steps between summaries, both trainers")
    p.add_argument("--mlagents", default=shutil.which("mlagents-learn"),
                   help="Unity's mlagents-learn 1.1.0 (default: the one on PATH)")
    p.add_argument("--ours-only", action="store_true", help="skip Unity's trainer")
    p.add_argument("--sb3", metavar="PYTHON", help="an interpreter with stable-baselines3 and torch: also run SB3's "
                   f"PPO through UnityToGymWrapper and in-process on {', '.join(zoo_sb3.SINGLE_AGENT)}")
    p.add_argument("--plots", metavar="DIR", help="one PNG per scene of seed 0's runs, zoo-<trainer>-<scene>.png")
    p.add_argument("--keep", metavar="DIR", help="keep seed 0's TensorBoard events here, <trainer>-<scene> per run")
    p.add_argument("--table", metavar="FILE", help="also write the markdown table here")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="change a setting of every scene's block, for both trainers (repeatable; a dotted KEY "
                        "reaches into a section: --set threaded=false --set hyperparameters.num_epoch=6)")
    p.add_argument("--list", action="store_true", help="print the zoo and exit")
    args = p.parse_args(argv)
    if args.list:
        for key, (scene, behavior, target, _) in ZOO.items():
            print(f"{key}: built-in {scene}, behaviour {behavior}, target {target if target is not None else '-'}")
        return 0
    mlagents = None if args.ours_only else args.mlagents
    if mlagents and not os.access(mlagents, os.X_OK):
        raise SystemExit(f"--mlagents {mlagents}: not an executable; give Unity's mlagents-learn 1.1.0 "
                         "(bench/vs_mlagents.py says how to install it) or --ours-only.")
    if not mlagents and not args.ours_only:
        print("mlagents-learn not found (no --mlagents, none on PATH): running ours only; "
              "bench/vs_mlagents.py says how to install it.")
    if args.sb3 and not os.access(args.sb3, os.X_OK):
        raise SystemExit(f"--sb3 {args.sb3}: not an executable; give a Python with stable-baselines3 and torch "
                         "(pip install -r bench/requirements.txt)")
    for folder in (args.plots, args.keep):
        if folder:
            os.makedirs(folder, exist_ok=True)
    for key in args.scenes:
        with_settings(ZOO[key][3], args.settings)  # a bad --set is refused before anything runs
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"budget {args.budget:g} s per run; seeds {args.seeds}"
          + (f"; settings changed: {' '.join(args.settings)}" if args.settings else ""), flush=True)
    results: Dict[str, Dict[str, List[Dict]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for key in args.scenes:
            scene, behavior, target, _ = ZOO[key]
            build = vs_mlagents.make_build(scratch, 0.0, scene)
            config = run_config(key, scratch, args.summary_freq, args.settings)
            per = results.setdefault(key, {"ours": [], "theirs": []})
            with_sb3 = bool(args.sb3) and key in zoo_sb3.SINGLE_AGENT
            folders = {}
            for seed in range(args.seeds):
                name = key.replace("/", "-")
                runs = [("ours", f"ours-{name}-{seed}", ours_cmd(config, build, f"ours-{name}-{seed}", scratch, seed))]
                if mlagents:
                    runs.append(("theirs", f"theirs-{name}-{seed}",
                                 theirs_cmd(mlagents, config, build, f"theirs-{name}-{seed}", scratch, seed)))
                if with_sb3:
                    runs += [(who, f"{who}-{name}-{seed}", sb3_cmd(args.sb3, key, who.split("-")[1], build, seed,
                                                                    args.summary_freq)) for who in SB3_RUNS]
                for who, run_id, cmd in runs:
                    started = time.monotonic()
                    r = one_run(cmd, scratch, behavior, target, args.budget)
                    per.setdefault(who, []).append(r)
                    print(f"# {key} seed {seed} {who}: {_fmt(r.get('rate'))} agent-steps/s, to target "
                          f"{_fmt(r.get('seconds'), 1)} s at {_fmt(r.get('steps'))} agent-steps; last summary "
                          f"{_fmt(r.get('last_step'))}: {_fmt(r.get('last_mean'), 3)} "
                          f"({time.monotonic() - started:.0f} s; load {os.getloadavg()[0]:.2f})", flush=True)
                    if seed == 0 and who in ("ours", "theirs"):
                        folders[("ours (learn_r22.py)" if who == "ours" else "mlagents-learn 1.1.0")] = \
                            os.path.join(scratch, run_id)
            if args.plots or args.keep:
                plot(key, folders, args.plots, args.keep)
    text = table(results, bool(mlagents))
    if args.sb3:
        text += "\n\nBeside Stable-Baselines3 (PPO, the scene's settings where they apply):\n\n" + sb3_table(results)
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n\n{text}")
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
