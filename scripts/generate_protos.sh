#!/usr/bin/env bash
# Regenerates the Python message modules of the modern ML-Agents protocol from
# unityagents/protos/communicator_objects.proto, for both ends of the wire:
#   unityagents/protos/communicator_objects_pb2.py  (the trainer, gRPC server)
#   academy/protos/communicator_objects_pb2.py      (the built-in Unity side, gRPC client)
# Both are generated from the same .proto; each end writes its own encoding and decoding logic.
# Only message modules are generated: both ends register the one unary method by its path with
# grpcio's generic API, so the runtime needs grpcio and protobuf but no generated stubs.
# Needs grpcio-tools (pip install grpcio-tools), whose protoc must not be newer than the
# installed protobuf runtime (protobuf checks that on import).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$python" -m grpc_tools.protoc -I "$root/unityagents/protos" --python_out="$tmp" \
    "$root/unityagents/protos/communicator_objects.proto"
for target in "$root/unityagents/protos" "$root/academy/protos"; do
    mkdir -p "$target"
    cp "$tmp/communicator_objects_pb2.py" "$target/communicator_objects_pb2.py"
done
echo "generated: unityagents/protos/communicator_objects_pb2.py academy/protos/communicator_objects_pb2.py"
