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
