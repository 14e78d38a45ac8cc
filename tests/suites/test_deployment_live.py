"""`harness deployment` on a real model served by llama-server: started by the harness (--server) and served by
the user (--endpoint --name); every record holds both answers and the strict parse of what the model generated,
and a second run resumes past what is recorded. Skipped with the command that fetches the model or builds the
server when either is missing."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.servers import LocalServer

from cached_models import cached_model

MODEL = "smollm2-135m-instruct-q4_1"      # the smallest reachable model: two cases take seconds
CASES = ["simple_python_6", "irrelevance_93"]


def deployment(results, *args):
    command = [sys.executable, "-m", "harness", "deployment", "--model", MODEL, "--results-dir", str(results), *args]
    for case in CASES:
        command += ["--case", case]
    return subprocess.run(command, capture_output=True, text=True)


def records(results):
    path = results / "deployment" / f"{MODEL}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.live
@pytest.mark.needs_server
def test_llama_server_started_by_the_harness_answers_every_request_and_a_rerun_resumes(tmp_path):
    cached_model(MODEL)
    results = tmp_path / "results"
    done = deployment(results, "--server", "llama-server")
    assert done.returncode == 0, done.stderr
    got = records(results)
    # simple_python_6 auto and required, irrelevance_93 auto: one record each, both answers in it.
    assert sorted((r["case"]["id"], r["tool_choice"]) for r in got) == [
        ("irrelevance_93", "auto"), ("simple_python_6", "auto"), ("simple_python_6", "required")]
    for r in got:
        assert r["runtime"] == "llama-server-0.3.36-vendored" and r["model"]["sha256"]
        assert r["plain"]["status"] == 200 and r["stream"]["status"] == 200, r["details"]
        assert isinstance(r["plain"]["generated"], str) and r["strict"] is not None     # the strict path
        assert r["prompt"]["tokens"] > 0 and r["labels"]
    again = deployment(results, "--server", "llama-server")
    assert again.returncode == 0 and "0 record(s) written, 3 already recorded" in again.stdout
    assert len(records(results)) == 3


@pytest.mark.live
@pytest.mark.needs_server
def test_a_users_own_server_gets_its_own_row_with_one_command(tmp_path):
    results = tmp_path / "results"
    server = LocalServer("llama-server", cached_model(MODEL), alias="my-model", log_path=tmp_path / "s.log").start()
    try:
        done = deployment(results, "--endpoint", server.base_url, "--name", "my-llama", "--served-model",
                          "my-model")
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    got = records(results)
    assert len(got) == 3 and {r["runtime"] for r in got} == {"my-llama"}
    assert {r["server"] for r in got} == {"endpoint"} and all(r["model"]["sha256"] is None for r in got)
    # Recognised as llama-server at the URL (its /props): the strict path is asked there too.
    assert all(r["strict"] is not None for r in got)


def test_a_dead_endpoint_is_a_usage_error_before_any_request(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "deployment", "--model", MODEL, "--endpoint",
                           "http://127.0.0.1:9", "--name", "nothing", "--results-dir", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "does not answer" in done.stderr
    assert not (tmp_path / "deployment").exists()


@pytest.mark.live
@pytest.mark.needs_server
def test_a_runtime_that_refuses_the_model_at_start_is_a_row_with_its_words(tmp_path, monkeypatch):
    """llama-server given a GGUF cut short exits before it is ready: every request of the run is recorded as the
    runtime error it is, with the server's own last words and no folder of this machine in them; a second run
    asks nothing again."""
    from harness.core import constants
    from harness.storage.results import ResultsDir
    from harness.suites.deployment import driver

    whole = cached_model(MODEL)
    cut = tmp_path / "models" / whole.name
    cut.parent.mkdir()
    cut.write_bytes(whole.read_bytes()[: 1 << 20])
    monkeypatch.setattr(driver, "model_path", lambda model_id: cut)
    results = ResultsDir.at(tmp_path / "results")
    out = driver.run(MODEL, results, server="llama-server", only=set(CASES), log=lambda record: None)
    assert len(out.written) == 3 and not out.failed
    for r in records(tmp_path / "results"):
        assert r["labels"] == ["runtime-error"], r["labels"]
        words = r["plain"]["error"]
        assert words.startswith("the runtime refused the model at start: llama-server exited with"), words
        assert str(tmp_path) not in words and f"(model {whole.name})" in words
        assert str(constants.CACHE_DIR) not in words
    assert driver.run(MODEL, results, server="llama-server", only=set(CASES)).already == 3


def test_a_runtime_that_takes_no_template_file_is_not_started_on_a_gguf_that_embeds_none(tmp_path):
    """gemma-3-270m's GGUF embeds no template; llama-cpp-python's server takes no template file, so it would
    prompt with a fallback of its own: refused in one line, nothing recorded."""
    cached_model("gemma-3-270m-q4_k_m")
    done = subprocess.run([sys.executable, "-m", "harness", "deployment", "--model", "gemma-3-270m-q4_k_m",
                           "--server", "llama-cpp-python", "--case", "simple_python_6", "--results-dir",
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "llama-cpp-python takes no chat template file" in done.stderr and "google-gemma-2-2b-it" in done.stderr
    assert not list(tmp_path.rglob("*.jsonl"))


@pytest.mark.live
@pytest.mark.needs_server
def test_the_served_text_parts_from_the_in_process_one_only_by_flash_attention_and_the_penalty_window():
    """tools/served_vs_in_process.py: with llama-server's flash attention off and no repeat penalty on either side,
    the served model writes exactly the in-process text on every drawn case (what the deployment suite's README
    says of the agreement column)."""
    cached_model(MODEL)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "tools" / "served_vs_in_process.py"), "--model", MODEL,
                           "--cases", "1", "--max-tokens", "48"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    counts = {line.split(": ")[1]: line.split(": the same text in ")[1] for line in done.stdout.splitlines()
              if line.startswith(f"{MODEL}: ")}
    assert counts["flash attention off, no repeat penalty"] == "11/11 cases", done.stdout
    assert set(counts) == {"as run", "server flash attention off", "flash attention off, no repeat penalty"}
