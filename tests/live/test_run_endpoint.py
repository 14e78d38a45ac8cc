"""`harness run --endpoint` as a new user meets it, against real HTTP servers on 127.0.0.1: a dead or mistyped
endpoint stops the run before any sample, a sample that could not generate is not done (exit 1, asked again by
the next run), and a served model's samples are kept apart from the in-process ones of the same name."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import HostileServer, completion, raw_json  # noqa: E402

PINNED = "qwen2.5-coder-0.5b-instruct-q4_k_m"       # a pinned model id, and LocalServer's default alias for it
TEMPLATE = f"gguf-{PINNED}"


def run(results, *endpoint_args):
    args = [sys.executable, "-m", "harness", "run", *endpoint_args, "--served-model", PINNED, "--template",
            TEMPLATE, "--scenario", "greeting", "--samples", "1", "--results-dir", str(results), "--retries", "0",
            "--timeout", "60"]
    return subprocess.run(args, capture_output=True, text=True)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_dead_endpoint_stops_the_run_before_any_sample(tmp_path):
    done = run(tmp_path, "--endpoint", _dead_url())
    assert done.returncode == 2 and "the server does not answer" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "transcripts").exists()


@pytest.mark.parametrize("url,hint", [("notaurl", "did you mean http://notaurl"),
                                      ("localhost:8080", "did you mean http://localhost:8080"),
                                      ("http://", "")])
def test_an_endpoint_that_is_not_a_url_is_a_usage_error(tmp_path, url, hint):
    done = run(tmp_path, "--endpoint", url)
    assert done.returncode == 2 and "is not an http:// or https:// URL" in done.stderr and hint in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "transcripts").exists()


def busy(h):
    if h.command == "GET":                   # the probe and the runtime's name: answered, says nothing
        return raw_json("{}", status=404)(h)
    return raw_json('{"error": "loading"}', status=503)(h)


def test_a_sample_that_could_not_generate_is_asked_again(tmp_path):
    with HostileServer(busy) as server:
        first = run(tmp_path, "--endpoint", server.url)
    assert first.returncode == 1 and "1 could not generate" in first.stdout, first.stdout + first.stderr
    transcript = tmp_path / "transcripts" / f"{PINNED}--served.jsonl"
    errored = [json.loads(line) for line in transcript.read_text().splitlines()][-1]
    assert errored["error"].startswith("generate:") and "HTTP 503" in errored["error"]
    with HostileServer(completion("Hello! How can I help you today?")) as server:
        second = run(tmp_path, "--endpoint", server.url)
    assert second.returncode == 0, second.stderr
    assert "ran 1, already recorded 0" in second.stdout
    samples = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [s["error"] is None for s in samples if s["kind"] == "sample"] == [False, True]


def broken(h):
    if h.command == "GET":
        return raw_json("{}", status=404)(h)
    return raw_json('{"error": "template failed"}', status=500)(h)


def test_a_sample_the_runtime_answered_with_an_error_every_time_is_recorded_once(tmp_path):
    """An HTTP 500 given every time is the runtime's answer: recorded as done (the runtime's finding, failing
    every check), not asked again run after run."""
    for _ in range(2):
        with HostileServer(broken) as server:
            done = run(tmp_path, "--endpoint", server.url)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    transcript = tmp_path / "transcripts" / f"{PINNED}--served.jsonl"
    samples = [r for r in map(json.loads, transcript.read_text().splitlines()) if r["kind"] == "sample"]
    assert len(samples) == 1 and samples[0]["error"].startswith("runtime answered:") and "HTTP 500" in samples[0]["error"]
    assert "ran 0, already recorded 1" in done.stdout


def test_served_samples_are_kept_by_runtime_beside_the_in_process_ones(tmp_path):
    with HostileServer(completion("Hello!")) as server:
        done = run(tmp_path, "--endpoint", server.url, "--runtime", "llama-server-b1")
    assert done.returncode == 0, done.stderr
    # Not transcripts/<PINNED>.jsonl, where the in-process samples of the pinned model are.
    assert sorted(p.name for p in (tmp_path / "transcripts").iterdir()) == [f"{PINNED}--llama-server-b1.jsonl"]
    lines = [json.loads(line) for line in (tmp_path / "transcripts" / f"{PINNED}--llama-server-b1.jsonl")
             .read_text().splitlines()]
    model = next(r for r in lines if r["kind"] == "model")
    assert model["runtime"] == {"name": "llama-server-b1", "endpoints": [server.url], "served_model": PINNED}
    sample = next(r for r in lines if r["kind"] == "sample")
    assert sample["model"] == {"id": f"{PINNED}--llama-server-b1", "sha256": "served"}


@pytest.mark.parametrize("command", [
    ["runtime-check", "--served-model", "m", "--template", TEMPLATE, "--runtime", "r"],
    ["runtime-conformance", "--served-model", "m", "--manifest", "MANIFEST", "--runtime", "r"]])
def test_the_other_endpoint_commands_also_stop_at_a_dead_endpoint(tmp_path, command):
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    args = [a if a != "MANIFEST" else str(manifest) for a in command]
    done = subprocess.run([sys.executable, "-m", "harness", *args, "--endpoint", _dead_url(), "--results-dir",
                           str(tmp_path / "results")], capture_output=True, text=True)
    assert done.returncode == 2 and "the server does not answer" in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


SMOL = "smollm2-135m-instruct-q4_1"


@pytest.mark.live
@pytest.mark.parametrize("kind", ["llama-cpp-python", pytest.param("llama-server", marks=pytest.mark.needs_server)])
def test_a_local_server_s_samples_name_their_runtime(tmp_path, kind):
    from cached_models import cached_model
    from harness.backends.servers import LocalServer

    # Served under the pinned id, which once merged it with the in-process samples of that id.
    with LocalServer(kind, cached_model(SMOL), alias=SMOL, log_path=tmp_path / "server.log") as server:
        done = subprocess.run([sys.executable, "-m", "harness", "run", "--endpoint", server.base_url,
                               "--served-model", server.model, "--template", f"gguf-{SMOL}", "--scenario", "greeting",
                               "--samples", "1", "--results-dir", str(tmp_path / "results")],
                              capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "results" / "transcripts").iterdir()] == [f"{SMOL}--{kind}.jsonl"]


def test_request_flags_without_an_endpoint_are_refused_not_ignored(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", SMOL, "--timeout", "5", "--runtime", "x",
                           "--results-dir", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "--runtime, --timeout: only with --endpoint" in done.stderr, done.stderr
