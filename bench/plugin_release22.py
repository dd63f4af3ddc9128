"""The example plugin trained from its Release 22 files, with the seed's command.

``unityagents-learn <plugin>/a2c/a2c_3DBall.yaml --env=3DBall`` and ``.../dqn/dqn_basic.yaml
--env=Basic``, each in its own process, with the plugin found through its entry points (a
``*.dist-info`` on ``PYTHONPATH``, as ``pip install -e examples/trainer-plugin`` leaves).
``--a2c-file``/``--dqn-file`` run another Release 22 file instead, such as the seed plugin's own
``a2c_3DBall.yaml`` and ``dqn_basic.yaml`` (ML-Agents' ``ml-agents-trainer-plugin``). The files
are used as they are, except that each behaviour is also listed under the name the built-in scene
reports (``Ball3DBrain``/``BasicBrain`` in scenes that predate Unity's names) and ``max_steps``
may be lowered with ``--a2c-steps``/``--dqn-steps``.

Printed per run: the best mean reward of a summary, the step it came at, the first step whose
mean reached each target (3DBall 50 and 100, the episode cap; Basic 0.9 and 0.93), the run's
seconds, and the curve: the mean of the last summary at or before every ``--curve`` steps.

    python bench/plugin_release22.py [--a2c-steps 120000] [--dqn-steps 10000]
    python bench/plugin_release22.py --a2c-file a2c_3DBall.yaml --dqn-file dqn_basic.yaml --dqn-steps 50000
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "trainer-plugin")
PACKAGE = os.path.join(EXAMPLE, "unityagents_trainer_plugin")
RUNS = [("a2c", os.path.join(PACKAGE, "a2c", "a2c_3DBall.yaml"), "3DBall", ("Ball3DBrain",), (50.0, 100.0)),
        ("dqn", os.path.join(PACKAGE, "dqn", "dqn_basic.yaml"), "Basic", ("BasicBrain",), (0.9, 0.93))]
LINE = re.compile(r"Step: (\d+)\. .*?Mean Reward: (-?\d+(?:\.\d+)?)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a2c-steps", type=int, default=None)
    parser.add_argument("--dqn-steps", type=int, default=None)
    parser.add_argument("--a2c-file", default=None, help="a Release 22 file for the a2c run (default: the example's)")
    parser.add_argument("--dqn-file", default=None, help="a Release 22 file for the dqn run (default: the example's)")
    parser.add_argument("--curve", type=int, default=None, help="print the mean every this many steps")
    parser.add_argument("--only", choices=("a2c", "dqn"), default=None, help="run one of the two")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plugin-r22-") as work:
        dist = os.path.join(work, "site", "unityagents_trainer_plugin-0.1.0.dist-info")
        os.makedirs(dist)
        with open(os.path.join(dist, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: unityagents_trainer_plugin\nVersion: 0.1.0\n")
        with open(os.path.join(dist, "entry_points.txt"), "w") as f:
            f.write("[unityagents.trainers]\na2c = unityagents_trainer_plugin.a2c:A2CTrainer\n"
                    "dqn = unityagents_trainer_plugin.dqn:DQNTrainer\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(work, "site"), EXAMPLE, ROOT]))
        for trainer, path, scene, aliases, targets in RUNS:
            if args.only and trainer != args.only:
                continue
            path = os.path.abspath(getattr(args, f"{trainer}_file") or path)
            with open(path) as f:
                raw = yaml.safe_load(f)
            (behavior, settings), = raw["behaviors"].items()
            steps = args.a2c_steps if trainer == "a2c" else args.dqn_steps
            if steps:
                settings["max_steps"] = steps
            for alias in aliases:
                raw["behaviors"][alias] = settings
            config = os.path.join(work, os.path.basename(path))
            with open(config, "w") as f:
                yaml.safe_dump(raw, f)
            started = time.time()
            proc = subprocess.run([sys.executable, "-m", "trainers.learn_r22", config, f"--env={scene}",
                                   f"--run-id={trainer}", f"--base-port={free_port()}"],
                                  cwd=work, env=env, capture_output=True, text=True)
            seconds = time.time() - started
            out = proc.stdout + proc.stderr
            points = [(int(s), float(r)) for s, r in LINE.findall(out)]
            if proc.returncode != 0 or not points:
                print(f"{trainer} on {scene}: exit {proc.returncode}\n{out[-3000:]}")
                continue
            best_step, best = max(points, key=lambda p: (p[1], -p[0]))
            reached = "; ".join(f"mean >= {t:g} first at step {next((s for s, r in points if r >= t), None)}"
                                for t in targets)
            print(f"{trainer} on {scene} ({os.path.basename(path)}, max_steps {settings['max_steps']}): "
                  f"best mean {best:.3f} at step {best_step}; {reached}; {seconds:.0f} s", flush=True)
            if args.curve:
                marks = range(args.curve, points[-1][0] + 1, args.curve)
                curve = [(m, next((r for s, r in reversed(points) if s <= m), None)) for m in marks]
                if not marks or points[-1][0] != marks[-1]:
                    curve.append(points[-1])
                print("  curve: " + ", ".join(f"{m / 1000:g}k {r:.3g}" for m, r in curve if r is not None), flush=True)


if __name__ == "__main__":
    main()
