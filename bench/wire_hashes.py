"""Hash every byte Python sends to a built-in scene over 30 seeded training steps (with updates).

A before/after check of a change that must not alter behaviour: run it in the root of each
checkout (it imports the code of the working directory, so the same script serves an older
checkout) and compare the lines; ``bench/compare_exports.py`` compares the exported graphs' ops
and weights, whose files differ byte-wise from run to run::

    cd <checkout> && python <this file> <scene> <api2|grpc> <outdir>

``CONFIG=<yaml>`` trains with another configuration (SAC's), ``BRAINS=A,B`` shrinks more brains'
buffers (Tennis, PushCollab, Pyramids), ``STEPS`` sets the number of steps, and ``SENDS`` hashes only
the first SENDS sends: the run stops once ``STEPS`` steps are learnt from, so where the last step's
experience waits for the next send (``TrainerController._experience_can_wait``) one more step goes
out, and the common prefix is what compares.

Prints ``RESULT scene protocol exit sha256(every byte sent, first 16 hex) sends sha(.bytes)
sha(.onnx)``. Small buffers (64) make PPO update within the 30 steps, so the actions sent after
an update are hashed too; Hallway is recurrent (API-2 carries its memories).
"""
import glob
import hashlib
import os
import socket
import sys

import yaml

sys.path.insert(0, os.getcwd())
scene, protocol, out = sys.argv[1:4]
STEPS = int(os.environ.get("STEPS", "30"))
SENDS = int(os.environ.get("SENDS", "1000000"))  # hash only the first SENDS sends
h = hashlib.sha256()
count = [0]
from unityagents.wire import api2_stream, grpc_server  # noqa: E402


def hashing(cls, name):
    """``cls.name(self, data)`` that hashes ``data`` first: every byte Python sends, in order."""
    original = getattr(cls, name)

    def sends(self, data):
        if count[0] < SENDS:
            h.update(bytes(data))
        count[0] += 1
        return original(self, data)

    setattr(cls, name, sends)


hashing(api2_stream.Connection, "send")  # API-2: every token, frame and length prefix
hashing(grpc_server.ExchangeServer, "answer")  # gRPC: every reply message
from runner.controller import TrainerController  # noqa: E402

TrainerController._keep_going = lambda self: self.global_step < STEPS
ROOT = os.getcwd()
# CONFIG: another learn.py YAML (e.g. config/sac/3DBall.yaml); BRAINS: more brains to shrink.
cfg = yaml.safe_load(open(os.path.join(ROOT, os.environ.get("CONFIG", "trainer_configurations.yaml"))))
small = {"default", "Ball3DBrain", "BasicBrain", "GridWorldBrain", "HallwayBrain",
         *filter(None, os.environ.get("BRAINS", "").split(","))}
for k, v in cfg.items():
    if isinstance(v, dict) and v.get("trainer") == "sac":
        v.update(buffer_init_steps=0, batch_size=32)  # SAC updates from the first steps
        if v.get("use_recurrent") and protocol == "grpc":
            v.setdefault("memory_size", 32)  # a modern scene keeps no memory for its agents: the trainer sizes it
    elif isinstance(v, dict) and v.get("is_imitation"):
        v.update(batch_size=32, buffer_size=256)
    elif isinstance(v, dict) and k in small:
        v.update(buffer_size=64, batch_size=32, time_horizon=16)
        if v.get("use_recurrent") or k == "default":
            v["sequence_length"] = 8
        if v.get("use_recurrent") and protocol == "grpc":
            v["memory_size"] = 32
os.makedirs(out, exist_ok=True)
path = os.path.join(out, "cfg.yaml")
yaml.safe_dump(cfg, open(path, "w"))
import learn  # noqa: E402

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
os.chdir(out)
code = learn.main([scene, "--train", "--trainer-config", path, "--seed", "3", "--protocol", protocol,
                   "--run-path", f"r_{scene}_{protocol}", "--base-port", str(port)])
def fh(pattern):
    hh = hashlib.sha256()
    files = sorted(glob.glob(pattern, recursive=True))
    for f in files:
        hh.update(open(f, "rb").read())
    return hh.hexdigest()[:16] + f"({len(files)})"
print("RESULT", scene, protocol, code, h.hexdigest()[:16], count[0], fh(f"models/r_{scene}_{protocol}/*.bytes"),
      fh(f"models/r_{scene}_{protocol}/**/*.onnx"), flush=True)
