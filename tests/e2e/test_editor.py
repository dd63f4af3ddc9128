"""Training in the Unity Editor, with ``python -m academy 3DBall --mlagents-port N`` pressing Play.

The stand-in for the Editor is the built-in scene over gRPC: started when the trainer says it is
listening (the Play button), and stopped with SIGINT, on which it ends the exchange with Unity's
status-400 call (the Editor leaving play mode). The trainer runs as a command, as a user runs it.
"""
from __future__ import annotations

import glob
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from tests.conftest import ROOT, free_port, write

pytestmark = pytest.mark.slow

CONFIG = """
behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters: {{batch_size: 64, buffer_size: 240, num_epoch: 1}}
    network_settings: {{hidden_units: 16, num_layers: 1}}
    max_steps: {max_steps}
    summary_freq: 480
    checkpoint_interval: 1000000
"""
STEP = re.compile(r"Step: (\d+)\.")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Trainer:
    """``unityagents-learn`` without ``--env``, its output read line by line as it comes."""

    def __init__(self, cwd, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "trainers.learn_r22", *map(str, args)], cwd=cwd,
                                     env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, predicate, what, timeout=60.0, start=0):
        """The first line (from the ``start``-th on) for which ``predicate`` holds; fails after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        seen = start
        while time.monotonic() < deadline:
            for line in self.lines[seen:]:
                seen += 1
                if predicate(line):
                    return line
            if self.proc.poll() is not None and seen >= len(self.lines):
                self._reader.join(5)
                if seen >= len(self.lines):
                    break
            time.sleep(0.05)
        raise AssertionError(f"the trainer never printed {what}:\n{self.output[-4000:]}")

    def listening(self, count: int):
        """Wait until the trainer said it listens for the ``count``-th time."""
        return self.wait_for(lambda _: sum("Listening on port" in x for x in self.lines) >= count,
                             f"its listening line #{count}")

    def step_past(self, step: int, start: int = 0) -> int:
        """The first summary line past ``step`` (from the ``start``-th line on)."""
        line = self.wait_for(lambda x: bool(STEP.search(x)) and int(STEP.search(x).group(1)) > step,
                             f"a step past {step}", start=start)
        return int(STEP.search(line).group(1))

    def finish(self, timeout=60.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code


def press_play(port):
    """The Editor entering play mode: the scene connects to the trainer on ``port``. Its output goes to
    a temporary file, with ``faulthandler`` on, so that a scene that does not leave says where it hangs."""
    output = tempfile.TemporaryFile()
    scene = subprocess.Popen([sys.executable, "-m", "academy", "3DBall", "--mlagents-port", str(port)],
                             env={**_env(), "PYTHONFAULTHANDLER": "1"}, stdout=output, stderr=subprocess.STDOUT)
    scene.output = output
    return scene


def leave_play_mode(scene):
    scene.send_signal(signal.SIGINT)
    try:
        code = scene.wait(20)
    except subprocess.TimeoutExpired:
        scene.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        scene.wait(10)
        scene.output.seek(0)
        pytest.fail("the scene did not leave play mode within 20 s of SIGINT; its output:\n"
                    + scene.output.read().decode(errors="replace")[-6000:])
    assert code == 0


def checkpoint_steps(folder):
    return sorted(int(re.search(r"model-(\d+)\.cptk\.index$", p).group(1))
                  for p in glob.glob(os.path.join(folder, "checkpoints", "model-*.cptk.index")))


def test_train_leave_play_mode_come_back_and_leave_for_good(tmp_path):
    port = free_port()
    results = tmp_path / "results"
    common = ["--run-id=ed", f"--results-dir={results}", f"--base-port={port}"]
    scenes = []
    try:
        # 1. Press Play, train to max_steps: exit 0, a checkpoint and the exports.
        trainer = Trainer(tmp_path, write(tmp_path / "a.yaml", CONFIG.format(max_steps=1500)), *common,
                          "--timeout-wait=30")
        trainer.listening(1)
        scenes.append(press_play(port))
        assert trainer.finish() == 0, trainer.output
        first_end = checkpoint_steps(results / "ed")[-1]
        assert (results / "ed" / "3DBall.onnx").is_file()
        scenes[-1].wait(20)

        # 2. --resume; leave play mode part-way, press Play again, leave again and stay away.
        trainer = Trainer(tmp_path, write(tmp_path / "b.yaml", CONFIG.format(max_steps=10**7)), *common, "--resume",
                          "--timeout-wait=5", "--restarts-rate-limit-n=-1")
        trainer.listening(1)
        scenes.append(press_play(port))
        before_leaving = trainer.step_past(1500)
        leave_play_mode(scenes[-1])
        trainer.listening(2)
        saved_on_leaving = checkpoint_steps(results / "ed")[-1]
        assert saved_on_leaving > first_end
        # Leaving wrote the summary of the steps since the last one; the steps after the return come later.
        back = len(trainer.lines)
        scenes.append(press_play(port))
        after_return = trainer.step_past(before_leaving, start=back)
        leave_play_mode(scenes[-1])
        assert trainer.finish() == 0, trainer.output
    finally:
        for scene in scenes:
            if scene.poll() is None:
                scene.kill()
    out = trainer.output
    assert "Traceback" not in out, out
    assert after_return > before_leaving
    last = out.strip().splitlines()[-1]
    assert "The run is saved" in last and "--resume" in last, last
    assert checkpoint_steps(results / "ed")[-1] > saved_on_leaving > first_end
    assert (results / "ed" / "3DBall.onnx").is_file()


def test_no_editor_within_the_wait_writes_nothing(tmp_path):
    port = free_port()
    trainer = Trainer(tmp_path, write(tmp_path / "a.yaml", CONFIG.format(max_steps=1000)), "--run-id=none",
                      f"--results-dir={tmp_path / 'results'}", f"--base-port={port}", "--timeout-wait=2")
    assert trainer.finish() == 1
    assert f"Listening on port {port}. Start training by pressing the Play button in the Unity Editor." in \
        trainer.output
    assert "Behavior Type" in trainer.output and str(port) in trainer.output
    assert "Traceback" not in trainer.output
    assert not (tmp_path / "results" / "none").exists()


def test_a_second_trainer_on_the_port_is_refused(tmp_path):
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        trainer = Trainer(tmp_path, write(tmp_path / "a.yaml", CONFIG.format(max_steps=1000)), "--run-id=busy",
                          f"--results-dir={tmp_path / 'results'}", f"--base-port={port}", "--timeout-wait=2")
        assert trainer.finish() == 1
    assert "another trainer" in trainer.output and str(port) in trainer.output, trainer.output
    assert "Traceback" not in trainer.output


def test_ctrl_c_while_waiting_for_play_ends_cleanly(tmp_path):
    port = free_port()
    trainer = Trainer(tmp_path, write(tmp_path / "a.yaml", CONFIG.format(max_steps=1000)), "--run-id=stop",
                      f"--results-dir={tmp_path / 'results'}", f"--base-port={port}", "--timeout-wait=60")
    trainer.listening(1)
    trainer.proc.send_signal(signal.SIGINT)
    assert trainer.finish(30) == 130
    assert "Traceback" not in trainer.output
    assert not (tmp_path / "results" / "stop").exists()
