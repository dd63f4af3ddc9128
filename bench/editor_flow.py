"""Training in the Unity Editor, end to end, with ``python -m academy 3DBall --mlagents-port N`` as the Editor.

Run 1 trains to ``max_steps``. Run 2 resumes it, leaves play mode part-way (SIGINT to the scene:
Unity's status-400 goodbye), presses Play again, then leaves for good. Printed: the steps and
checkpoints at each point, the exit statuses, the run's last line, and the seconds each part took.

    python bench/editor_flow.py
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = """behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters: {{batch_size: 64, buffer_size: 1200, num_epoch: 3}}
    network_settings: {{hidden_units: 64, num_layers: 2, normalize: true}}
    max_steps: {max_steps}
    summary_freq: 1200
    checkpoint_interval: 1000000
"""
STEP = re.compile(r"Step: (\d+)\. Mean Reward: (-?\d+(?:\.\d+)?)")
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


class Trainer:
    def __init__(self, folder, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "trainers.learn_r22", *args], cwd=folder, env=ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list = []
        threading.Thread(target=lambda: [self.lines.append(x.rstrip()) for x in self.proc.stdout], daemon=True).start()

    def wait(self, predicate, timeout=300.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((x for x in list(self.lines) if predicate(x)), None)
            if hit is not None:
                return hit
            time.sleep(0.05)
        raise SystemExit("timed out:\n" + "\n".join(self.lines[-30:]))

    def listening(self, count):
        self.wait(lambda _: sum("Listening on port" in x for x in self.lines) >= count)

    def step_past(self, step):
        line = self.wait(lambda x: bool(STEP.search(x)) and int(STEP.search(x).group(1)) > step)
        m = STEP.search(line)
        return int(m.group(1)), float(m.group(2))


def play(port):
    return subprocess.Popen([sys.executable, "-m", "academy", "3DBall", "--mlagents-port", str(port)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def checkpoints(run):
    return sorted(int(re.search(r"model-(\d+)\.cptk", p).group(1)) for p in glob.glob(f"{run}/checkpoints/*.index"))


def main() -> None:
    folder = tempfile.mkdtemp(prefix="editor-flow-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = os.path.join(folder, "results", "ed")
    common = ["--run-id=ed", f"--results-dir={os.path.join(folder, 'results')}", f"--base-port={port}"]
    with open(os.path.join(folder, "a.yaml"), "w") as f:
        f.write(CONFIG.format(max_steps=12000))
    with open(os.path.join(folder, "b.yaml"), "w") as f:
        f.write(CONFIG.format(max_steps=10 ** 7))
    t0 = time.monotonic()
    trainer = Trainer(folder, "a.yaml", *common)
    trainer.listening(1)
    scene = play(port)
    code = trainer.proc.wait()
    scene.wait(30)
    first = checkpoints(run)
    print(f"run 1: exit {code}, checkpoints (env steps) {first}, 3DBall.onnx: "
          f"{os.path.isfile(os.path.join(run, '3DBall.onnx'))}, {time.monotonic() - t0:.0f} s")
    t1 = time.monotonic()
    trainer = Trainer(folder, "b.yaml", *common, "--resume", "--timeout-wait=10", "--restarts-rate-limit-n=-1")
    trainer.listening(1)
    scene = play(port)
    left_at = trainer.step_past(14000)
    scene.send_signal(signal.SIGINT)
    scene_code = scene.wait(30)
    trainer.listening(2)
    saved = checkpoints(run)
    print(f"run 2: left play mode after step {left_at[0]} (mean reward {left_at[1]}), scene exit {scene_code}; "
          f"checkpoints now {saved}")
    back = time.monotonic()
    scene = play(port)
    again = trainer.step_past(left_at[0])
    print(f"run 2: Play again; next summary at step {again[0]} (mean reward {again[1]}), "
          f"{time.monotonic() - back:.1f} s after pressing Play")
    later = trainer.step_past(again[0] + 3000)
    scene.send_signal(signal.SIGINT)
    scene.wait(30)
    code = trainer.proc.wait()
    out = "\n".join(trainer.lines)
    print(f"run 2: left for good after step {later[0]}: exit {code}, checkpoints {checkpoints(run)}, traceback: "
          f"{'Traceback' in out}, {time.monotonic() - t1:.0f} s")
    print(f"last line: {trainer.lines[-1]}")


if __name__ == "__main__":
    main()
