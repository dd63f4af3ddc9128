"""Trained scaling with slow environments: our trainer and Unity's ``mlagents-learn`` at N = 1, 4, 16, 32.

Each run trains PPO with ML-Agents' own 3DBall settings (``bench/vs_mlagents.py``'s ``mlagents``
block) on the built-in 3DBall over gRPC, each decision costing ``--frame-time-ms`` of sleep as a
heavy Unity build waits on its frames:

* ours: ``unityagents-learn <config> --env=3DBall --num-envs N --env-args --frame-time-ms 20``
  (run as ``python -m trainers.learn_r22`` from this checkout);
* Unity's: ``mlagents-learn <config> --env=<3DBall wrapped as a build> --num-envs N --env-args
  --frame-time-ms 20`` from its own virtual environment (``bench/vs_mlagents.py`` says how to make
  one; ``--mlagents`` names its ``mlagents-learn``, else it is looked up on PATH).

Every run lasts ``--seconds`` after its first progress line (start-up excluded) and is then
stopped. Printed per N and trainer, side by side in one run: agent-steps/s between progress
lines, the ratio to N = 1 and to the frame-time limit, the CPU of the trainer side (every process
the trainer starts except the scenes) per agent-step and as a share of one core, the scenes' CPU
share, the resident memory of the trainer side and of everything (scenes included), and ours
over theirs. ``--profile DIR`` also splits our trainer process's CPU per agent-step by thread
(``/proc/<pid>/task`` over the same window, each Python thread named by ``py-spy dump``: the main
loop, the environment threads that receive and decode, gRPC's handler and serve threads, gRPC's
own native threads), and the main loop's share by part (update, inference, encode, agent
processor, the environment set) from py-spy's samples of it (``pip install py-spy``; the raw
samples stay in DIR)::

    python bench/trained_scaling.py [--envs 1 4 16 32] [--seconds 30] [--frame-time-ms 20]
        [--mlagents PATH | --ours-only] [--profile DIR] [--scene TRAINER/SCENE [--summary-freq N]]

``--scene`` runs one of ``bench/zoo.py``'s scenes with its Release 22 settings instead of 3DBall
(``ppo/Basic``: one agent; ``ppo/GridWorld``: a camera; ``ppo/Hallway``: memory; ``ppo/PushBlock``:
many agents), a progress line every ``--summary-freq`` agent-steps (1,000). The profile's parts then
also show how much of inference and of the update is TensorFlow's ``Session.run`` itself.

The machine should be otherwise idle: CPU per agent-step is the figure least moved by other load.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import vs_mlagents  # noqa: E402

BEHAVIOR = vs_mlagents.BEHAVIOR
AGENTS_PER_ENV = 12  # 3DBall's platforms
#: A progress line of either trainer: ours "<Behavior>: Step: N." (team suffix allowed), theirs "<Behavior>. Step: N.".
PROGRESS = re.compile(rf"{BEHAVIOR}\S*?[.:] Step: (\d+)\.")
#: Where a sample of our trainer counts, first match wins (py-spy frames are "function (file:line)").
PARTS = (
    ("update", ("(trainers/ppo/optimizer.py", "update_policy", "(runner/background.py",
                "(trainers/trainer/on_policy.py", "(trainers/buffer.py", "(trainers/returns.py",
                "(trainers/trainer/off_policy.py", "(trainers/sac/update.py", "(trainers/sac/sequences.py",
                "(trainers/sac/replay_state.py")),
    ("decode", ("receive (unityagents/wire/grpc.py", "(unityagents/wire/grpc_messages.py",
                "(unityagents/wire/validate.py", "_next_message (unityagents/wire/grpc.py")),
    ("encode", ("send_step (unityagents/wire/grpc.py", "_reply (unityagents/wire/grpc.py")),
    ("gRPC exchange", ("(unityagents/wire/grpc_server.py", "grpc/_server.py", "grpc/_common.py",
                       "grpc/_cython")),
    ("inference", ("_act (runner/controller.py",)),
    ("agent processor", ("(runner/agent_processor.py", "(runner/collector.py",
                         "(trainers/trainer/trajectory.py", "_experience (runner/controller.py",
                         "_per_environment (runner/controller.py", "(trainers/trainer/brain_info.py")),
    ("summaries", ("(trainers/stats.py", "(trainers/trainer/summaries.py", "(runner/timers.py")),
    ("environment set", ("(unityagents/vector/", "(unityagents/base_env.py", "(unityagents/environment.py",
                         "concurrent/futures", "threading.py", "queue.py")),
)


#: Where TensorFlow runs a graph: a part's samples under it are its ``Session.run`` share.
SESSION_RUN = "(tensorflow/python/client/session.py"
#: The parts whose ``Session.run`` share is shown beside them.
SESSION_PARTS = ("inference", "update")


def progress_pattern(behavior: str) -> re.Pattern:
    """A progress line of either trainer for ``behavior`` (``PROGRESS`` for 3DBall's)."""
    return re.compile(rf"{re.escape(behavior)}\S*?[.:] Step: (\d+)\.")


def config_file(folder: str, n: int) -> str:
    """ML-Agents' 3DBall settings as a Release 22 run config (both trainers read it); a progress
    line every ~2 s at the frame-time limit, so that short runs have several."""
    s = dict(vs_mlagents.SETTINGS["mlagents"])
    block = vs_mlagents.mlagents_config(s, budget=10_000_000)["behaviors"][BEHAVIOR]
    block["summary_freq"] = max(1200, 1200 * n)
    path = os.path.join(folder, f"3DBall-{n}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"behaviors": {BEHAVIOR: block}}, f)
    return path


def _tree(root: "psutil.Process") -> List["psutil.Process"]:  # noqa: F821
    try:
        return [root] + root.children(recursive=True)
    except Exception:
        return [root]


def _is_scene(p) -> bool:
    try:
        return "academy" in p.cmdline()
    except Exception:
        return False


class Sampler:
    """CPU seconds and resident memory of a run's process tree, trainer side and scenes apart."""

    def __init__(self, pid: int):
        import psutil

        self.root = psutil.Process(pid)
        self.rss_trainer = 0
        self.rss_all = 0

    def sample(self) -> Dict[str, float]:
        cpu = {"trainer": 0.0, "scenes": 0.0}
        rss = {"trainer": 0, "scenes": 0}
        for p in _tree(self.root):
            try:
                t = p.cpu_times()
                if p.name() == "py-spy":
                    continue
                side = "scenes" if _is_scene(p) else "trainer"
                cpu[side] += t.user + t.system
                rss[side] += p.memory_info().rss
            except Exception:  # a process that just ended
                continue
        self.rss_trainer = max(self.rss_trainer, rss["trainer"])
        self.rss_all = max(self.rss_all, rss["trainer"] + rss["scenes"])
        return cpu


def thread_cpu(pid: int) -> Dict[int, Tuple[str, float]]:
    """Each OS thread of ``pid``: its name and CPU seconds so far (``/proc/<pid>/task``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: Dict[int, Tuple[str, float]] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / ticks)
    return out


#: A thread's role, from its Python name (first match wins); py-spy's dump lists every Python thread.
ROLES = (
    ("main loop", ("MainThread",)),
    ("environment threads (receive, decode)", ("unityagents-env",)),
    ("gRPC handler threads", ("unityagents-grpc",)),
    ("gRPC serve threads", ("(_serve)",)),
    ("background update thread", ("trainer-update",)),
)


#: Native threads that keep the process's name: mostly TensorFlow's intra-op pool (the matrix products of
#: inference and of the update) in the TensorFlow builds measured here, whose pool names no thread.
UNNAMED = "unnamed native threads (TensorFlow's intra-op pool)"


def thread_roles(pid: int) -> Dict[int, str]:
    """OS thread id -> role of every Python thread of ``pid`` (``py-spy dump``: ``Thread TID (state): "name"``)."""
    out = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60).stdout
    roles: Dict[int, str] = {}
    for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "(.*)"$', out, re.M):
        role = next((r for r, marks in ROLES if any(k in name for k in marks)), None)
        if role:
            roles[int(tid)] = role
    return roles


def role_cpu(before: Dict[int, Tuple[str, float]], after: Dict[int, Tuple[str, float]],
             roles: Dict[int, str]) -> Dict[str, float]:
    """CPU seconds of the window by thread role; threads Python does not run are named by the OS."""
    out: Dict[str, float] = collections.defaultdict(float)
    for tid, (name, cpu) in after.items():
        spent = cpu - before.get(tid, (name, 0.0))[1]
        name = re.sub(r'[0-9_-]+$', '', name)
        out[roles.get(tid, UNNAMED if name == "python" else f"other threads ({name})")] += spent
    return out


def run_one(cmd: List[str], cwd: str, seconds: float, timeout: float, profile: Optional[str] = None,
            env: Optional[Dict[str, str]] = None, progress: re.Pattern = PROGRESS) -> Dict[str, object]:
    """Run ``cmd`` until ``seconds`` after its first progress line; the measures of that window."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    sampler = Sampler(proc.pid)
    rows = []  # (agent steps, monotonic time, cpu dict)
    tail: List[str] = []
    spy = None
    threads_at: List[Dict[int, Tuple[str, float]]] = []
    roles: Dict[int, str] = {}
    try:
        for line in proc.stdout:
            tail = (tail + [line])[-30:]
            m = progress.search(line)
            now = time.monotonic()
            if m:
                rows.append((int(m[1]), now, sampler.sample()))
                if len(rows) == 1:
                    if profile:
                        spy = subprocess.Popen(["py-spy", "record", "--pid", str(proc.pid), "-r", "100", "-f", "raw",
                                                "--threads", "--nonblocking", "-o", profile, "-d",
                                                str(int(seconds) + 5)],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        threads_at.append(thread_cpu(proc.pid))
                if now - rows[0][1] >= seconds and len(rows) >= 3:
                    if profile:
                        threads_at.append(thread_cpu(proc.pid))
                        roles = thread_roles(proc.pid)
                    break
            if now - start > timeout:
                break
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled so far
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
        vs_mlagents._signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            vs_mlagents._signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(1.0)
        vs_mlagents._signal_group(proc.pid, signal.SIGKILL)
    if len(rows) < 2:
        raise SystemExit(f"{' '.join(cmd[:3])} printed fewer than two progress lines; its last output:\n"
                         f"{''.join(tail)}")
    (s0, t0, c0), (s1, t1, c1) = rows[0], rows[-1]
    steps, wall = s1 - s0, t1 - t0
    result: Dict[str, object] = {
        "rate": steps / wall, "steps": steps, "wall": wall,
        "cpu_trainer": c1["trainer"] - c0["trainer"], "cpu_scenes": c1["scenes"] - c0["scenes"],
        "rss_trainer": sampler.rss_trainer, "rss_all": sampler.rss_all,
    }
    if profile and len(threads_at) == 2 and os.path.exists(profile):
        result["threads"] = role_cpu(threads_at[0], threads_at[1], roles)
        result["parts"] = split_profile(profile)
        result["update_thread"] = session_share(profile, "trainer-update")
    return result


#: Leaf frames of the main loop that wait for the environments (blocked in C, seen as the caller's frame).
WAITS = ("Condition.wait (", "OverlappedStepping.collect (", "PolledCalls.next_call (", "PooledCalls.next_call (")


def split_profile(path: str) -> Dict[str, float]:
    """Share of each part in the main loop's samples (py-spy's raw output; a thread waiting to
    run counts as busy, so the shares, not the sample counts, are what is used)."""
    counts: Dict[str, float] = collections.defaultdict(float)
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit() or "MainThread" not in stack.split(";", 1)[0]:
                continue
            leaf = stack.rsplit(";", 1)[-1]
            if leaf.startswith(WAITS):
                continue  # collect() waiting for an answer (a woken thread waiting for a core is sampled there)
            part = next((name for name, marks in PARTS if any(m in stack for m in marks)), "other")
            counts[part] += int(n)
            if part in SESSION_PARTS and SESSION_RUN in stack:
                counts[f"{part}: Session.run"] += int(n)
    total = sum(v for k, v in counts.items() if ": " not in k) or 1.0
    return {k: v / total for k, v in counts.items()}


def session_share(path: str, thread: str) -> Optional[float]:
    """Share of ``thread``'s samples (py-spy's raw output; its name's prefix) inside ``Session.run``;
    None when it was never sampled (no ``threaded`` trainer)."""
    inside = total = 0
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit() or f": {thread}" not in stack.split(";", 1)[0]:
                continue
            total += int(n)
            inside += int(n) if SESSION_RUN in stack else 0
    return inside / total if total else None


def ours_cmd(config: str, n: int, frame_ms: float, scratch: str, seed: int = 0, scene: str = "3DBall") -> List[str]:
    return [sys.executable, "-m", "trainers.learn_r22", config, f"--env={scene}", f"--num-envs={n}",
            f"--run-id=ours-{n}", f"--results-dir={scratch}", "--force", f"--seed={seed}",
            f"--base-port={vs_mlagents.free_port()}", "--env-args", "--frame-time-ms", str(frame_ms)]


def theirs_cmd(mlagents: str, build: str, config: str, n: int, frame_ms: float, scratch: str,
               seed: int = 0) -> List[str]:
    return [mlagents, config, f"--env={build}", f"--num-envs={n}", f"--run-id=theirs-{n}",
            "--results-dir", scratch, "--force", "--no-graphics", "--seed", str(seed),
            "--base-port", str(vs_mlagents.free_port()), "--torch-device", "cpu",
            "--env-args", "--frame-time-ms", str(frame_ms)]


def _mib(x: float) -> str:
    return f"{x / 2 ** 20:,.0f}"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, nargs="+", default=[1, 4, 16, 32])
    p.add_argument("--seconds", type=float, default=30.0, help="measuring window of each run, after start-up")
    p.add_argument("--frame-time-ms", type=float, default=20.0)
    p.add_argument("--mlagents", default=None, help="Unity's mlagents-learn (default: the one on PATH)")
    p.add_argument("--ours-only", action="store_true", help="skip Unity's trainer")
    p.add_argument("--profile", metavar="DIR", default=None,
                   help="split our trainer's CPU into parts with py-spy; its raw samples go to DIR/profile-N.txt")
    p.add_argument("--scene", metavar="TRAINER/SCENE", default=None,
                   help="one of bench/zoo.py's scenes with its Release 22 settings (default: 3DBall as above)")
    p.add_argument("--summary-freq", type=int, default=1000, help="with --scene: agent-steps between progress lines")
    args = p.parse_args(argv)
    scene, progress = "3DBall", PROGRESS
    if args.scene:
        import zoo

        if args.scene not in zoo.ZOO:
            raise SystemExit(f"--scene {args.scene}: expected one of {', '.join(zoo.ZOO)}")
        scene, behavior = zoo.ZOO[args.scene][:2]
        progress = progress_pattern(behavior)
    mlagents = None
    if not args.ours_only:
        mlagents = args.mlagents or shutil.which("mlagents-learn")
        if not mlagents or not os.access(mlagents, os.X_OK):
            raise SystemExit("mlagents-learn not found: install it in a virtual environment as bench/vs_mlagents.py "
                             "says, then pass --mlagents PATH (or put it on PATH), or run with --ours-only.")
    if args.profile:
        if not shutil.which("py-spy"):
            raise SystemExit("--profile samples with py-spy: pip install py-spy")
        os.makedirs(args.profile, exist_ok=True)
    limit = AGENTS_PER_ENV * 1000.0 / args.frame_time_ms if args.frame_time_ms and not args.scene else None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    results: Dict[str, Dict[int, Dict[str, object]]] = {"ours": {}, "theirs": {}}
    with tempfile.TemporaryDirectory() as scratch:
        build = vs_mlagents.make_build(scratch, 0.0, scene)
        for n in args.envs:
            config = zoo.run_config(args.scene, scratch, args.summary_freq) if args.scene else config_file(scratch, n)
            profile = os.path.join(args.profile, f"profile-{n}.txt") if args.profile else None
            results["ours"][n] = run_one(ours_cmd(config, n, args.frame_time_ms, scratch, scene=scene), ROOT,
                                         args.seconds, timeout=600 + args.seconds, profile=profile, env=env,
                                         progress=progress)
            if mlagents:
                results["theirs"][n] = run_one(theirs_cmd(mlagents, build, config, n, args.frame_time_ms, scratch),
                                               scratch, args.seconds, timeout=600 + args.seconds, progress=progress)
            report_row(n, results, limit)
    print_table(args, results, limit)
    return 0


def report_row(n: int, results, limit) -> None:
    """One line per finished N as it comes (the table is printed at the end)."""
    for who in ("ours", "theirs"):
        r = results[who].get(n)
        if r:
            print(f"# {who} N={n}: {r['rate']:,.0f} agent-steps/s, trainer CPU "
                  f"{1e6 * r['cpu_trainer'] / r['steps']:.0f} us/agent-step", flush=True)


def print_table(args, results, limit) -> None:
    print(f"\n{args.scene or '3DBall'} over gRPC, ML-Agents' Release 22 settings, trained, "
          f"{args.frame_time_ms:g} ms frames"
          + (f" (limit {limit:,.0f} agent-steps/s per environment)" if limit else "") + f", {args.seconds:g} s windows")
    print("| trainer | N | agent-steps/s | x N = 1 | of limit | trainer CPU us / agent-step | trainer CPU, cores | "
          "scenes CPU, cores | scenes CPU us / agent-step | trainer RSS MiB | all RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for who in ("ours", "theirs"):
        base = results[who].get(min(results[who]) if results[who] else None)
        for n, r in sorted(results[who].items()):
            share = f"{r['rate'] / (limit * n):.0%}" if limit else "-"
            print(f"| {who} | {n} | {r['rate']:,.0f} | {r['rate'] / base['rate']:.2f} | {share} | "
                  f"{1e6 * r['cpu_trainer'] / r['steps']:.0f} | {r['cpu_trainer'] / r['wall']:.2f} | "
                  f"{r['cpu_scenes'] / r['wall']:.2f} | {1e6 * r['cpu_scenes'] / r['steps']:.0f} | "
                  f"{_mib(r['rss_trainer'])} | {_mib(r['rss_all'])} |")
    if results["theirs"]:
        print("\n| N | ours / theirs, agent-steps/s | trainer CPU per agent-step, ours / theirs | "
              "trainer RSS, ours / theirs |")
        print("|---|---|---|---|")
        for n in sorted(set(results["ours"]) & set(results["theirs"])):
            a, b = results["ours"][n], results["theirs"][n]
            print(f"| {n} | {a['rate'] / b['rate']:.2f} | "
                  f"{(a['cpu_trainer'] / a['steps']) / (b['cpu_trainer'] / b['steps']):.2f} | "
                  f"{a['rss_trainer'] / b['rss_trainer']:.2f} |")
    profiled = {n: r for n, r in sorted(results["ours"].items()) if "threads" in r}
    if profiled:
        roles = [name for name, _ in ROLES]
        others = sorted({k for r in profiled.values() for k in r["threads"] if k not in roles})
        print("\nOur trainer process's CPU per agent-step by thread, us (/proc/<pid>/task over the same window)")
        print("| N | " + " | ".join(roles + others) + " |")
        print("|---|" + "---|" * len(roles + others))
        for n, r in profiled.items():
            print(f"| {n} | " + " | ".join(f"{1e6 * r['threads'].get(k, 0.0) / r['steps']:.1f}"
                                          for k in roles + others) + " |")
        names = [name for name, _ in PARTS] + ["other"] + [f"{k}: Session.run" for k in SESSION_PARTS]
        print("\nThe main loop's CPU per agent-step by part, us (its thread's CPU split by py-spy's samples)")
        print("| N | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for n, r in profiled.items():
            main_cpu = 1e6 * r["threads"].get("main loop", 0.0) / r["steps"]
            print(f"| {n} | " + " | ".join(f"{main_cpu * r['parts'].get(k, 0.0):.1f}" for k in names) + " |")
        for n, r in profiled.items():
            if r.get("update_thread") is not None:
                print(f"N = {n}: the background update thread's samples are {r['update_thread']:.0%} in Session.run")


if __name__ == "__main__":
    sys.exit(main())
