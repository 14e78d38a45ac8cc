"""`harness runtime-check` against a real llama-cpp-python server on 127.0.0.1: both paths recorded and
labelled, a server killed mid-run loses nothing, and the run resumes where it stopped."""

import json
import subprocess
import sys
import time

import pytest

from harness.backends.servers import LocalServer

from cached_models import cached_model

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
SCENARIOS = ["greeting", "name-recall", "get-time"]


@pytest.fixture
def model_file():
    return cached_model(MODEL)


def check(server, results, *scenarios, background=False):
    args = [sys.executable, "-m", "harness", "runtime-check", "--endpoint", server.base_url, "--served-model",
            server.model, "--template", f"gguf-{MODEL}", "--runtime", "llama-cpp-python", "--results-dir",
            str(results), "--retries", "0", "--timeout", "120"]
    for name in scenarios:
        args += ["--scenario", name]
    if background:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(args, capture_output=True, text=True)


def records(results):
    path = results / "runtimes" / "llama-cpp-python.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.mark.live
def test_both_paths_are_recorded_with_a_label_and_a_killed_server_loses_nothing(tmp_path, model_file):
    results = tmp_path / "results"
    server = LocalServer("llama-cpp-python", model_file, alias=MODEL, log_path=tmp_path / "server.log").start()
    try:
        run = check(server, results, *SCENARIOS, background=True)
        deadline = time.monotonic() + 300
        while not records(results) and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.2)
        server.kill()                                   # mid-run: at least one pair landed, the rest cannot
        _, err = run.communicate(timeout=300)
        landed = records(results)
        assert landed and run.returncode != 0, err
        server.start()                                  # a new process; the run resumes from the records
        done = check(server, results, *SCENARIOS)
        assert done.returncode == 0, done.stderr
        assert f"{len(landed)} already recorded" in done.stdout
    finally:
        server.stop()
    final = records(results)
    assert sorted(r["scenario"]["name"] for r in final) == sorted(SCENARIOS)       # each once, none lost
    for r in final:
        assert r["served_model"] == MODEL and r["strict"]["reply"] and r["label"]
        # llama-cpp-python renders the GGUF's template as we do: the same prompt, token for token.
        assert r["strict"]["prompt_tokens"] == r["runtime_reply"]["prompt_tokens"]
        # It returns no tool_calls on its own (no chat handler for this template parses calls), so whatever the
        # strict parser reads as a call is a call the runtime dropped.
        assert r["runtime_reply"]["tool_calls"] == []
        assert (r["label"] == "runtime-dropped-call") == bool(r["strict"]["parse"]["calls"])
    report = subprocess.run([sys.executable, "-m", "harness", "report", "--results-dir", str(results), "--no-plot"],
                            capture_output=True, text=True)
    assert "| llama-cpp-python | " + MODEL in (results / "runtime-agreement.md").read_text(), report.stderr


@pytest.mark.live
@pytest.mark.needs_server
def test_llama_server_is_compared_prompt_for_prompt_two_requests_at_a_time(tmp_path, model_file):
    from harness.evaluation.judging import label_head as label_family
    from harness.suites.runtime_check.judging import LABELS
    results = tmp_path / "results"
    with LocalServer("llama-server", model_file, alias=MODEL, parallel=2, log_path=tmp_path / "server.log") as server:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "runtime-check", "--endpoint", server.base_url, "--served-model", MODEL,
             "--template", f"gguf-{MODEL}", "--runtime", "llama-server", "--results-dir", str(results),
             "--in-flight", "2", *sum((["--scenario", s] for s in SCENARIOS), [])], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    final = [json.loads(line) for line in (results / "runtimes" / "llama-server.jsonl").read_text().splitlines()]
    assert sorted(r["scenario"]["name"] for r in final) == sorted(SCENARIOS)
    for r in final:
        # llama-server shows its own render (/apply-template): the comparison is exact, not by length.
        assert r["runtime_reply"]["same_prompt"] in (True, False) and label_family(r["label"]) in LABELS
        assert r["strict"]["reply"] and r["strict"]["finish_reason"] in ("stop", "length")
