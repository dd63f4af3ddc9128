#!/usr/bin/env bash
# Regenerates the Python message modules of the modern ML-Agents protocol from
# unityagents/wire/protos/communicator_objects.proto into unityagents/wire/protos/communicator_objects_pb2.py,
# the one copy both ends of the wire import: the trainer (gRPC server) and the built-in Unity side
# (academy/, gRPC client). Each end writes its own encoding and decoding logic.
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
cp "$tmp/communicator_objects_pb2.py" "$root/unityagents/protos/communicator_objects_pb2.py"
echo "generated: unityagents/wire/protos/communicator_objects_pb2.py"
