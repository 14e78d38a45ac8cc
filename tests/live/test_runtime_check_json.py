"""`harness runtime-check --json`: the pairs it checked, machine-readable, from a real llama-server."""

import json
import subprocess
import sys

import pytest

from harness.backends.servers import LocalServer

from cached_models import cached_model

SMOL = "smollm2-135m-instruct-q4_1"


@pytest.mark.live
@pytest.mark.needs_server
def test_runtime_check_prints_its_pairs_as_json(tmp_path):
    path = cached_model(SMOL)
    with LocalServer("llama-server", path, alias=SMOL, log_path=tmp_path / "server.log") as server:
        done = subprocess.run([sys.executable, "-m", "harness", "runtime-check", "--endpoint", server.base_url,
                               "--served-model", SMOL, "--template", f"gguf-{SMOL}", "--runtime", "llama-server",
                               "--scenario", "greeting", "--results-dir", str(tmp_path), "--json"],
                              capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["runtime"], out["checked"], out["already_recorded"]) == ("llama-server", 1, 0)
    assert sum(out["labels"].values()) == 1 and out["pairs"][0]["scenario"] == "greeting"
    assert out["records"] == str(tmp_path / "runtimes" / "llama-server.jsonl")
