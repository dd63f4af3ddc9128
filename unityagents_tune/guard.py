"""``python -m unityagents_tune.guard <parent pid> <unityagents-learn arguments>``: a trial's run, tied to its parent.

A trial's ``unityagents-learn`` runs in a process group of its own with its environments. When the
process that started it goes away without stopping it (a sweep killed with SIGKILL, a lost Ray
worker), the run ends too, with the SIGTERM a stop sends (it saves first), so no orphan keeps
training or holding ports.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import List

#: How a trial's command line names this module (``python -m unityagents_tune.guard ...``).
MODULE = "unityagents_tune.guard"


def running(folder: str) -> List[int]:
    """The process ids of the trial runs still alive whose command line names ``folder`` (a sweep's
    trials folder): what must be none once their sweep is gone."""
    alive = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    line = f.read()
            except OSError:
                continue
            if MODULE.encode() in line and folder.encode() in line:
                alive.append(int(pid))
    return alive


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.killpg(os.getpgrp(), signal.SIGTERM)


def main() -> None:
    parent = int(sys.argv[1])
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="parent-watch").start()
    import learn_r22

    sys.exit(learn_r22.main(sys.argv[2:]))


if __name__ == "__main__":
    main()
