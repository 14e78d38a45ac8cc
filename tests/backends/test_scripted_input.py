"""What `harness scripted-model` is given: a long reply is spelt without Python's recursion, cases of the wrong
shape are named with their case and field, and what a build will write is said first and refused past a bound
with nothing written."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.suites.runtime_conformance.corpus_file import cases_from_file
from harness.pins.sources import resolve_template
from harness.scripted import vocab_for
from harness.scripted.builder import Turn, build_standin, tensor_bytes
from harness.scripted.plan import _vocabulary_bytes, reply_ids

ROOT = Path(__file__).resolve().parents[2]
QWEN = "Qwen-Qwen2.5-7B-Instruct"


def test_a_reply_of_1200_words_is_spelt_and_ends_the_turn():
    vocab = vocab_for("gpt2")
    text = " ".join(f"word{i % 7}" for i in range(1200))
    ids = reply_ids(vocab, text)
    assert len(ids) > sys.getrecursionlimit() and ids[-1] == vocab.id(vocab.profile.end_of_turn)


def test_spelling_without_repeats_still_gives_up_rather_than_hangs():
    with pytest.raises(ValueError, match="search gave up|without repeating"):
        vocab_for("gpt2").segment("\n" * 300)


def _case(**fields):
    return {"name": "c1", "messages": [{"role": "user", "content": "hi"}], "reply": "Hello", **fields}


@pytest.mark.parametrize("fields, message", [
    ({"reply": "a \ud83d b"}, r"cases\.yaml:1: 'a \\ud83d b' holds a lone surrogate escape"),
    ({"messages": [{"role": "user", "content": "x\udc00"}]}, r"cases\.yaml:1: 'x\\udc00' holds a lone surrogate"),
    ({"tools": 5}, r"0\.tools: case 'c1': tools must be a list of tools, not int"),
    ({"variants": "auto"}, r"0\.variants: case 'c1': variants must be a list of variant names, not str"),
    ({"template_kwargs": [1]}, r"case 'c1': template_kwargs must be a mapping of template variables, not list"),
    ({"name": ["c1"]}, r"0\.name: names are unique text"),
], ids=["surrogate-reply", "surrogate-message", "tools-int", "variants-text", "kwargs-list", "name-list"])
def test_a_case_of_the_wrong_shape_is_named_with_its_case_and_field(tmp_path, fields, message):
    path = tmp_path / "cases.yaml"
    path.write_text(json.dumps([_case(**fields)]), encoding="utf-8")     # JSON is YAML, and writes \ud83d as is
    with pytest.raises(HarnessError, match=message):
        cases_from_file(path, resolve_template(QWEN))


def test_the_size_said_first_is_the_size_written(tmp_path):
    vocab = vocab_for("qwen2.5")
    turns = [Turn(12, reply_ids(vocab, "Hello there, how are you?"))]
    template = (ROOT / "templates" / f"{QWEN}.jinja").read_text(encoding="utf-8")
    build_standin(tmp_path / "m.gguf", "qwen2.5", turns, vocab=vocab, template=template, quantized=True)
    said = _vocabulary_bytes("qwen2.5") + len(template.encode()) + tensor_bytes(vocab, turns, True)
    assert abs(said - (tmp_path / "m.gguf").stat().st_size) < 0.01 * said


def test_a_build_past_the_byte_bound_says_its_size_and_writes_nothing(tmp_path):
    cases = [_case(name=f"c{i}", reply=f"Reply number {i}.", messages=[{"role": "user", "content": "hi " * i}])
             for i in range(1, 40)]
    (tmp_path / "cases.yaml").write_text(json.dumps(cases), encoding="utf-8")
    out = tmp_path / "models"
    done = subprocess.run([sys.executable, "-m", "harness", "scripted-model", "--template", QWEN, "--cases",
                           tmp_path / "cases.yaml", "--out", out, "--max-bytes", "30000000"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert re.search(r"writing \d+ scripted model\(s\) into .*: about \d+ MB", done.stderr), done.stderr
    assert "more than the 30 MB a build may write" in done.stderr
    assert "--max-bytes" in done.stderr and "Traceback" not in done.stderr
    assert not list(out.glob("*.gguf"))


def _manifest():
    entry = {"case": "c1", "variant": "auto", "request": {"messages": []}, "reply": "Hi", "prompt_tokens": 12,
             "key_source": "render", "reply_tokens": 2, "reply_ids": [1, 2], "expect": {"calls": []}}
    return {"template": {"id": QWEN, "sha256": "0" * 64}, "family": "hermes", "vocabulary": "qwen2.5",
            "key_from": "render", "models": [{"file": "m.gguf", "served_name": "m", "requests": [entry]}]}


def _broken(change):
    manifest = _manifest()
    change(manifest)
    return manifest


@pytest.mark.parametrize("manifest, message", [
    ("[1, 2", r"the manifest is not JSON: .* at line 1"),
    ([], "the manifest must be an object, not a list"),
    (_broken(lambda m: m.pop("models")), "models is missing"),
    (_broken(lambda m: m.update(models={})), "models must be a list, not an object"),
    (_broken(lambda m: m["template"].pop("sha256")), r"template\.sha256 is missing"),
    (_broken(lambda m: m["models"][0].update(served_name=3)), r"models\[0\]\.served_name must be text, not an integer"),
    (_broken(lambda m: m["models"][0]["requests"][0].update(reply_tokens="2")),
     r"models\[0\]\.requests\[0\]\.reply_tokens must be an integer, not text"),
    (_broken(lambda m: m["models"][0]["requests"][0].update(prompt_tokens=True)),
     r"models\[0\]\.requests\[0\]\.prompt_tokens must be an integer, not a boolean"),
    (_broken(lambda m: m["models"][0]["requests"][0].update(reply_ids=["a"])), r"models\[0\]\.requests\[0\]\.reply_ids must be a list of token ids"),
    (_broken(lambda m: m["models"][0]["requests"].append(7)), r"models\[0\]\.requests\[1\] must be an object"),
], ids=["not-json", "a-list", "no-models", "models-object", "no-sha", "name-int", "tokens-text", "tokens-bool",
        "ids-text", "entry-int"])
def test_a_malformed_manifest_is_one_error_naming_file_and_field(tmp_path, manifest, message):
    from harness.suites.runtime_conformance.endpoint import run_manifest

    path = tmp_path / "x.manifest.json"
    path.write_text(manifest if isinstance(manifest, str) else json.dumps(manifest), encoding="utf-8")
    with pytest.raises(HarnessError, match=f"^{re.escape(str(path))}: {message}"):
        run_manifest("http://127.0.0.1:9", "m", path, "rt", tmp_path / "records.jsonl", set())
    assert not (tmp_path / "records.jsonl").exists()


def test_a_manifest_scripted_model_writes_reads_back(tmp_path):
    from harness.scripted.manifest import read_manifest

    path = tmp_path / "ok.manifest.json"
    path.write_text(json.dumps(_manifest()), encoding="utf-8")
    assert read_manifest(path) == _manifest()
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(HarnessError, match="fifo: not a regular file"):
        read_manifest(tmp_path / "fifo")
