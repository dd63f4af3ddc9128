#!/usr/bin/env python3
"""A scripted stand-in for a Unity build, used by the protocol tests.

Launched by ``UnityEnvironment`` like a real build (``Fake.x86_64 --port N``), it connects, then
plays the ops of the JSON script named by ``$FAKE_UNITY_SCRIPT``:

* ``{"send": "<latin-1 text>", "chunks": k}`` sends bytes, split into k writes (short reads);
  with ``"trickle": s`` one byte every s seconds instead (a peer that defeats per-read timeouts);
* ``{"recv": n}`` reads exactly n bytes and appends them to the transcript;
* ``{"sleep": s}``, ``{"close": true}`` (drop the connection), ``{"exit": code}``.

Everything received is written to ``$FAKE_UNITY_SCRIPT.transcript`` so a test can assert the
exact bytes the client sent. It deliberately shares no code with ``unityagents``.
"""
import json
import os
import socket
import sys
import time


def main() -> int:
    port = int(sys.argv[sys.argv.index("--port") + 1])
    script_path = os.environ["FAKE_UNITY_SCRIPT"]
    with open(script_path + ".pid", "w") as f:
        f.write(str(os.getpid()))
    with open(script_path) as f:
        ops = json.load(f)
    transcript = bytearray()
    sock = None
    try:
        for op in ops:
            if "exit" in op:
                return op["exit"]
            if sock is None and ("send" in op or "recv" in op):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if "send" in op:
                data = op["send"].encode("latin-1")
                if "trickle" in op:
                    for i in range(len(data)):
                        sock.sendall(data[i:i + 1])
                        time.sleep(op["trickle"])
                    continue
                k = max(1, int(op.get("chunks", 1)))
                size = -(-len(data) // k)
                for i in range(0, len(data), size):
                    sock.sendall(data[i:i + size])
                    if k > 1:
                        time.sleep(0.01)
            elif "recv" in op:
                want = op["recv"]
                got = bytearray()
                while len(got) < want:
                    chunk = sock.recv(want - len(got))
                    if not chunk:
                        break
                    got += chunk
                transcript += got
            elif "sleep" in op:
                time.sleep(op["sleep"])
            elif "close" in op:
                sock.close()
                sock = None
        if sock is not None:  # wait for EXIT (or the client going away) like Unity would
            sock.settimeout(10)
            try:
                while True:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    transcript += chunk
                    if transcript.endswith(b"EXIT"):
                        break
            except OSError:
                pass
        return 0
    finally:
        with open(script_path + ".transcript", "wb") as f:
            f.write(bytes(transcript))


if __name__ == "__main__":
    sys.exit(main())
