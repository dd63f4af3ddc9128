"""Where a run writes its files: one object the trainer controller asks for every path.

Two layouts exist, so that each front end keeps the folder its users look in:

* ``RunPaths.legacy`` (``learn.py``): ``models/<run-path>/`` holds the checkpoints, the exports
  and ``timers.json``; TensorBoard events go to ``summaries/<run-path>[_<scope>]/``.
* ``RunPaths.results`` (``unityagents-learn``): ML-Agents Release 22's ``results/<run-id>/``::

      configuration.yaml              the resolved run config (the front end writes it)
      run_logs/timers.json            the timer tree
      run_logs/training_status.json   checkpoints per behaviour, lesson numbers (``--resume``)
      run_logs/trainer_parameters.yaml  the per-brain hyperparameters the trainers were built with
      <Behavior>/                     TensorBoard events and <Behavior>-<step>.onnx per checkpoint
      <Behavior>.onnx                 the final model; <env>.bytes beside it
      checkpoints/                    the TensorFlow checkpoint of every brain (one graph, one Saver)

  ML-Agents keeps one PyTorch checkpoint per behaviour inside ``<Behavior>/``; this trainer has
  one TensorFlow graph for all brains, so its checkpoint sits in one folder of its own.

``after_save`` is called by the controller after each checkpoint and after the final export; the
results layout writes ``training_status.json`` there.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from trainers.export.onnx_model import onnx_file_stem

STATUS_FORMAT_VERSION = "0.3.0"


@dataclass
class RunPaths:
    """Every path of one run. ``summary_root`` and ``per_behavior`` decide the TensorBoard folders."""

    checkpoint_dir: str
    summary_root: str
    run_path: str = ""
    #: Results layout: each behaviour's folder is ``<summary_root>/<Behavior>`` (events and step ONNX).
    per_behavior: bool = False
    export_dir: str = ""
    timers_path: str = ""
    parameters_path: str = ""
    status_path: Optional[str] = None
    #: Lesson numbers per environment parameter, for ``training_status.json`` (set by the front end).
    lessons: Optional[Callable[[], Dict[str, int]]] = None

    @classmethod
    def legacy(cls, model_dir: str, summary_dir: str, run_path: str) -> "RunPaths":
        model_path = os.path.join(model_dir, run_path)
        return cls(checkpoint_dir=model_path, summary_root=summary_dir, run_path=run_path, export_dir=model_path,
                   timers_path=os.path.join(model_path, "timers.json"),
                   parameters_path=os.path.join(model_path, "configuration.yaml"))

    @classmethod
    def results(cls, results_dir: str, run_id: str) -> "RunPaths":
        run = os.path.join(results_dir, run_id)
        logs = os.path.join(run, "run_logs")
        return cls(checkpoint_dir=os.path.join(run, "checkpoints"), summary_root=run, run_path=run_id,
                   per_behavior=True, export_dir=run, timers_path=os.path.join(logs, "timers.json"),
                   parameters_path=os.path.join(logs, "trainer_parameters.yaml"),
                   status_path=os.path.join(logs, "training_status.json"))

    def summary_dir(self, brain_name: str, scope: str) -> str:
        """The TensorBoard folder of one brain."""
        if self.per_behavior:
            return os.path.join(self.summary_root, onnx_file_stem(brain_name))
        return os.path.join(self.summary_root, self.run_path + (f"_{scope}" if scope else ""))

    def step_onnx_dir(self, brain_name: str) -> str:
        """Where ``<Brain>-<step>.onnx`` of each checkpoint goes."""
        return self.summary_dir(brain_name, "") if self.per_behavior else self.checkpoint_dir

    def after_save(self, step_of: Dict[str, int], onnx_files: List[str], prefix: Optional[str],
                   final: bool, mean_rewards: Dict[str, Optional[float]],
                   elos: Optional[Dict[str, float]] = None) -> None:
        """Record a checkpoint (or the final export) in ``training_status.json``; legacy: nothing.

        :param elos: the self-play learner's ELO per brain, kept as ``<Behavior>.elo`` (one float per
            behaviour, whichever team learns), as Release 22 writes it before the checkpoint.
        """
        if self.status_path is None:
            return
        from trainers.export.frozen_graph import write_atomically

        now = time.time()
        status: Dict[str, Any] = self.read_status() or {}
        for brain, elo in (elos or {}).items():
            status.setdefault(onnx_file_stem(brain), {})["elo"] = float(elo)
        for path in onnx_files:
            stem = os.path.basename(path)[: -len(".onnx")]
            brain = next((b for b in step_of if stem == onnx_file_stem(b) or stem.startswith(onnx_file_stem(b) + "-")),
                         None)
            if brain is None:
                continue
            entry = {"steps": int(step_of[brain]), "file_path": path, "reward": mean_rewards.get(brain),
                     "creation_time": now, "auxillary_file_paths": [prefix] if prefix else []}
            record = status.setdefault(onnx_file_stem(brain), {})
            record.setdefault("checkpoints", [])
            if final:
                record["final_checkpoint"] = entry
            else:
                kept = [c for c in record.get("checkpoints", []) if c["file_path"] != path]
                record["checkpoints"] = kept + [entry]
                record["checkpoints"] = [c for c in record["checkpoints"] if os.path.exists(c["file_path"])]
        for name, lesson in (self.lessons() if self.lessons else {}).items():
            status[name] = {"lesson_num": int(lesson)}
        status["metadata"] = {"stats_format_version": STATUS_FORMAT_VERSION, "trainer": "unityagents",
                              "tensorflow_version": _tf_version()}
        os.makedirs(os.path.dirname(self.status_path), exist_ok=True)
        write_atomically(self.status_path, json.dumps(status, indent=4).encode("utf-8"))

    def read_status(self) -> Optional[Dict[str, Any]]:
        """``training_status.json`` as written, or None when there is none."""
        if self.status_path is None or not os.path.isfile(self.status_path):
            return None
        with open(self.status_path, encoding="utf-8") as f:
            return json.load(f)


def _tf_version() -> str:
    from trainers.tf_utils import tf

    return str(getattr(tf, "__version__", "unknown"))
