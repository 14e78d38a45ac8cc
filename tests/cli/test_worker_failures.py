"""A worker in an environment of its own (the peers' parsers, transformers in the vLLM environment) that dies or
breaks its protocol is the command's error, one line naming the worker, never a traceback: its errors are
HarnessErrors (and still RuntimeErrors, as they were). Each worker here is a small script run by this python."""

import subprocess
import sys

import pytest

from harness import peers
from harness.core.errors import HarnessError, HFWorkerError, PeerError
from harness.peers import vllm_cpu

# What a broken worker does with the first request: die before reading it, die reading it, answer a line that
# is not JSON (a traceback printed to stdout), answer JSON that is not an object, answer another request's id.
BROKEN_WORKERS = {
    "dies-at-once": "import sys\nsys.exit(3)\n",
    "dies-on-the-request": "import sys\nsys.stdin.readline()\nsys.exit(4)\n",
    "answers-not-json": "import sys\nsys.stdin.readline()\nprint('Traceback (most recent call last):', flush=True)\n"
                        "sys.stdin.readline()\n",
    "answers-not-an-object": "import sys\nsys.stdin.readline()\nprint('[1, 2]', flush=True)\nsys.stdin.readline()\n",
    "answers-another-id": "import sys\nsys.stdin.readline()\nprint('{\"id\": 99}', flush=True)\nsys.stdin.readline()\n",
}
WORKERS = {"peers": (peers, "WORKER", peers.Peers, PeerError, "the peers worker"),
           "hf": (vllm_cpu, "HF_WORKER", vllm_cpu.HFWorker, HFWorkerError, "the HF worker")}


@pytest.mark.parametrize("behaviour", sorted(BROKEN_WORKERS))
@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_a_broken_worker_raises_its_harness_error(tmp_path, monkeypatch, worker, behaviour):
    module, attribute, cls, error, name = WORKERS[worker]
    script = tmp_path / "worker.py"
    script.write_text(BROKEN_WORKERS[behaviour], encoding="utf-8")
    monkeypatch.setattr(module, attribute, script)
    with pytest.raises(error) as raised, cls(sys.executable) as running:
        running.ask({"op": "hello"})
    assert isinstance(raised.value, HarnessError) and isinstance(raised.value, RuntimeError)
    assert str(raised.value).startswith(name)


# `harness parser-agreement` with the peers environment's python replaced by a worker that dies at once.
DEAD_PEERS = ("import sys, harness.peers as p; p.peers_python = lambda: sys.executable; p.WORKER = sys.argv.pop(1); "
              "from harness.cli import main; sys.exit(main(sys.argv[1:]))")


def test_a_dead_peers_worker_is_one_line_from_the_command(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(BROKEN_WORKERS["dies-on-the-request"], encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", DEAD_PEERS, str(script), "parser-agreement", "--template",
                           "gguf-qwen2.5-coder-0.5b-instruct-q4_k_m", "--project", "vllm", "--results-dir",
                           str(tmp_path / "results")], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr == "harness parser-agreement: the peers worker exited (code 4) on request 1\n"
