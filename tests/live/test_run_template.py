"""`harness run --template` on a model that has a template of its own: the given one is used, said so, and its
samples are kept apart from the model's own runs (a packager trying a template on an existing GGUF)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scripted import PROFILES, Script, Vocab, build_standin

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = "Qwen-Qwen3-0.6B"


@pytest.mark.needs_binding
def test_a_template_given_for_a_gguf_that_embeds_one_replaces_it(tmp_path):
    gguf = tmp_path / "packaged.gguf"
    build_standin(gguf, "qwen2.5", [Script("<|im_end|>", ("Hello",))], vocab=Vocab(PROFILES["qwen2.5"]))
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--template", QWEN3,
                           "--scenario", "greeting", "--samples", "1", "--mode", "native", "--results-dir",
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"--template {QWEN3} replaces the template the GGUF embeds" in done.stderr
    (transcript,) = (tmp_path / "transcripts").glob("*.jsonl")
    assert transcript.stem == f"packaged--template-{QWEN3}"
    model = next(r for r in map(json.loads, transcript.read_text().splitlines()) if r["kind"] == "model")
    qwen3 = (ROOT / "templates" / f"{QWEN3}.jinja").read_bytes()
    assert model["template"]["sha256"] == hashlib.sha256(qwen3).hexdigest()
    assert model["template"]["source"].startswith(f"sources.json:{QWEN3}, given with --template")
    report = subprocess.run([sys.executable, "-m", "harness", "report", "--results-dir", str(tmp_path), "--no-plot"],
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    header = (tmp_path / f"{transcript.stem}.md").read_text(encoding="utf-8")
    assert f"Template used: sources.json:{QWEN3}, given with --template" in header


@pytest.mark.needs_binding
def test_a_template_given_for_a_pinned_model_replaces_its_own(tmp_path):
    tree, cache = tmp_path / "tree", tmp_path / "cache"
    tree.mkdir()
    for folder in ("templates", "scenarios"):
        shutil.copytree(ROOT / folder, tree / folder)
    gguf = cache / "models" / "standin-qwen" / "standin.gguf"
    gguf.parent.mkdir(parents=True)
    build_standin(gguf, "qwen2.5", [Script("<|im_end|>", ("Hello",))], vocab=Vocab(PROFILES["qwen2.5"]))
    raw = json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))
    data = gguf.read_bytes()
    raw["models"].append({"id": "standin-qwen", "default": False, "repo": None, "filename": "standin.gguf",
                          "revision": None, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                          "license": None, "template": None, "family": None, "note": None,
                          "modes": ["native", "grammar"],
                          "sources": [{"kind": "pypi", "assemble": "concat",
                                       "packages": [{"name": "none", "version": "0", "member": "none"}]}]})
    (tree / "sources.json").write_text(json.dumps(raw), encoding="utf-8")
    env = dict(os.environ, HARNESS_ROOT=str(tree), HARNESS_CACHE=str(cache))
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "standin-qwen", "--template", QWEN3,
                           "--scenario", "greeting", "--samples", "1"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert f"standin-qwen: --template {QWEN3} replaces its own template" in done.stderr
    transcript = tree / "results" / "transcripts" / f"standin-qwen--template-{QWEN3}.jsonl"
    written = [json.loads(line) for line in transcript.read_text().splitlines()]
    model = next(r for r in written if r["kind"] == "model")
    assert model["template"]["source"].startswith(f"sources.json:{QWEN3}, given with --template")
    # The pin's default modes still apply to the model run under another template's id.
    assert sorted(r["mode"] for r in written if r["kind"] == "sample") == ["grammar", "native"]
