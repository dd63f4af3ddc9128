"""What a sweep leaves under ``<results-dir>/<run-id>/``, written from the trials' own files.

* ``trials.csv``: one row per trial: name, status, objective, agent-steps, the Ray node(s) it ran on,
  then each searched key;
* ``best.yaml``: the best trial's whole run config, which ``unityagents-learn`` runs as it is;
* ``<Behavior>.onnx``: the best trial's final exports;
* ``members.csv``: every trial's settings at every summary, and each PBT exploit (the member it
  copied), so a member's settings over time read top to bottom;
* ``hparams/``: the same table as TensorBoard hparams (one session per trial);
* ``trials/<trial>/``: each trial's own results folder, with ``trials/<trial>.yaml`` and ``.log``.

A trial's history is appended by the trial itself (``record``), so these files hold every trial
of a sweep that was killed and resumed, whatever Ray Tune kept.
"""
from __future__ import annotations

import csv
import glob
import math
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import yaml

HISTORY_COLUMNS = ["trial", "event", "agent_steps", "objective", "last_value", "source", "node"]


def history_path(trials_dir: str, name: str) -> str:
    return os.path.join(trials_dir, name + ".history.csv")


def record(trials_dir: str, name: str, event: str, agent_steps: int, objective: float, last_value: float,
           values: Dict[str, Any], source: str = "", node: str = "") -> None:
    """Append one row to the trial's history (``summary``, ``exploit``, ``done``, ``stopped``, ``failed``)."""
    path = history_path(trials_dir, name)
    new = not os.path.exists(path)
    with open(path, "a", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(HISTORY_COLUMNS + ["values"])
        writer.writerow([name, event, agent_steps, _num(objective), _num(last_value), source, node,
                         yaml.safe_dump(values, default_flow_style=True, width=10 ** 6).strip()])


def _num(x: float) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.6g}"


def read_history(trials_dir: str, name: str) -> List[Dict[str, Any]]:
    path = history_path(trials_dir, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["values"] = yaml.safe_load(row["values"]) or {}
    return rows


@dataclass
class TrialRow:
    name: str
    status: str
    objective: float
    agent_steps: int
    values: Dict[str, Any]
    node: str = ""


def collect(trials_dir: str, keys: List[str], statuses: Dict[str, str], max_steps: int) -> List[TrialRow]:
    """One row per trial that started (from its history) or that Ray Tune reports (``statuses``:
    ``failed`` or ``terminated``); a terminated trial that did not reach ``max_steps`` was stopped early."""
    names = sorted({os.path.basename(p)[: -len(".history.csv")]
                    for p in glob.glob(os.path.join(trials_dir, "trial_*.history.csv"))} | set(statuses))
    rows = []
    for name in names:
        history = read_history(trials_dir, name)
        summaries = [r for r in history if r["objective"] != ""]
        last = summaries[-1] if summaries else None
        values = (history[-1]["values"] if history else {}) or {}
        steps = int(float(last["agent_steps"])) if last else 0
        objective = float(last["objective"]) if last else float("nan")
        events = {r["event"] for r in history}
        said = statuses.get(name, "")
        if said == "failed" or "failed" in events and "done" not in events:
            status = "failed"
        elif "done" in events or steps >= max_steps:
            status = "completed"
        elif said == "terminated":
            status = "stopped early"
        else:
            status = "unfinished"
        nodes = [r["node"] for r in history if r.get("node")]
        rows.append(TrialRow(name, status, objective, steps, {k: values.get(k) for k in keys},
                             ",".join(dict.fromkeys(nodes))))
    return rows


def best(rows: List[TrialRow], mode: str) -> Optional[TrialRow]:
    scored = [r for r in rows if not math.isnan(r.objective) and r.status != "failed"]
    if not scored:
        return None
    return (max if mode == "max" else min)(scored, key=lambda r: (r.objective, r.agent_steps))


def write_trials_csv(path: str, rows: List[TrialRow], keys: List[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["trial", "status", "objective", "agent_steps", "node"] + keys)
        for r in rows:
            writer.writerow([r.name, r.status, _num(r.objective), r.agent_steps, r.node]
                            + [r.values.get(k) for k in keys])


def write_members_csv(path: str, trials_dir: str, names: List[str], keys: List[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HISTORY_COLUMNS + keys)
        for name in names:
            for row in read_history(trials_dir, name):
                writer.writerow([row[c] for c in HISTORY_COLUMNS] + [row["values"].get(k) for k in keys])


def write_best(run_dir: str, trials_dir: str, row: TrialRow) -> List[str]:
    """``best.yaml`` and the best trial's final ONNX files in ``run_dir``; the paths written."""
    with open(os.path.join(trials_dir, row.name + ".yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    best_yaml = os.path.join(run_dir, "best.yaml")
    with open(best_yaml, "w", encoding="utf-8") as f:
        f.write(f"# The best trial of this sweep: {row.name}, objective {_num(row.objective)} after "
                f"{row.agent_steps} agent-steps.\n# unityagents-learn best.yaml --env=<the sweep's env> "
                "--run-id=<a new run>\n")
        yaml.safe_dump(config, f, sort_keys=False)
    written = [best_yaml]
    for onnx in glob.glob(os.path.join(trials_dir, row.name, "*.onnx")):
        target = os.path.join(run_dir, os.path.basename(onnx))
        shutil.copy2(onnx, target)
        written.append(target)
    return written


def table(rows: List[TrialRow], keys: List[str], best_name: Optional[str]) -> str:
    """The console table, best first."""
    short = [k.split(".")[-1] for k in keys]
    header = ["trial", "status", "objective", "agent-steps"] + short
    order = sorted(rows, key=lambda r: (math.isnan(r.objective), -r.objective if not math.isnan(r.objective)
                                        else 0))
    lines = [[("* " if r.name == best_name else "  ") + r.name, r.status, _num(r.objective), str(r.agent_steps)]
             + [_num(v) if isinstance(v, float) else str(v) for v in (r.values.get(k) for k in keys)]
             for r in order]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header)] + [fmt.format(*line) for line in lines])


def write_hparams(folder: str, rows: List[TrialRow], keys: List[str], tag: str) -> None:
    """The trials as TensorBoard hparams sessions (the HParams tab), no TensorFlow needed."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    shutil.rmtree(folder, ignore_errors=True)

    def write(sub: str, summaries, step: int = 0) -> None:
        writer = EventFileWriter(os.path.join(folder, sub))
        for summary in summaries:
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        writer.close()

    def plain(v: Any) -> Any:
        return v if isinstance(v, (bool, int, float, str)) else str(v)

    write(".", [hp.hparams_config_pb([hp.HParam(k) for k in keys], [hp.Metric(tag), hp.Metric("agent_steps")])])
    for r in rows:
        hparams = {k: plain(r.values.get(k)) for k in keys if r.values.get(k) is not None}
        metrics = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=tag, simple_value=r.objective),
            summary_pb2.Summary.Value(tag="agent_steps", simple_value=float(r.agent_steps))])
        write(r.name, [hp.hparams_pb(hparams, trial_id=r.name), metrics], step=r.agent_steps)
