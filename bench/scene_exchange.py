"""What a built-in gRPC scene pays per exchange for its signal handling, beside gRPC's bare call.

The scene (``academy.grpc_communicator.GrpcClient.exchange``) makes gRPC's blocking call and
marks it as the call a signal cancels, so that SIGINT/SIGTERM end the wait outside gRPC's native
code. This prints, side by side in one process against a trainer stand-in that answers at once
(127.0.0.1), the wall and CPU time per call of gRPC's plain blocking call and of ``exchange``, and
their ratio::

    python bench/scene_exchange.py [--calls 2000] [--rounds 2]
"""
from __future__ import annotations

import argparse
import time
from concurrent import futures

import grpc

from academy.grpc_communicator import GrpcClient
from unityagents.wire.protos import communicator_objects_pb2 as pb


def answering_trainer() -> tuple:
    """A server on 127.0.0.1 whose Exchange answers an empty message at once; (server, port)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler("communicator_objects.UnityToExternalProto", {
        "Exchange": grpc.unary_unary_rpc_method_handler(
            lambda request, context: pb.UnityMessageProto(), request_deserializer=pb.UnityMessageProto.FromString,
            response_serializer=pb.UnityMessageProto.SerializeToString)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def per_call(call, n: int) -> tuple:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        call()
    return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server, port = answering_trainer()
    client = GrpcClient(port)
    message = pb.UnityMessageProto()
    client.exchange(message)  # the first call waits for the server
    try:
        for _ in range(args.rounds):
            blocking = per_call(lambda: client._call(message), args.calls)
            exchange = per_call(lambda: client.exchange(message), args.calls)
            print(f"blocking call {blocking[0]:.0f} us wall, {blocking[1]:.0f} us CPU; exchange "
                  f"{exchange[0]:.0f} us wall, {exchange[1]:.0f} us CPU; ratio wall {exchange[0] / blocking[0]:.2f}x, "
                  f"CPU {exchange[1] / blocking[1]:.2f}x (CPU of both sides: one process)")
    finally:
        client.close()
        server.stop(0)


if __name__ == "__main__":
    main()
