"""What the wire costs: 3DBall stepped over API-2 and over gRPC vs in-process, vs bare loopback.

Measurements side by side in one run:

1. ``UnityEnvironment.step`` on the built-in 3DBall (12 agents) with random actions, over API-2
   (JSON, framing, two processes, three lock-step round trips per step) and over the modern
   gRPC protocol (``protocol="grpc"``: protobuf, one unary call per step), in alternating blocks
   so that both see the same machine load;
2. the same scene stepped in-process through ``academy.Academy`` (no socket, no encoding);
   with the CPU per step of the trainer's process and of the scene's beside the wall time (less
   moved by a loaded machine, and where each side's time goes);
3. a bare lock-step round trip between two processes over loopback (TCP_NODELAY, 8-byte
   messages): the floor of any lock-step protocol. A 3DBall step needs three of them
   (STEP/STEPPING, actions/state, RECEIVED/done flag);
4. a bare gRPC unary call (a few bytes each way) between two processes, served as the trainer serves
   Unity (``unityagents.wire.grpc_server.ExchangeServer``): the floor of the gRPC protocol, which
   needs one per step; and the CPU this process spends per such call with each way it can be
   served: ``ExchangeServer`` polling grpc core's completion queue on this thread (the trainer's),
   ``ExchangeServer`` on grpcio's public server (its fallback), and grpcio's public servers as such
   (sync with one or two executor threads, without HTTP/2 BDP probes, ``grpc.aio``).

A wire's own cost per step is (1) minus (2). Targets: API-2 at most 1.5x three round trips; gRPC
at most 2x API-2's own cost.

    python bench/protocol.py [--steps 3000]
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from academy import load_scene  # noqa: E402
from academy.academy import Academy  # noqa: E402
from unityagents import UnityEnvironment  # noqa: E402
from unityagents.base_env import ActionTuple  # noqa: E402

ECHO_SERVER = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    data = s.recv(8)
    if not data:
        break
    s.sendall(data)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) another process has used so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_wires(steps: int, rng: np.random.Generator) -> dict:
    """(wall, trainer-process CPU, scene-process CPU) seconds per ``UnityEnvironment.step`` on 3DBall,
    per protocol (median of 5 blocks each, the protocols' blocks interleaved)."""
    envs = {}
    try:
        for protocol in ("api2", "grpc"):
            envs[protocol] = UnityEnvironment("3DBall", base_port=free_port(), seed=0, protocol=protocol)
            envs[protocol].reset()
        actions = rng.uniform(-1, 1, (steps, 12, 2))
        blocks = {p: [] for p in envs}
        cpu = {p: [] for p in envs}
        scene_cpu = {p: [] for p in envs}
        for b in range(6):  # block 0 warms both up and is not counted
            for protocol, env in envs.items():
                scene = env._peer.process.pid
                start, used, scene_used = time.perf_counter(), time.process_time(), process_cpu(scene)
                for i in range(b * (steps // 6), (b + 1) * (steps // 6)):
                    env.step_behaviors(ActionTuple(actions[i]))
                    if env.global_done:
                        env.reset_behaviors()
                if b:
                    blocks[protocol].append((time.perf_counter() - start) / (steps // 6))
                    cpu[protocol].append((time.process_time() - used) / (steps // 6))
                    scene_cpu[protocol].append((process_cpu(scene) - scene_used) / (steps // 6))
        return {p: (float(np.median(v)), float(np.median(cpu[p])), float(np.median(scene_cpu[p])))
                for p, v in blocks.items()}
    finally:
        for env in envs.values():
            env.close()


GRPC_ECHO_CLIENT = """
import sys
sys.path.insert(0, sys.argv[2])
from academy.grpc_communicator import import_grpc
grpc = import_grpc()  # set up as the scene's client is
channel = grpc.insecure_channel("127.0.0.1:" + sys.argv[1], options=[("grpc.enable_http_proxy", 0)])
call = channel.unary_unary("/communicator_objects.UnityToExternalProto/Exchange")
reply = call(b"RECEIVED", timeout=30, wait_for_ready=True)
while reply != b"STOP":
    reply = call(reply)
"""


def _serve_exchange(pooled: bool) -> tuple:
    """The trainer's own ``ExchangeServer`` on a free port (grpc core's queue polled on this thread, or with
    ``pooled`` grpcio's public server): (port, next call, answer, stop)."""
    from unityagents.wire.grpc_server import ExchangeServer

    port = free_port()
    server = ExchangeServer(port, 0, b"STOP", pooled=pooled)
    return port, lambda: server.next_call(30), lambda pending, data: server.answer(data), server.close


def bench_grpc_round_trip(n: int) -> float:
    """Seconds per bare unary gRPC call (8 bytes each way) from another process, served the way the
    trainer serves Unity (``ExchangeServer``): the call is read on this thread, which answers it."""
    port, next_call, answer, stop = _serve_exchange(False)
    proc = subprocess.Popen([sys.executable, "-c", GRPC_ECHO_CLIENT, str(port), ROOT])
    try:
        pending = next_call()
        for _ in range(500):
            answer(pending, b"RECEIVED")
            pending = next_call()
        blocks = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n // 5):
                answer(pending, b"RECEIVED")
                pending = next_call()
            blocks.append((time.perf_counter() - start) / (n // 5))
        answer(pending, b"STOP")
        return float(np.median(blocks))
    finally:
        proc.wait(timeout=10)
        stop()


def _serve_sync(workers: int, options) -> tuple:
    """A sync ``grpc.server`` whose calls are handed to this thread (as ``GrpcCommunicator`` does):
    (port, next call, answer, stop)."""
    import queue
    from concurrent import futures

    import grpc

    calls: "queue.SimpleQueue" = queue.SimpleQueue()

    def exchange(request, context):
        reply: "queue.SimpleQueue" = queue.SimpleQueue()
        calls.put(reply)
        return reply.get()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=options)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "communicator_objects.UnityToExternalProto", {"Exchange": grpc.unary_unary_rpc_method_handler(exchange)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return port, lambda: calls.get(timeout=30), lambda pending, data: pending.put(data), lambda: server.stop(None)


def _serve_aio() -> tuple:
    """A ``grpc.aio`` server on an event loop in its own thread, calls handed to this thread."""
    import asyncio
    import queue
    import threading

    import grpc

    loop = asyncio.new_event_loop()
    calls: "queue.SimpleQueue" = queue.SimpleQueue()

    async def exchange(request, context):
        reply = loop.create_future()
        calls.put(reply)
        return await reply

    async def start():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "communicator_objects.UnityToExternalProto", {"Exchange": grpc.unary_unary_rpc_method_handler(exchange)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    threading.Thread(target=loop.run_forever, daemon=True).start()
    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result()

    def stop():
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result()
        loop.call_soon_threadsafe(loop.stop)

    return port, lambda: calls.get(timeout=30), \
        lambda pending, data: loop.call_soon_threadsafe(pending.set_result, data), stop


def bench_grpc_servers(n: int, rounds: int = 3) -> dict:
    """This process's CPU seconds per bare unary call (the least of 5 blocks over ``rounds``
    interleaved rounds: a loaded machine only adds to CPU time) for the ways grpcio can serve it."""
    variants = {
        "ExchangeServer: grpc core's queue polled on this thread (the trainer's)": lambda: _serve_exchange(False),
        "ExchangeServer, pooled: grpcio's public server, 2 executor threads": lambda: _serve_exchange(True),
        "sync server, 2 executor threads": lambda: _serve_sync(2, None),
        "sync server, 1 executor thread": lambda: _serve_sync(1, None),
        "sync server, 2 threads, no HTTP/2 BDP probe": lambda: _serve_sync(2, [("grpc.http2.bdp_probe", 0)]),
        "grpc.aio server on its own event-loop thread": _serve_aio,
    }
    best = {name: float("inf") for name in variants}
    for _ in range(rounds):
        for name, serve in variants.items():
            port, next_call, answer, stop = serve()
            proc = subprocess.Popen([sys.executable, "-c", GRPC_ECHO_CLIENT, str(port), ROOT])
            try:
                pending = next_call()
                for _ in range(200):
                    answer(pending, b"RECEIVED")
                    pending = next_call()
                for _ in range(5):
                    used = time.process_time()
                    for _ in range(n // 5):
                        answer(pending, b"RECEIVED")
                        pending = next_call()
                    best[name] = min(best[name], (time.process_time() - used) / (n // 5))
                answer(pending, b"STOP")
            finally:
                proc.wait(timeout=30)
                stop()
    return best


def bench_in_process(steps: int, rng: np.random.Generator) -> float:
    """Seconds per decision of the same scene without the socket."""
    academy = Academy(load_scene("3DBall")(seed=0), train_mode=True)
    academy.reset()
    actions = rng.uniform(-1, 1, (steps, 12, 2))
    start = time.perf_counter()
    for i in range(steps):
        academy.set_external_actions({"action": {"Ball3DBrain": actions[i].ravel().tolist()}})
        academy.decide()
        academy.advance()
        academy.finish_step(lambda brain: academy.scene.states(brain.name))
    return (time.perf_counter() - start) / steps


def bench_round_trip(n: int) -> float:
    """Seconds per lock-step 8-byte round trip to another process over loopback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    proc = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(listener.getsockname()[1])])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for _ in range(500):
            conn.sendall(b"RECEIVED")
            conn.recv(8)
        blocks = []  # the median of 5 blocks: a single block swings with the scheduler
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n // 5):
                conn.sendall(b"RECEIVED")
                conn.recv(8)
            blocks.append((time.perf_counter() - start) / (n // 5))
        return float(np.median(blocks))
    finally:
        conn.close()
        listener.close()
        proc.wait(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rtt = bench_round_trip(args.steps * 3)
    grpc_rtt = bench_grpc_round_trip(args.steps)
    wires = bench_wires(args.steps, rng)
    (wire, wire_cpu, wire_scene), (modern, modern_cpu, modern_scene) = wires["api2"], wires["grpc"]
    local = bench_in_process(args.steps, rng)
    floor = 3 * rtt
    cost, modern_cost = wire - local, modern - local
    print(f"3DBall over API-2      : {1 / wire:9.0f} steps/s  ({wire * 1e6:7.1f} us/step)")
    print(f"3DBall over gRPC       : {1 / modern:9.0f} steps/s  ({modern * 1e6:7.1f} us/step)")
    print(f"3DBall in-process      : {1 / local:9.0f} steps/s  ({local * 1e6:7.1f} us/step)")
    print(f"loopback round trip    : {1 / rtt:9.0f} trips/s  ({rtt * 1e6:7.1f} us/trip)")
    print(f"bare gRPC unary call   : {1 / grpc_rtt:9.0f} calls/s  ({grpc_rtt * 1e6:7.1f} us/call)")
    print(f"API-2 / in-process     : {wire / local:9.2f}x slower")
    print(f"API-2 cost per step    : {cost * 1e6:9.1f} us (API-2 minus in-process)")
    print(f"floor: 3 round trips   : {floor * 1e6:9.1f} us")
    print(f"API-2 cost / floor     : {cost / floor:9.2f}x (target <= 1.5)")
    print(f"gRPC cost per step     : {modern_cost * 1e6:9.1f} us (gRPC minus in-process)")
    print(f"gRPC cost / API-2 cost : {modern_cost / cost:9.2f}x (target <= 2)")
    print(f"gRPC cost / bare call  : {modern_cost / grpc_rtt:9.2f}x")
    for name, seconds in bench_grpc_servers(args.steps // 2).items():
        print(f"CPU per bare call      : {seconds * 1e6:9.1f} us, {name}")
    print(f"trainer CPU per step   : API-2 {wire_cpu * 1e6:.1f} us, gRPC {modern_cpu * 1e6:.1f} us "
          "(the trainer process, gRPC's server threads included)")
    print(f"scene CPU per step     : API-2 {wire_scene * 1e6:.1f} us, gRPC {modern_scene * 1e6:.1f} us "
          f"(the scene's process, its simulation included; in-process the step takes {local * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
