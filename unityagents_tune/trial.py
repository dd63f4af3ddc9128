"""One trial: an ordinary ``unityagents-learn`` run in a subprocess, watched through its TensorBoard events.

The trial writes ``<trials>/<name>.yaml`` (the run config with its values), runs
``python -m trainers.learn_r22 <that file> --results-dir <trials> --run-id <name> --base-port <p>``,
and reports the objective each time the run writes a summary of the objective's tag. Its ports
are its own: trial *i* uses the block ``base_port + i * PORT_SLOTS * num_envs``, and each start of
it (a resume, a PBT exploit) the next slot of that block, so no two runs ever share a port.

``TrialRun`` knows nothing of Ray; ``SweepTrainable`` is the Ray Tune ``Trainable`` around it:
``step`` waits for the next summary, ``save_checkpoint`` copies the run's newest checkpoints,
``load_checkpoint`` puts another member's checkpoints in place and the next ``step`` resumes the
run from them with ``--resume`` (population-based training's exploit).
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import yaml

#: Ports slots per trial: consecutive starts of one trial use different ports, so a port the
#: previous start's environment still holds never blocks the next one.
PORT_SLOTS = 4
#: Seconds between two looks at a running trial's events.
POLL_S = 0.5
#: Seconds a stopped run gets to save its checkpoint and exports before it is killed.
STOP_GRACE_S = 60.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class TrialContext:
    """What every trial of one sweep shares (given to the ``Trainable`` with ``tune.with_parameters``)."""

    trials_dir: str
    raw_config: Dict[str, Any]
    max_steps: Optional[int]
    tag: str
    last: int
    base_port: int
    num_envs: int
    learn_args: List[str] = field(default_factory=list)


def trial_index(name: str) -> int:
    """The index in ``trial_007`` (the sweep's names, ``cli.TrialNamer``)."""
    return int(str(name).rsplit("_", 1)[-1])


def trial_name(index: int) -> str:
    return f"trial_{index:03d}"


class EventReader:
    """The scalars of one tag in every TensorBoard events file under a folder, read as they are written.

    The files are TFRecord: ``<uint64 length><uint32 crc><Event bytes><uint32 crc>``; a record not yet
    whole is read again at the next call.
    """

    def __init__(self, folder: str, tag: str):
        self.folder, self.tag = folder, tag
        self.offsets: Dict[str, int] = {}

    def files(self) -> List[str]:
        return sorted(glob.glob(os.path.join(self.folder, "**", "events.out.tfevents.*"), recursive=True))

    def skip_existing(self) -> None:
        """Ignore what is written so far (after a member took another's checkpoint)."""
        for path in self.files():
            self.offsets[path] = os.path.getsize(path)

    def read(self) -> List[Tuple[int, float]]:
        """``(step, value)`` of the tag written since the last call, oldest first."""
        from tensorboard.compat.proto import event_pb2

        found: List[Tuple[float, int, float]] = []
        for path in self.files():
            offset = self.offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(offset)
                while True:
                    header = f.read(12)
                    if len(header) < 12:
                        break
                    length = struct.unpack("<Q", header[:8])[0]
                    body = f.read(length + 4)
                    if len(body) < length + 4:
                        break
                    offset += 12 + length + 4
                    event = event_pb2.Event.FromString(body[:length])
                    for value in event.summary.value:
                        if value.tag == self.tag and value.HasField("simple_value"):
                            found.append((event.wall_time, int(event.step), float(value.simple_value)))
            self.offsets[path] = offset
        return [(step, value) for _, step, value in sorted(found)]


def has_checkpoint(folder: str) -> bool:
    return bool(glob.glob(os.path.join(folder, "checkpoints", "model-*.cptk.index")))


class TrialRun:
    """One trial's ``unityagents-learn`` process, its config file, its log and its objective so far."""

    def __init__(self, context: TrialContext, index: int, values: Dict[str, Any]):
        from unityagents_tune.sweep import apply

        self.context, self.index = context, index
        self.name = trial_name(index)
        self.folder = os.path.join(context.trials_dir, self.name)
        self.values = dict(values)
        self.config = apply(context.raw_config, values, context.max_steps)
        self.reader = EventReader(self.folder, context.tag)
        self.history: List[Tuple[int, float]] = []
        self.process: Optional[subprocess.Popen] = None
        self.resume = has_checkpoint(self.folder)
        #: The Ray node the trial runs on (set by the ``Trainable``), kept in its history.
        self.node = ""

    @property
    def config_path(self) -> str:
        return os.path.join(self.context.trials_dir, self.name + ".yaml")

    @property
    def log_path(self) -> str:
        return os.path.join(self.context.trials_dir, self.name + ".log")

    def _next_start(self) -> int:
        """How many times this trial started before (kept beside its folder, across actors and restores)."""
        path = os.path.join(self.context.trials_dir, self.name + ".starts")
        try:
            with open(path, encoding="utf-8") as f:
                count = int(f.read().strip() or 0)
        except (OSError, ValueError):
            count = 0
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(count + 1))
        return count

    def port(self, start: int) -> int:
        n = max(self.context.num_envs, 1)
        return self.context.base_port + (self.index * PORT_SLOTS + start % PORT_SLOTS) * n

    def command(self, port: int) -> List[str]:
        return [sys.executable, "-m", "unityagents_tune.guard", str(os.getpid()), self.config_path,
                f"--results-dir={self.context.trials_dir}", f"--run-id={self.name}", f"--base-port={port}",
                f"--num-envs={self.context.num_envs}", "--resume" if self.resume else "--force",
                *self.context.learn_args]

    def start(self) -> None:
        os.makedirs(self.context.trials_dir, exist_ok=True)
        with open(self.config_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(self.config, f, sort_keys=False)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        port = self.port(self._next_start())
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} {'resume' if self.resume else 'start'} on port {port}: "
                      f"{self.values}\n")
            log.flush()
            self.process = subprocess.Popen(self.command(port), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=self.context.trials_dir, start_new_session=True)
        self.resume = True

    def poll(self) -> List[Tuple[int, float]]:
        new = self.reader.read()
        self.history.extend(new)
        return new

    @property
    def objective(self) -> float:
        values = [v for _, v in self.history[-self.context.last:]]
        return sum(values) / len(values) if values else float("nan")

    @property
    def agent_steps(self) -> int:
        return self.history[-1][0] if self.history else 0

    def final_steps(self) -> int:
        """The agent-steps the run's last save reached (its ``training_status.json``; 0 without one).

        A run killed after saving a checkpoint and before writing that step's summary, once
        resumed, finishes at once from that checkpoint and writes no summary: its summaries then
        stop short of the steps it trained.
        """
        try:
            with open(os.path.join(self.folder, "run_logs", "training_status.json"), encoding="utf-8") as f:
                status = json.load(f)
        except (OSError, ValueError):
            return 0
        steps = [entry.get("final_checkpoint", {}).get("steps", 0) for entry in status.values()
                 if isinstance(entry, dict) and isinstance(entry.get("final_checkpoint"), dict)]
        return int(max(steps, default=0))

    def reached_budget(self) -> bool:
        """Whether the summaries read so far reach the sweep's ``max_steps`` (a resumed run's old ones can)."""
        return self.context.max_steps is not None and self.agent_steps >= self.context.max_steps

    def tail(self, lines: int = 15) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """End the run (it saves and exports on SIGTERM), and its environments with it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    def save_to(self, target: str) -> None:
        """Copy the run's checkpoints and training status into ``target`` (the run keeps going); a
        checkpoint being written now is copied partly and skipped on resume (runner/checkpoints.py)."""
        source = os.path.join(self.folder, "checkpoints")
        os.makedirs(os.path.join(target, "checkpoints"), exist_ok=True)
        for path in glob.glob(os.path.join(source, "*")):
            if os.path.basename(path) == "checkpoint":  # its absolute paths name this trial's folder
                continue
            try:
                shutil.copy2(path, os.path.join(target, "checkpoints"))
            except FileNotFoundError:  # removed by keep_checkpoints meanwhile
                pass
        status = os.path.join(self.folder, "run_logs", "training_status.json")
        if os.path.exists(status):
            shutil.copy2(status, os.path.join(target, "training_status.json"))
        with open(os.path.join(target, "member.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump({"trial": self.name, "agent_steps": self.agent_steps, "values": self.values}, f)

    def load_from(self, source: str) -> None:
        """Replace the run's checkpoints with ``source``'s; the next ``start`` resumes from them.

        A copy of this trial's own checkpoints (Ray Tune pauses and resumes members to share the
        CPUs) is not put back: the run saved a newer checkpoint when it stopped, and resumes from that.
        """
        self.stop()
        try:
            with open(os.path.join(source, "member.yaml"), encoding="utf-8") as f:
                member = yaml.safe_load(f) or {}
        except OSError:
            member = {}
        source_name = str(member.get("trial", ""))
        self.resume = True
        if source_name == self.name and has_checkpoint(self.folder):
            self.poll()
            self.record("restore", source=source_name)
            return
        target = os.path.join(self.folder, "checkpoints")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(os.path.join(source, "checkpoints"), target)
        status = os.path.join(source, "training_status.json")
        if os.path.exists(status):
            os.makedirs(os.path.join(self.folder, "run_logs"), exist_ok=True)
            shutil.copy2(status, os.path.join(self.folder, "run_logs", "training_status.json"))
        self.reader.skip_existing()
        self.history = []
        self.record("exploit", steps=int(member.get("agent_steps", 0)), source=source_name)

    def record(self, event: str, steps: Optional[int] = None, source: str = "") -> None:
        """Append to the trial's history (outputs.members.csv and trials.csv are built from it)."""
        from unityagents_tune.outputs import record

        last = self.history[-1][1] if self.history else float("nan")
        record(self.context.trials_dir, self.name, event, self.agent_steps if steps is None else steps,
               self.objective, last, self.values, source, self.node)


