"""A native crash of a run says where it happened: every thread's Python stack, then the abort."""
import os
import signal
import subprocess
import sys

from tests.conftest import ROOT

ABORT = """
import ctypes, threading
from runner.stopping import install_signal_handlers

install_signal_handlers()
threading.Thread(target=threading.Event().wait, name="beside", daemon=True).start()

def native_code_aborts():
    ctypes.CDLL(None).abort()  # as glibc does when it finds its heap corrupted

native_code_aborts()
"""


def test_a_native_abort_prints_every_threads_python_stack():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, "-c", ABORT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr)
    assert "Fatal Python error: Aborted" in proc.stderr, proc.stderr
    assert "native_code_aborts" in proc.stderr, proc.stderr  # the main thread's stack
    assert "Current thread 0x" in proc.stderr and "\nThread 0x" in proc.stderr, proc.stderr  # and the one beside


def test_a_stderr_without_a_file_descriptor_leaves_the_report_off(monkeypatch):
    import faulthandler
    import io

    from runner import stopping

    was = faulthandler.is_enabled()
    faulthandler.disable()
    try:
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        assert stopping.report_native_crashes() is False
    finally:
        if was:
            faulthandler.enable(file=sys.__stderr__, all_threads=True)
