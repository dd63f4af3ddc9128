"""Training speed: time and agent-steps to a mean reward of 90 on 3DBall, and where the time goes.

Two parts, both through the real socket against the built-in scene:

* ``--seeds N`` runs ``learn.py 3DBall --train`` with the shipped configuration for seeds
  0..N-1 and reports, per seed, the agent-steps and wall time when the printed mean reward first
  reaches 90, the lowest mean printed after that (collapse check) and the final one;
* ``--profile`` steps the same loop as ``TrainerController`` for a while on 3DBall, GridWorld
  (an 84x84 camera: PNG encode and decode included) and Hallway (recurrent), timing each phase
  (scene, PNG, wire, inference, buffer/GAE, update), and prints agent-steps/s with and without
  updates;
* ``--pyramids-seeds N`` trains the sparse-reward Pyramids scene with the shipped PyramidsBrain
  block (PPO + RND), the same block with curiosity instead (``PyramidsBrainCuriosity``) and with
  the extrinsic reward only, for seeds 0..N-1, and reports the agent-steps to a mean of 1.5 and
  the last mean of each run;
* ``--cpu-profile`` measures the PPO trainer's own CPU (``time.process_time``, so a loaded machine
  inflates it less than wall time) per agent-step and phase, acting, buffer and update, on a
  stream of 12 agents shaped as 3DBall's (8 floats, 2 continuous actions) with the shipped
  Ball3DBrain settings, in-process and without a scene: the trainer's hot path alone;
  ``--intra-op-threads`` sets the session's intra-op threads (0: TensorFlow's default);
* ``--pyramids-profile`` profiles Pyramids with and without RND, side by side, and says where
  the extra time goes (RND's rewards are computed with the trajectories, "buffer + GAE"; its
  predictor trains inside the PPO update's ``session.run``, "update").

    python bench/train.py --seeds 5 --profile
    python bench/train.py --pyramids-seeds 3 --pyramids-profile
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
from collections import defaultdict
from typing import Dict, List, Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LINE = re.compile(r"(\w+): Step: (\d+)\. Mean Reward: (-?\d+\.\d+)\..* Elapsed: (\d+):(\d+):(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_seed(scene: str, brain: str, seed: int, target: float, extra: List[str]) -> Dict[str, Optional[float]]:
    """One ``learn.py`` run; the summary lines it printed, reduced to the figures we report."""
    with tempfile.TemporaryDirectory() as scratch:
        start = time.time()
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "learn.py"), scene, "--train", "--seed", str(seed),
             "--base-port", str(free_port()), *extra],
            cwd=scratch, capture_output=True, text=True)
        wall = time.time() - start
    if proc.returncode != 0:
        raise SystemExit(f"learn.py failed for seed {seed}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    rows = [(int(m[1]), float(m[2]), int(m[3]) * 3600 + int(m[4]) * 60 + int(m[5]))
            for m in LINE.findall(proc.stdout + proc.stderr) if m[0] == brain]
    first = next((r for r in rows if r[1] >= target), None)
    after = [r[1] for r in rows if first and r[0] >= first[0]]
    return {
        "steps_to_target": first[0] if first else None,
        "seconds_to_target": first[2] if first else None,
        "min_after": min(after) if after else None,
        "final": rows[-1][1] if rows else None,
        "total_steps": rows[-1][0] if rows else None,
        "wall": wall,
    }


def seeds_report(n: int, target: float, config: Optional[str]) -> None:
    print(f"3DBall, {config or 'shipped trainer_configurations.yaml'}, target mean reward {target}")
    print(f"{'seed':>4} {'steps to 90':>12} {'s to 90':>8} {'min after':>10} {'final':>7} {'wall s':>7}")
    reached = 0
    for seed in range(n):
        r = run_seed("3DBall", "Ball3DBrain", seed, target,
                     ["--trainer-config", os.path.abspath(config)] if config else [])
        reached += r["steps_to_target"] is not None and r["min_after"] >= target
        fmt = lambda x, f="{:.0f}": "-" if x is None else f.format(x)  # noqa: E731
        print(f"{seed:>4} {fmt(r['steps_to_target']):>12} {fmt(r['seconds_to_target']):>8} "
              f"{fmt(r['min_after'], '{:.1f}'):>10} {fmt(r['final'], '{:.1f}'):>7} {r['wall']:>7.0f}")
    print(f"seeds that reached {target} and stayed there: {reached}/{n}")


def pyramids_configs(scratch: str) -> Dict[str, str]:
    """Config files for the Pyramids comparison: the shipped RND block, curiosity, extrinsic only."""
    import yaml

    with open(os.path.join(ROOT, "trainer_configurations.yaml"), encoding="utf-8") as f:
        shipped = yaml.safe_load(f)
    variants = {"RND (shipped)": dict(shipped)}
    variants["curiosity"] = dict(shipped, PyramidsBrain="PyramidsBrainCuriosity")
    extrinsic = dict(shipped["PyramidsBrain"])
    extrinsic["reward_signals"] = {"extrinsic": shipped["PyramidsBrain"]["reward_signals"]["extrinsic"]}
    variants["extrinsic only"] = dict(shipped, PyramidsBrain=extrinsic)
    paths = {}
    for i, (name, raw) in enumerate(variants.items()):
        paths[name] = os.path.join(scratch, f"pyramids_{i}.yaml")
        with open(paths[name], "w", encoding="utf-8") as f:
            yaml.safe_dump(raw, f)
    return paths


def pyramids_report(n: int, target: float) -> None:
    """Shipped budget, each variant, seeds 0..n-1: steps to ``target`` and the last mean."""
    print(f"Pyramids (PyramidsBrain, 16 rooms), shipped max_steps, target mean reward {target}")
    print(f"{'variant':<16} {'seed':>4} {'steps to target':>16} {'last mean':>10} {'agent-steps/s':>14} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as scratch:
        for name, path in pyramids_configs(scratch).items():
            finals = []
            for seed in range(n):
                r = run_seed("Pyramids", "PyramidsBrain", seed, target, ["--trainer-config", path])
                finals.append(r["final"])
                reached = "-" if r["steps_to_target"] is None else f"{r['steps_to_target']:.0f}"
                rate = r["total_steps"] / r["wall"] if r["total_steps"] else 0.0
                print(f"{name:<16} {seed:>4} {reached:>16} {r['final']:>10.3f} {rate:>14.0f} {r['wall']:>7.0f}")
            print(f"{name:<16} mean of last means: {np.mean(finals):.3f}")


def pyramids_profile(env_steps: int) -> None:
    """Pyramids profiled with RND (shipped) and without (extrinsic only), and the difference."""
    with_rnd = profile("Pyramids", "PyramidsBrain", env_steps)
    without = profile("Pyramids", "PyramidsBrain", env_steps, overrides={"reward_signals": None},
                      label="extrinsic only")
    print(f"\nPyramids: RND costs {with_rnd['us_per_step'] - without['us_per_step']:.0f} us per environment step "
          f"({without['rate'] / with_rnd['rate']:.2f}x the time); by phase (us/step, with - without):")
    for key, value in with_rnd["phases"].items():
        extra = value - without["phases"].get(key, 0.0)
        print(f"  {key:<36} {extra:+8.0f}")


def profile(scene: str, brain: str, env_steps: int, overrides: Optional[Dict] = None,
            label: str = "") -> Dict:
    """Time each phase of the controller's loop on ``scene`` with the shipped settings of ``brain``.

    :param overrides: hyperparameters that replace the shipped ones (e.g. ``reward_signals``).
    :return: agent-steps/s with updates (``rate``), us per environment step, and per phase.
    """
    from academy import load_scene
    from academy.academy import Academy
    from academy.communicator import encode_png
    from runner.agent_processor import AgentProcessor
    from runner.collector import ExperienceCollector
    from runner.settings.trainer_config import load_trainer_config
    from trainers.tf_utils import tf
    from trainers.trainer.registry import load_registry
    from unityagents import UnityEnvironment

    config = load_trainer_config(os.path.join(ROOT, "trainer_configurations.yaml"), load_registry())
    settings = config.settings_for(brain)
    env = UnityEnvironment(scene, base_port=free_port(), seed=0)
    timers: Dict[str, float] = defaultdict(float)
    decode = env._communicator._decode_png  # wrapped to time the PNG decoding of camera frames

    def timed_decode(*args):
        t = time.perf_counter()
        try:
            return decode(*args)
        finally:
            timers["png decode (client)"] += time.perf_counter() - t

    env._communicator._decode_png = timed_decode
    n_agents = 0
    try:
        graph = tf.Graph()
        with graph.as_default():
            sess = tf.Session(graph=graph)
            params = dict(settings.parameters, graph_scope="", summary_path="", **(overrides or {}))
            trainer = settings.trainer_class(sess, env.brains, brain, params, True)
            for signal in getattr(trainer, "reward_signals", {}).values():
                signal.evaluate = _timed(signal.evaluate, timers, "  of which intrinsic rewards")
            sess.run(tf.global_variables_initializer())
            graph.finalize()
            processor = AgentProcessor(env.brains, env.reports_last_observation)
            collector = ExperienceCollector.for_trainer(trainer)
            info = processor.infos(env.reset_behaviors())
            updates = 0
            for _ in range(env_steps):
                if env.global_done:
                    info = processor.infos(env.reset_behaviors())
                t0 = time.perf_counter()
                action, memory, value, outputs = trainer.take_action(info)
                t1 = time.perf_counter()
                new_info = processor.infos(env.step_behaviors(*processor.decisions(
                    info, {brain: action}, {brain: memory}, {brain: value})))
                t2 = time.perf_counter()
                trainer.process_experience(collector.collect(info, new_info, outputs))
                t3 = time.perf_counter()
                if trainer.is_ready_update():
                    trainer.update_model()
                    updates += 1
                t4 = time.perf_counter()
                n_agents += len(info[brain].agents)
                trainer.increment_step(len(info[brain].agents))
                info = new_info
                for key, dt in (("inference", t1 - t0), ("environment + wire", t2 - t1),
                                ("buffer + GAE", t3 - t2), ("update", t4 - t3)):
                    timers[key] += dt
    finally:
        env.close()
    # The environment process's own work per step, measured in-process: stepping the scene, and
    # for camera brains rendering and PNG-encoding every frame.
    academy = Academy(load_scene(scene)(seed=0), train_mode=True)
    academy.reset()
    runtime = next(b for b in academy.brains if b.name == brain)
    rng = np.random.default_rng(0)
    steps = min(env_steps, 2000)
    scene_time = encode_time = 0.0
    for _ in range(steps):
        width = runtime.spec.action_width
        if runtime.spec.action_space == "discrete":
            act = rng.integers(0, runtime.spec.action_size, (runtime.spec.n_agents, 1))
        else:
            act = rng.uniform(-1, 1, (runtime.spec.n_agents, width))
        t0 = time.perf_counter()
        academy.set_external_actions({"action": {brain: np.asarray(act, dtype=float).ravel().tolist()}})
        academy.decide()
        academy.advance()
        frames = []
        academy.finish_step(lambda b, frames=frames: frames.extend(academy.scene.render(b.name, i)
                                                  for i in range(len(b.spec.cameras))))
        t1 = time.perf_counter()
        for images in frames:
            for image in images:
                encode_png(image)
        encode_time += time.perf_counter() - t1
        scene_time += t1 - t0
    timers["environment + wire"] -= (scene_time + encode_time) / steps * env_steps + timers["png decode (client)"]
    timers["scene step + render (env process)"] = scene_time / steps * env_steps
    timers["png encode (env process)"] = encode_time / steps * env_steps
    total = sum(timers.values())
    nested = timers.pop("  of which intrinsic rewards", 0.0)  # already inside "buffer + GAE"
    print(f"\n{scene} ({brain}{', ' + label if label else ''}) loop profile: {env_steps} environment steps "
          f"({n_agents} agent steps), {updates} updates")
    order = ("scene step + render (env process)", "png encode (env process)", "environment + wire",
             "png decode (client)", "inference", "buffer + GAE", "update")
    phases = {}
    for key in order:
        if key.startswith("png") and timers[key] == 0:
            continue
        name = "wire (socket, JSON, processes)" if key == "environment + wire" else key
        phases[name] = timers[key] / env_steps * 1e6
        print(f"  {name:<36} {phases[name]:8.0f} us/step  {100 * timers[key] / total:5.1f} %")
        if key == "buffer + GAE" and nested:
            phases["  of which intrinsic rewards"] = nested / env_steps * 1e6
            print(f"  {'  of which intrinsic rewards':<36} {nested / env_steps * 1e6:8.0f} us/step")
    print(f"  agent-steps/s with updates    : {n_agents / total:8.0f}")
    print(f"  agent-steps/s without updates : {n_agents / (total - timers['update']):8.0f}")
    return {"rate": n_agents / total, "us_per_step": total / env_steps * 1e6, "phases": phases}


def cpu_profile(env_steps: int, intra_op_threads: int) -> Dict[str, float]:
    """CPU us per agent-step of the PPO trainer's phases on a 3DBall-shaped stream (see the docstring)."""
    from runner.collector import ExperienceCollector
    from runner.settings.trainer_config import load_trainer_config
    from trainers.tf_utils import tf
    from trainers.trainer.brain_info import BrainInfo
    from trainers.trainer.registry import load_registry
    from unityagents.brain import BrainParameters

    n, length = 12, 500  # agents, and steps per episode (staggered by agent)
    brain = BrainParameters("Ball3DBrain", dict(stateSize=8, actionSize=2, actionSpaceType=1, stateSpaceType=1,
                                                memorySize=0))
    settings = load_trainer_config(os.path.join(ROOT, "trainer_configurations.yaml"), load_registry()
                                   ).settings_for("Ball3DBrain")
    config = tf.ConfigProto(intra_op_parallelism_threads=intra_op_threads)
    sess = tf.Session(graph=tf.Graph(), config=config)
    params = dict(settings.parameters, graph_scope="", summary_path="")
    trainer = settings.trainer_class(sess, {"Ball3DBrain": brain}, "Ball3DBrain", params, True)
    with sess.graph.as_default():
        sess.run(tf.global_variables_initializer())
    sess.graph.finalize()
    collector = ExperienceCollector.for_trainer(trainer)
    rng = np.random.default_rng(0)
    t = np.arange(n)

    def info(t):
        done = list((t % length) == length - 1)
        return {"Ball3DBrain": BrainInfo([], rng.normal(size=(n, 8)).astype(np.float32), None,
                                         list(np.where(done, -1.0, 0.1)), list(range(n)), done)}

    timers: Dict[str, float] = defaultdict(float)
    current = info(t)
    clock = time.process_time
    for step in range(env_steps + 300):  # 300 steps of warm-up first
        a = clock()
        _, _, _, outputs = trainer.take_action(current)
        b = clock()
        t = t + 1
        new = info(t)
        c = clock()
        trainer.process_experience(collector.collect(current, new, outputs))
        trainer.increment_step(n)
        d = clock()
        if trainer.is_ready_update():
            trainer.update_model()
        e = clock()
        current = new
        if step >= 300:
            for key, dt in (("acting", b - a), ("buffer + GAE", d - c), ("update", e - d)):
                timers[key] += dt
    us = {key: value / (env_steps * n) * 1e6 for key, value in timers.items()}
    us["trainer"] = sum(us.values())
    print(f"\nPPO trainer CPU on a 3DBall-shaped stream ({n} agents, {env_steps} steps, intra-op threads "
          f"{intra_op_threads or 'default'}), us per agent-step: " + ", ".join(f"{k} {v:.1f}" for k, v in us.items()))
    return us


