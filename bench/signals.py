"""Signals at random moments of training: does every run end as documented, saved, without an abort?

Each trial is one ``learn.py 3DBall --train`` process (real scene processes, 127.0.0.1), over
API-2 or gRPC, with 1 or 4 environments, threaded updates or not (cycled through, all eight
combinations equally often), sent SIGTERM or SIGINT (alternating) a random 0-6 s after its first
summary file appears (the trainers are built: training has begun). A trial counts as good when:

* the exit status is the README's (SIGTERM 143, SIGINT 0 once something was saved);
* the run folder holds a whole checkpoint (``tf.train.latest_checkpoint``) and the export
  ``3DBall.bytes``, and no temporary file;
* no abort: the status is not a signal death, and the output holds no "Traceback", "corrupted",
  "double free" or "Segmentation".

Printed: one line per trial, then the counts. Each run has ``PYTHONFAULTHANDLER=1``: a native abort
prints every thread's Python stack; ``--keep DIR`` keeps a failed trial's run folder and whole
output (and, with ``--cores``, its core dump) for a debugger.

    python bench/signals.py [--count 100] [--seed 0] [--max-wait 6] [--keep DIR] [--cores]
"""
from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARN = os.path.join(ROOT, "learn.py")
CONFIG = """default:
    max_steps: 1.0e7
    batch_size: 256
    buffer_size: 2048
    summary_freq: 1.0e6
    threaded: {threaded}
"""
#: The shipped settings of 3DBall (trainer_configurations.yaml): a summary every 2400 steps, ten epochs.
SHIPPED = """default:
    normalize: true
    buffer_size: 1536
    batch_size: 256
    num_epoch: 10
    time_horizon: 128
    clip_value: false
    max_steps: 1.0e7
    summary_freq: 2400
    threaded: {threaded}
"""
EXPECTED = {signal.SIGTERM: 143, signal.SIGINT: 0}
ABORTS = ("Traceback", "corrupted", "double free", "Segmentation", "Fatal Python error")


def ephemeral_ports() -> range:
    """The ports the kernel hands out for ``bind(port 0)`` and outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


_PORT_DRAWS = random.Random()  # seeded from the system: concurrent benches draw apart


def free_port(span: int) -> int:
    """A base port whose ``span`` ports are all free now, below the kernel's ephemeral range: no
    other program's ``bind(0)`` or outgoing connection can take one of them before the run binds
    it (only one that names the port itself could), so a trial never fails on a clash."""
    top = min(ephemeral_ports().start, 32768) - span
    while True:
        port = _PORT_DRAWS.randrange(20000, top)
        try:
            for p in range(port, port + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue


def trial(workdir: str, protocol: str, n_envs: int, threaded: bool, signum: int, delay: float, config: str = CONFIG):
    """(good, why, seconds after training began that the signal went, exit status)."""
    text = config.format(threaded=str(threaded).lower())
    config = os.path.join(workdir, "c.yaml")
    with open(config, "w") as f:
        f.write(text)
    # A native abort dumps every Python thread's stack (faulthandler), to tell where it happened.
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen(
        [sys.executable, LEARN, "3DBall", "--train", "--trainer-config", config, "--run-path", "run",
         "--protocol", protocol, "--num-envs", str(n_envs), "--base-port", str(free_port(n_envs + 2))],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    summaries = os.path.join(workdir, "summaries")
    deadline = time.time() + 180
    try:
        while not any(f.startswith("events") for _, _, files in os.walk(summaries) for f in files):
            if proc.poll() is not None or time.time() > deadline:
                out = proc.communicate()[0]
                return False, "never started training", 0.0, proc.returncode, out
            time.sleep(0.05)
        time.sleep(delay)
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
        return False, "did not end within 300 s of the signal", delay, None, out
    rc = proc.returncode
    model = os.path.join(workdir, "models", "run")
    why = []
    if rc is None or rc < 0:
        why.append(f"died of signal {-rc}")
    elif rc != EXPECTED[signum]:
        why.append(f"exit {rc}, expected {EXPECTED[signum]}")
    aborts = [a for a in ABORTS if a in out]
    if aborts:
        why.append("output holds " + ", ".join(aborts))
    if not os.path.isfile(os.path.join(model, "3DBall.bytes")):
        why.append("no export")
    index = os.path.join(model, "checkpoint")
    whole = False
    if os.path.isfile(index):
        with open(index) as f:
            first = f.readline().split('"')
        prefix = os.path.join(model, first[1]) if len(first) > 1 else None
        whole = prefix is not None and os.path.isfile(prefix + ".index") and any(
            name.startswith(os.path.basename(prefix) + ".data") for name in os.listdir(model))
    if not whole:
        why.append("no whole checkpoint")
    leftovers = [n for n in os.listdir(model) if n.endswith((".tmp", ".tempstate"))] if os.path.isdir(model) else []
    if leftovers:
        why.append(f"temporary files {leftovers}")
    return not why, "; ".join(why) or "ok", delay, rc, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-wait", type=float, default=6.0)
    parser.add_argument("--shipped", action="store_true",
                        help="3DBall's shipped settings (a summary every 2400 steps) instead of rare summaries")
    parser.add_argument("--min-wait", type=float, default=0.0)
    parser.add_argument("--start", type=int, default=0, help="first trial (to rerun a trial by its number - 1)")
    parser.add_argument("--keep", default=None,
                        help="a folder where each failed trial's run folder and whole output are kept")
    parser.add_argument("--only", default=None, help="only the combinations whose line holds this text (e.g. 'N=1')")
    parser.add_argument("--cores", action="store_true", help="let a crashed run leave a core dump in its folder")
    args = parser.parse_args()
    if args.cores:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    combos = list(itertools.product(("api2", "grpc"), (1, 4), (False, True)))
    good, ran, started = 0, 0, time.time()
    failures = []
    for i in range(args.start, args.start + args.count):
        protocol, n_envs, threaded = combos[i % len(combos)]
        signum = (signal.SIGTERM, signal.SIGINT)[(i // len(combos)) % 2 ^ (i % 2)]
        wait = random.Random(args.seed * 100003 + i).uniform(args.min_wait, args.max_wait)
        label = f"{protocol:4s} N={n_envs} threaded={threaded!s:5s} {signal.Signals(signum).name:7s}"
        if args.only and args.only not in label:
            continue
        for _ in range(3):  # a run that never reached training (a port taken meanwhile) is not a trial
            with tempfile.TemporaryDirectory(prefix="signals-") as workdir:
                ok, why, delay, rc, out = trial(workdir, protocol, n_envs, threaded, signum, wait,
                                                SHIPPED if args.shipped else CONFIG)
                if not ok and args.keep and why != "never started training":
                    kept = os.path.join(args.keep, f"trial{i + 1}")
                    shutil.copytree(workdir, kept, dirs_exist_ok=True)
                    with open(os.path.join(kept, "output.txt"), "w") as f:
                        f.write(out)
            if why != "never started training":
                break
            print(f"    trial {i + 1} never started training, again: {out.strip().splitlines()[-1][:200]}")
        good += ok
        ran += 1
        print(f"{i + 1:3d} {label} "
              f"after {delay:4.1f} s: exit {rc} {why}", flush=True)
        if not ok:
            failures.append((i + 1, why))
            print(f"--- trial {i + 1}'s output, last lines:\n{out[-4000:]}\n---", flush=True)
    print(f"\n{good} of {ran} ended with the documented exit status, a whole checkpoint and export, "
          f"and no abort ({time.time() - started:.0f} s)")
    for i, why in failures:
        print(f"trial {i}: {why}")


if __name__ == "__main__":
    main()
