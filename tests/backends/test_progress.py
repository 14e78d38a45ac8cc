"""harness.backends.progress: the CPU a server's process tree used, read from /proc."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.progress import cpu_seconds

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")

# A parent that runs a worker computing 0.5 CPU s, reaps it, says so, and waits: the way a server hands a request
# to a short-lived worker process.
PARENT = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time\\nwhile time.process_time() < 0.5: pass"], check=True)
print("reaped", flush=True)
sys.stdin.read()
"""


def test_a_worker_that_ended_still_counts_in_its_parent():
    """Without the reaped children's time the sum would fall when a worker ends mid-request, and a computing
    server would be judged hung."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout.readline().strip() == "reaped"
        assert cpu_seconds(parent.pid) >= 0.45   # the worker's 0.5 s, to a clock tick
    finally:
        parent.stdin.close()
        parent.wait()
    assert cpu_seconds(parent.pid) is None       # gone: nothing to tell


def test_no_pid_tells_nothing():
    assert cpu_seconds(None) is None
