"""A soak: N environments train for a set time while one of them is SIGKILLed every few minutes.

What a long run on real work meets and short tests do not: environments dying at random, over
and over, while the trainer keeps learning. Two runs of the same length, side by side in this
process, on the built-in 3DBall (12 agents per environment, API-2 sockets, real processes):

1. unkilled: the reference;
2. killed: every ``--kill-every`` seconds (with +-30% jitter) one environment, picked at random,
   gets SIGKILL; the ``EnvironmentSet`` restarts it under an unlimited ``RestartPolicy``.

Each run is a process of its own, so that its RSS is its trainer's alone (TensorFlow keeps
what one run allocated for the next); by default the two run at the same time, so that they
share the machine's load alike and the benchmark takes ``--minutes``, not twice as long
(``--sequential`` runs them one after the other instead).

Printed per run: kills, restarts, the steps lost (the agent steps of the trajectories that the
killed environments left unfinished, which the trainers drop), the trainer process's RSS after
the first minute (a third of the run if shorter), at the training loop's end and after the
final save and export (which load the ONNX exporter: tens of MiB once), the mean episode return
over the last third of the run's episodes, and the environment steps done; then the loop's RSS
every ``--rss-every`` seconds, to show whether it is flat after the warm-up.

3DBall's ``max_steps`` is raised (``--max-steps``) so that both runs learn until their deadline.

    python bench/soak.py [--minutes 60] [--envs 8] [--kill-every 180] [--rss-every 60] [--sequential]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, Hashable, List, Tuple

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from runner.agent_processor import brain_info  # noqa: E402
from runner.controller import TrainerController  # noqa: E402
from runner.settings.trainer_config import load_trainer_config  # noqa: E402
from trainers.trainer.registry import load_registry  # noqa: E402
from unityagents import UnityEnvironment  # noqa: E402
from unityagents.vector.environment_set import EnvironmentSet  # noqa: E402
from unityagents.vector.restart import RestartPolicy  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class CountingSet(EnvironmentSet):
    """An ``EnvironmentSet`` that counts episode returns and the agent steps a restart throws away."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.since_done: Dict[Hashable, int] = {}
        self.running: Dict[Hashable, float] = {}
        self.returns: List[float] = []
        self.steps_lost = 0
        self.env_steps = 0

    def _count(self, steps) -> None:
        for name, s in steps.items():
            info = brain_info(self.brains[name], s, self.reports_last_observation)
            for agent, reward, done in zip(info.agents, info.rewards, info.local_done):
                self.since_done[agent] = self.since_done.get(agent, 0) + 1
                self.running[agent] = self.running.get(agent, 0.0) + float(reward)
                if done:
                    self.returns.append(self.running.pop(agent))
                    self.since_done[agent] = 0

    def step(self, *args, **kwargs):
        infos = super().step(*args, **kwargs)
        self.env_steps += 1
        self._count(infos)
        return infos

    def reset_finished(self):
        infos, ended = super().reset_finished()
        for agent in ended:
            self.steps_lost += self.since_done.pop(agent, 0)
            self.running.pop(agent, None)
        return infos, ended


class TimedController(TrainerController):
    """Trains until a deadline instead of ``max_steps``; samples the RSS after the first minute
    and every ``rss_every`` seconds (``rss_series``: (seconds since the start, MiB))."""

    deadline = 0.0
    rss_start = float("nan")
    started = 0.0
    warm_up = 60.0
    rss_every = 60.0
    rss_end = float("nan")

    def _keep_going(self) -> bool:
        now = time.monotonic()
        if self.rss_start != self.rss_start and now - self.started > self.warm_up:
            self.rss_start = rss_mib()
        if not hasattr(self, "rss_series"):
            self.rss_series: List[Tuple[float, float]] = []
        if now - self.started >= len(self.rss_series) * self.rss_every:
            self.rss_series.append((round(now - self.started), round(rss_mib(), 1)))
        if now < self.deadline:
            return True
        self.rss_end = rss_mib()  # the training loop's last; the final save and export come after
        self.rss_series.append((round(now - self.started), round(self.rss_end, 1)))
        return False


