"""A LocalServer never outlives the process that started it, and never takes another process's answer for its
own: a killed parent takes its server with it, and a fixed port another process listens on is reported as
taken instead of "ready" (the other process would answer the health check)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.backends.servers import LocalServer
from harness.core.errors import ServerStartError

from cached_models import cached_model

sys.path.insert(0, str(Path(__file__).parent))
from hostile_server import HostileServer, raw_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", ["llama-server", "llama-cpp-python"])
def test_a_fixed_port_another_process_answers_on_is_reported_taken(tmp_path, kind):
    with HostileServer(raw_json('{"status": "ok"}')) as other:     # answers every health check with 200
        server = LocalServer(kind, tmp_path / "model.gguf", port=other.server_address[1],
                             log_path=tmp_path / "server.log")
        with pytest.raises(ServerStartError, match=f"port {other.server_address[1]} is taken"):
            server.start()
    assert not server.running


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


PARENT = """
import json, sys, time
from harness.backends.servers import LocalServer
server = LocalServer("llama-cpp-python", sys.argv[1], log_path=sys.argv[2]).start()
print(json.dumps({"pid": server.pid, "url": server.base_url}), flush=True)
time.sleep(3600)
"""


@pytest.mark.live
def test_a_server_dies_with_its_killed_parent(tmp_path):
    model = cached_model("smollm2-135m-instruct-q4_1")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(model), str(tmp_path / "server.log")],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        started = json.loads(parent.stdout.readline())
        assert _state(started["pid"]) not in (None, "Z")
        parent.send_signal(signal.SIGKILL)           # no atexit, no finally: only the kernel can end the server
        parent.wait()
        for _ in range(600):                          # a hang guard, not a measurement
            if _state(started["pid"]) in (None, "Z"):
                break
            time.sleep(0.1)
        assert _state(started["pid"]) in (None, "Z"), "the server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if _state(started["pid"]) not in (None, "Z"):
            os.kill(started["pid"], signal.SIGKILL)


def test_an_impostor_on_the_picked_port_is_not_taken_for_the_server(tmp_path, monkeypatch):
    # The impostor wins the race for the port the server was given: it listens first and answers every health
    # check with 200, while our child fails to bind. Every pick lands on it, so each try meets it.
    import harness.backends.servers as servers
    with HostileServer(raw_json('{"data": []}')) as other:
        port = other.server_address[1]
        monkeypatch.setattr(servers, "free_port", lambda: port)
        server = LocalServer("llama-cpp-python", tmp_path / "model.gguf", log_path=tmp_path / "server.log")
        with pytest.raises(ServerStartError, match=f"port {port} is taken: another process listens on "
                                                   rf"127.0.0.1:{port} \({os.getpid()} \("):
            server.start()
    assert not server.running


TIED_PARENT = """
import subprocess, sys, time
from harness.backends.servers import tied_command
child = subprocess.Popen(tied_command(["sleep", "3600"]))
time.sleep(0.2)
print(child.pid, flush=True)
time.sleep(3600)
"""


def test_a_tied_command_keeps_its_pid_and_dies_with_its_killed_parent():
    # What LocalServer starts every server through (no preexec_fn: no Python runs between fork and exec, so a
    # server started from a worker thread cannot hang on a lock another thread held at the fork).
    parent = subprocess.Popen([sys.executable, "-c", TIED_PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    pid = None
    try:
        pid = int(parent.stdout.readline())
        for _ in range(600):                          # a hang guard, not a measurement: the exec is under way
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == b"sleep":
                break
            time.sleep(0.1)
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"3600"]
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        for _ in range(600):                          # a hang guard, not a measurement
            if _state(pid) in (None, "Z"):
                break
            time.sleep(0.1)
        assert _state(pid) in (None, "Z"), "the command outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pid and _state(pid) not in (None, "Z"):
            os.kill(pid, signal.SIGKILL)


def test_a_tied_command_whose_parent_is_gone_or_which_cannot_run_says_so(tmp_path):
    from harness.backends.servers import tied_command
    gone = subprocess.run(tied_command(["touch", str(tmp_path / "never")], parent=1), capture_output=True, text=True)
    assert gone.returncode == 1 and not (tmp_path / "never").exists()
    missing = subprocess.run(tied_command(["/nonexistent/llama-server", "--port", "1"]), capture_output=True,
                             text=True)
    assert missing.returncode == 127
    assert "cannot run /nonexistent/llama-server: [Errno 2] No such file or directory" in missing.stderr


def test_a_server_is_started_without_python_between_fork_and_exec(tmp_path, monkeypatch):
    import harness.backends.servers as servers
    seen = {}

    class Spawned(Exception):
        pass

    def popen(command, **kwargs):
        seen.update(kwargs, command=command)
        raise Spawned

    monkeypatch.setattr(servers.subprocess, "Popen", popen)
    server = LocalServer("llama-server", tmp_path / "model.gguf", binary=tmp_path / "llama-server",
                         log_path=tmp_path / "server.log")
    with pytest.raises(Spawned):
        server.start()
    assert seen.get("preexec_fn") is None
    assert seen["command"][:5] == [sys.executable, "-I", "-S", str(servers.TIED_EXEC), str(os.getpid())]
    assert seen["command"][5] == str(tmp_path / "llama-server")
