"""A 'Unity build' that records what it receives: the academy serving a scene over gRPC, as an
executable file, writing the actions of every message it takes to a JSON-lines file.

The actions are read on the Unity side, after the wire (``ModernUnity._apply_actions``), so a test
compares what the trainer sampled or an export computed with what a Unity build would execute.
"""
from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import List, Tuple

import numpy as np

from tests.conftest import ROOT

SCRIPT = """#!{python}
import json, sys
sys.path.insert(0, {root!r})
from academy import grpc_communicator
from academy.__main__ import main

record = open({record!r}, "w")
receive = grpc_communicator.ModernUnity._apply_actions


def recording(self, rl):
    record.write(json.dumps({{name: {{"continuous": [list(a.continuous_actions) for a in actions.value],
                                     "discrete": [list(a.discrete_actions) for a in actions.value]}}
                              for name, actions in rl.agent_actions.items()}}) + "\\n")
    record.flush()
    receive(self, rl)


grpc_communicator.ModernUnity._apply_actions = recording
sys.exit(main([{scene!r}] + sys.argv[1:]))
"""


def recording_build(tmp_path: Path, scene: str) -> Tuple[str, Path]:
    """(the build's path, the file it records to): a Linux build of ``scene`` for ``UnityEnvironment``."""
    record = tmp_path / "received.jsonl"
    build = tmp_path / f"{scene}.x86_64"
    build.write_text(SCRIPT.format(python=sys.executable, root=ROOT, record=str(record), scene=scene))
    build.chmod(build.stat().st_mode | stat.S_IXUSR)
    return str(build), record


def received_actions(record: Path, behavior: str) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Per message the build received: ``behaviour``'s (continuous, discrete) actions, one row per agent."""
    out = []
    for line in record.read_text().splitlines():
        actions = json.loads(line)[behavior]
        out.append((np.asarray(actions["continuous"], np.float64), np.asarray(actions["discrete"], np.int64)))
    return out