def _trainable_class():
    from ray import tune

    class SweepTrainable(tune.Trainable):
        """A trial for Ray Tune: one result per summary of the objective's tag."""

        def setup(self, config: Dict[str, Any], context: TrialContext = None):
            import ray

            self.run = TrialRun(context, trial_index(self.trial_name), config)
            self.run.node = ray.get_runtime_context().get_node_id()[:8]

        def step(self) -> Dict[str, Any]:
            run = self.run
            if run.process is None:
                run.start()
            while True:
                new = run.poll()
                finished = run.process.poll()
                if finished is not None:
                    new += run.poll()
                    if finished != 0:
                        run.record("failed")
                        raise RuntimeError(f"{run.name}: unityagents-learn exited with status {finished}; the end of "
                                           f"its log ({run.log_path}):\n{run.tail()}")
                    if not run.history:
                        raise RuntimeError(f"{run.name}: the run ended without writing {run.context.tag!r}; its "
                                           f"log: {run.log_path}")
                if new and finished is None and run.reached_budget():
                    # The run ends by itself at the budget, after its last save and export; reporting the
                    # budget now would have the scheduler stop the process before it has written them.
                    time.sleep(POLL_S)
                    continue
                if new or finished is not None:
                    steps = run.agent_steps if finished is None else max(run.agent_steps, run.final_steps())
                    run.record("done" if finished is not None else "summary", steps=steps)
                    return {"objective": run.objective, "agent_steps": steps, "last_value":
                            run.history[-1][1], "trial_name": run.name, "done": finished is not None}
                time.sleep(POLL_S)

        def save_checkpoint(self, checkpoint_dir: str):
            self.run.save_to(checkpoint_dir)
            return None

        def load_checkpoint(self, checkpoint):
            folder = checkpoint if isinstance(checkpoint, str) else getattr(checkpoint, "path", None)
            self.run.load_from(folder)

        def cleanup(self):
            self.run.stop()

    return SweepTrainable
