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