def _timed(function, timers: Dict[str, float], key: str):
    """``function``, adding its run time to ``timers[key]``."""
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            timers[key] += time.perf_counter() - t
    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=0, help="learn.py runs, one per seed")
    parser.add_argument("--target", type=float, default=90.0)
    parser.add_argument("--trainer-config", help="hyperparameters file (default: the shipped one)")
    parser.add_argument("--profile", nargs="*", metavar="SCENE:BRAIN",
                        help="time the phases of the loop (default: 3DBall, GridWorld and Hallway)")
    parser.add_argument("--profile-steps", type=int, default=3000, help="environment steps to profile")
    parser.add_argument("--pyramids-seeds", type=int, default=0,
                        help="Pyramids: RND vs curiosity vs extrinsic only, one learn.py run per seed each")
    parser.add_argument("--pyramids-profile", action="store_true", help="Pyramids profiled with and without RND")
    parser.add_argument("--cpu-profile", action="store_true",
                        help="the PPO trainer's own CPU per agent-step on a 3DBall-shaped stream, no scene")
    parser.add_argument("--intra-op-threads", type=int, default=0, help="--cpu-profile: the session's intra-op threads")
    args = parser.parse_args()
    if args.seeds:
        seeds_report(args.seeds, args.target, args.trainer_config)
    if args.pyramids_seeds:
        pyramids_report(args.pyramids_seeds, 1.5)
    if args.pyramids_profile:
        pyramids_profile(args.profile_steps)
    if args.cpu_profile:
        cpu_profile(args.profile_steps, args.intra_op_threads)
    if args.profile is not None:
        for target in args.profile or ["3DBall:Ball3DBrain", "GridWorld:GridWorldBrain", "Hallway:HallwayBrain"]:
            scene, _, brain = target.partition(":")
            profile(scene, brain, args.profile_steps)
    if not (args.seeds or args.profile is not None or args.pyramids_seeds or args.pyramids_profile
            or args.cpu_profile):
        parser.print_help()


if __name__ == "__main__":
    main()
