"""scripts/build_llama_server.sh, when another build holds its lock: it says that it waits, on which lock file
and for whom, instead of waiting silently for the half hour a build takes."""

import fcntl
import os
import select
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Only against a hang: a script that waits silently would never write the line.
HANG_GUARD = 300


def test_a_build_waiting_on_another_says_on_what_and_for_whom(tmp_path):
    env = dict(os.environ, HARNESS_CACHE=str(tmp_path / "cache"), PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    dest = subprocess.run([sys.executable, "-c", "from harness.backends import servers; "
                           "print(servers.llama_server_dir())"], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()
    lock = Path(dest + ".lock")
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("pid 4242 (another build) since 2026-01-01T00:00:00Z\n")
        held.flush()
        build = subprocess.Popen(["bash", str(ROOT / "scripts" / "build_llama_server.sh")], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # It blocks on the lock right after saying so.
            ready, _, _ = select.select([build.stderr], [], [], HANG_GUARD)
            said = build.stderr.readline() if ready else "(nothing said while waiting)"
        finally:
            build.kill()
            build.wait()
            build.stdout.close()
            build.stderr.close()
    assert said.startswith(f"waiting for another build of llama-server to finish: {lock} is locked by pid 4242 "
                           "(another build)"), said
