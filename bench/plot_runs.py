"""Reward against agent-steps and against wall time, for runs side by side, drawn from their TensorBoard events.

Each ``LABEL=FOLDER`` is a folder holding a run's event files (``summaries/<run-path>`` of ``learn.py``,
``results/<run-id>/<Behavior>`` of ``unityagents-learn`` or of Unity's ``mlagents-learn``, an SB3
``tensorboard_log`` run): every trainer writes its episode reward under one of ``TAGS``. Wall time is counted
from the run's first event, so start-up before the first summary is not in it.

    pip install matplotlib
    python bench/plot_runs.py --out docs/images/3dball-runs.png \\
        learn.py=summaries/ppo unityagents-learn=results/first/Ball3DBrain [mlagents-learn=...] [SB3=...]
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Dict, List, Tuple

#: The episode-reward tag of each trainer (ours and ML-Agents': the first; SB3's: the second).
TAGS = ("Environment/Cumulative Reward", "rollout/ep_rew_mean")


def curve(folder: str) -> Tuple[List[float], List[float], List[float]]:
    """(steps, seconds since the first event, reward) of the run's episode reward."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not glob.glob(os.path.join(folder, "events.out.tfevents.*")):
        raise SystemExit(f"{folder}: no TensorBoard event files here; give the folder that holds them")
    reader = EventAccumulator(folder, size_guidance={"scalars": 0})
    reader.Reload()
    tag = next((t for t in TAGS if t in reader.Tags()["scalars"]), None)
    if tag is None:
        raise SystemExit(f"{folder}: none of the reward tags {TAGS} (it has {reader.Tags()['scalars']})")
    events = reader.Scalars(tag)
    start = events[0].wall_time
    return [e.step for e in events], [e.wall_time - start for e in events], [e.value for e in events]


def event_folder(root: str) -> str:
    """The folder under ``root`` (itself included) that holds event files: where a run wrote its
    TensorBoard summaries, whatever sub-folders its trainer names."""
    found = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(root, "**", "events.out.tfevents.*"),
                                                          recursive=True)})
    if len(found) != 1:
        raise SystemExit(f"{root}: expected one folder of TensorBoard event files under it, found {found or 'none'}")
    return found[0]


def draw(runs: Dict[str, str], out: str, title: str = "") -> None:
    """Reward against agent-steps (left) and against seconds after the first summary (right), one line
    for each ``label: folder`` of ``runs``, written to the PNG ``out``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise SystemExit("drawing needs matplotlib: pip install matplotlib") from None
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    for label, folder in runs.items():
        steps, seconds, reward = curve(folder)
        by_steps.plot(steps, reward, label=label)
        by_time.plot(seconds, reward, label=label)
        print(f"{label}: {len(steps)} summaries, last reward {reward[-1]:.2f} at {steps[-1]:,} agent-steps, "
              f"{seconds[-1]:.1f} s after the first summary")
    by_steps.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
    by_steps.set_xlabel("agent-steps")
    by_time.set_xlabel("seconds after the first summary")
    by_steps.set_ylabel("mean episode reward")
    by_steps.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    print(f"wrote {out} ({os.path.getsize(out):,} bytes)")


def main(argv: List[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="LABEL=FOLDER")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--title", default="")
    args = p.parse_args(argv)
    runs: Dict[str, str] = {}
    for run in args.runs:
        label, sep, folder = run.partition("=")
        if not sep:
            raise SystemExit(f"{run!r}: expected LABEL=FOLDER")
        runs[label] = folder
    draw(runs, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
