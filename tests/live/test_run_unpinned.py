"""`harness run` beyond the pins: a served model behind an OpenAI-compatible server (--endpoint, the strict path
through /v1/completions) and an unpinned local GGUF (--model path.gguf, its SHA-256 recorded)."""

import json
import subprocess
import sys

import pytest

from harness.backends.base import Backend
from harness.backends.servers import LocalServer
from harness.core.replies import Generation, Timings
from harness.live.opening import LLAMA_CPP_CHATML
from harness.pins.sources import load_sources

from cached_models import cached_model

SMOL = "smollm2-135m-instruct-q4_1"


@pytest.fixture
def smol():
    return load_sources().model(SMOL), cached_model(SMOL)


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True)


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.live
def test_a_served_model_runs_the_scenarios_on_the_strict_path(tmp_path, smol):
    _, path = smol
    with LocalServer("llama-cpp-python", path, alias=SMOL, log_path=tmp_path / "server.log") as server:
        done = harness("run", "--endpoint", server.base_url, "--served-model", SMOL, "--template", f"gguf-{SMOL}",
                       "--scenario", "greeting", "--scenario", "get-time", "--samples", "2", "--in-flight", "1",
                       "--results-dir", tmp_path)
    assert done.returncode == 0, done.stderr
    # Kept by runtime, beside (not among) the in-process samples of the pinned model the server was named after.
    served = f"{SMOL}--llama-cpp-python"
    written = records(tmp_path / "transcripts" / f"{served}.jsonl")
    model = [r for r in written if r["kind"] == "model"]
    samples = [r for r in written if r["kind"] == "sample"]
    assert model[0]["model"]["sha256"] == "served" and server.base_url in model[0]["model"]["file"]
    assert model[0]["template"]["source"] == f"sources.json:gguf-{SMOL}"
    assert model[0]["runtime"] == {"name": "llama-cpp-python", "endpoints": [server.base_url], "served_model": SMOL}
    assert sorted((s["scenario"]["name"], s["sample"]) for s in samples) == [
        ("get-time", 0), ("get-time", 1), ("greeting", 0), ("greeting", 1)]
    assert all(s["turns"][0]["steps"][0]["reply"] for s in samples) and not any(s["error"] for s in samples)
    report = harness("report", "--results-dir", tmp_path, "--no-plot")
    assert report.returncode == 0 and (tmp_path / f"{served}.md").is_file(), report.stderr


def test_a_served_model_refuses_modes_that_need_the_sampler_here(tmp_path):
    done = harness("run", "--endpoint", "http://127.0.0.1:9", "--served-model", "m", "--template",
                   "Qwen-Qwen2.5-7B-Instruct", "--mode", "grammar", "--results-dir", tmp_path)
    assert done.returncode == 2 and "native mode only" in done.stderr


@pytest.mark.live
def test_an_unpinned_gguf_is_run_with_its_hash_recorded(tmp_path, smol):
    pin, path = smol
    done = harness("run", "--model", path, "--scenario", "greeting", "--samples", "1", "--mode", "native",
                   "--results-dir", tmp_path)
    assert done.returncode == 0, done.stderr
    (transcript,) = (tmp_path / "transcripts").glob("*.jsonl")
    assert transcript.stem == path.stem.replace("/", "--")
    written = records(transcript)
    assert [r["model"]["sha256"] for r in written] == [pin.sha256, pin.sha256]   # model record, then the sample


class Canned(Backend):
    """A model file "loaded" in process that answers every prompt with one greeting: what a run records of an
    unpinned GGUF without the binding."""
    name = "canned"
    loads_model_files = True

    @classmethod
    def load(cls, path, *, n_ctx, n_threads=None):
        return cls()

    def embedded_template(self):
        return LLAMA_CPP_CHATML

    def special_tokens(self):
        return "", "<|im_end|>"

    def complete(self, prompt, sampling, seed, grammar=None, *, bos_token="", timeout=None):
        return Generation("Hello!", [], 3, 1, "stop", Timings(0.0, 0.0, 0.0), seed)


def _gguf(folder, content: bytes):
    folder.mkdir()
    path = folder / "x.gguf"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("second", ["other bytes", "same bytes"])
def test_two_model_files_of_one_name_are_known_by_their_hash(tmp_path, second):
    """q4/x.gguf and q8/x.gguf both map to transcripts/x.jsonl: a second file of other bytes is refused, naming
    both hashes and a way out, and nothing of it is written; the same bytes in another folder are the same model
    and resume."""
    from harness.core.errors import SourcesError
    from harness.evaluation.scenario_files import load_scenarios
    from harness.storage.transcripts import read_transcript
    from harness.live.opening import open_gguf
    from harness.live.runner import run_model

    scenarios = load_scenarios(names=["greeting"])
    first = _gguf(tmp_path / "q4", b"GGUF q4 weights")
    other = _gguf(tmp_path / "q8", b"GGUF q8 weights" if second == "other bytes" else b"GGUF q4 weights")
    results = tmp_path / "results"

    def run(path):
        model = open_gguf(path, backend_cls=Canned)
        return model, run_model(model.id, scenarios, 1, 0, sources=load_sources(), results_dir=results,
                                model=model, warn=lambda message: None)

    q4, done = run(first)
    assert done["ran"] == 1
    transcript = results / "transcripts" / "x.jsonl"
    before = transcript.read_bytes()
    if second == "same bytes":
        assert run(other)[1]["skipped"] == 1 and transcript.read_bytes() == before
        return
    q8 = open_gguf(other, backend_cls=Canned)
    with pytest.raises(SourcesError) as refused:
        run_model(q8.id, scenarios, 1, 0, sources=load_sources(), results_dir=results, model=q8,
                  warn=lambda message: None)
    said = str(refused.value)
    assert q4.sha256 in said and q8.sha256 in said and "--results-dir" in said and "rename the file" in said
    assert transcript.read_bytes() == before
    assert {r.model.sha256 for r in read_transcript(transcript).records} == {q4.sha256}