def trainer_config_path(workdir: str, max_steps: float) -> str:
    """The repository's trainer configuration with 3DBall's ``max_steps`` raised to ``max_steps``.

    The run ends at its deadline, not at ``max_steps``; with the file's 1.5e5 agent steps the
    trainer would stop learning after a minute and act with a frozen policy for the rest.
    """
    with open(os.path.join(ROOT, "trainer_configurations.yaml"), encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    raw["Ball3DBrain"]["max_steps"] = float(max_steps)
    path = os.path.join(workdir, "trainer_config.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(raw, f)
    return path


def run(minutes: float, n_envs: int, kill_every: float, kill: bool, base_port: int, workdir: str,
        rss_every: float = 60.0, max_steps: float = 1e9) -> Dict:
    policy = RestartPolicy(max_lifetime_restarts=-1, rate_limit_n=-1)
    envs = CountingSet(lambda i: UnityEnvironment("3DBall", base_port=base_port, worker_id=i, seed=i,
                                                  log_dir=os.path.join(workdir, "logs")),
                       n_envs, restart_policy=policy)
    os.makedirs(workdir, exist_ok=True)
    config = load_trainer_config(trainer_config_path(workdir, max_steps), load_registry())
    controller = TimedController(envs, config, env_name="3DBall", run_path="killed" if kill else "unkilled",
                                 model_dir=os.path.join(workdir, "models"),
                                 summary_dir=os.path.join(workdir, "summaries"), save_freq=0)
    kills: List[float] = []
    stop = threading.Event()

    def killer() -> None:
        rng = random.Random(0)
        while not stop.wait(kill_every * rng.uniform(0.7, 1.3)):
            worker = envs._workers[rng.randrange(n_envs)]
            proc = getattr(getattr(worker, "_peer", None), "process", None)  # the scene's process
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills.append(time.monotonic())

    controller.started = time.monotonic()
    controller.deadline = controller.started + 60 * minutes
    controller.warm_up = min(60.0, 20 * minutes)
    controller.rss_every = rss_every
    thread = threading.Thread(target=killer, daemon=True)
    if kill:
        thread.start()
    try:
        controller.start_learning()
    finally:
        stop.set()
    last = envs.returns[len(envs.returns) * 2 // 3:]
    return {"kills": len(kills), "restarts": envs.restarts(), "steps_lost": envs.steps_lost,
            "env_steps": envs.env_steps, "episodes": len(envs.returns),
            "reward_last_third": sum(last) / len(last) if last else float("nan"),
            "rss_start_mib": controller.rss_start, "rss_end_mib": controller.rss_end,
            "rss_after_save_mib": rss_mib(), "rss_series": getattr(controller, "rss_series", [])}


def child(args: argparse.Namespace, kill: bool) -> "subprocess.Popen[str]":
    """One run in a process of its own; it prints its result as the JSON line ``RESULT {...}``."""
    command = [sys.executable, os.path.abspath(__file__), "--only", "killed" if kill else "unkilled",
               "--minutes", str(args.minutes), "--envs", str(args.envs), "--kill-every", str(args.kill_every),
               "--base-port", str(args.base_port), "--workdir", args.workdir, "--rss-every", str(args.rss_every),
               "--max-steps", str(args.max_steps)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def result_of(name: str, proc: "subprocess.Popen[str]") -> Dict:
    out, _ = proc.communicate()
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"The {name} run ended with exit code {proc.returncode} and no result; its output "
                         f"ends:\n{out[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="length of each of the two runs")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--kill-every", type=float, default=180.0, help="seconds between kills (+-30%%)")
    parser.add_argument("--base-port", type=int, default=6200)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "soak"))
    parser.add_argument("--rss-every", type=float, default=60.0, help="seconds between RSS samples")
    parser.add_argument("--max-steps", type=float, default=1e9,
                        help="3DBall's max_steps (agent steps): high, so that the trainer learns until the deadline "
                             "(the learning rate decays linearly to 0 at max_steps)")
    parser.add_argument("--sequential", action="store_true",
                        help="run the unkilled run, then the killed one (default: both at once)")
    parser.add_argument("--only", choices=("killed", "unkilled"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.only:
        kill = args.only == "killed"
        result = run(args.minutes, args.envs, args.kill_every, kill, args.base_port + (100 if kill else 0),
                     os.path.join(args.workdir, args.only), args.rss_every, args.max_steps)
        print("RESULT " + json.dumps(result), flush=True)
        return
    started = time.strftime("%H:%M:%S")
    results = {}
    if args.sequential:
        for kill in (False, True):
            name = "killed" if kill else "unkilled"
            results[name] = result_of(name, child(args, kill))
    else:
        procs = {"unkilled": child(args, False), "killed": child(args, True)}
        results = {name: result_of(name, proc) for name, proc in procs.items()}
    print(f"\nsoak: {args.envs} environments x {args.minutes:g} min, a kill every ~{args.kill_every:g} s, "
          f"{'one run after the other' if args.sequential else 'both runs at once'}, "
          f"from {started} to {time.strftime('%H:%M:%S')}")
    print(f"{'':10} {'kills':>6} {'restarts':>8} {'steps lost':>10} {'env steps':>9} {'episodes':>8} "
          f"{'reward (last third)':>19} {'RSS start':>9} {'RSS end':>8} {'after save':>10}")
    for name, r in results.items():
        print(f"{name:10} {r['kills']:>6} {r['restarts']:>8} {r['steps_lost']:>10} {r['env_steps']:>9} "
              f"{r['episodes']:>8} {r['reward_last_third']:>19.2f} {r['rss_start_mib']:>8.0f}M "
              f"{r['rss_end_mib']:>7.0f}M {r['rss_after_save_mib']:>9.0f}M")
    print(f"\nRSS (MiB) of the training loop every {args.rss_every:g} s, and at its end:")
    for name, r in results.items():
        print(f"{name:10} " + " ".join(f"{mib:.0f}" for _, mib in r["rss_series"]))


if __name__ == "__main__":
    main()
