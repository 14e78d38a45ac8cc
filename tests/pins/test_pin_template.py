"""`harness pin-template`: a user's template lands in templates/ and sources.json, verified, or nothing changes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.pins.sources import load_sources

ROOT = Path(__file__).resolve().parents[2]
QWEN = ROOT / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"


@pytest.fixture
def tree(tmp_path):
    """A copy of the project's pins, so the command writes there and not into this checkout."""
    shutil.copy(ROOT / "sources.json", tmp_path / "sources.json")
    shutil.copytree(ROOT / "templates", tmp_path / "templates")
    return tmp_path


def harness(tree: Path, *args):
    env = dict(os.environ, HARNESS_ROOT=str(tree))
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          env=env)


def test_a_jinja_file_is_pinned_and_detected(tree, tmp_path):
    src = tmp_path / "mine.jinja"
    shutil.copy(QWEN, src)
    done = harness(tree, "pin-template", src, "--id", "my-qwen", "--repo", "me/my-qwen", "--eos-token",
                   "<|im_end|>", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["detected"]["family"] == "hermes"
    pin = load_sources(tree / "sources.json").template("my-qwen")
    assert (tree / pin.file).read_bytes() == QWEN.read_bytes()
    assert (pin.repo, pin.repo_basis, pin.eos_token, pin.size) == ("me/my-qwen", "given to harness pin-template",
                                                                  "<|im_end|>", QWEN.stat().st_size)
    assert harness(tree, "verify").returncode == 0


def test_a_tokenizer_config_gives_its_template_and_tokens(tree, tmp_path):
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": QWEN.read_text(encoding="utf-8"), "bos_token": None,
                                  "eos_token": {"content": "<|im_end|>", "special": True}}), encoding="utf-8")
    done = harness(tree, "pin-template", config, "--id", "from-config")
    assert done.returncode == 0, done.stderr
    pin = load_sources(tree / "sources.json").template("from-config")
    assert (tree / pin.file).read_bytes() == QWEN.read_bytes() and pin.eos_token == "<|im_end|>"


@pytest.mark.parametrize("args, message", [
    (["--id", "Qwen-Qwen2.5-7B-Instruct"], "already pinned; re-pinning is deliberate"),
    (["--id", "../escape"], "must be letters"),
    (["--id", "ok", "--revision", "main"], "'revision' is malformed"),
])
def test_refusals_change_nothing(tree, tmp_path, args, message):
    src = tmp_path / "mine.jinja"
    shutil.copy(QWEN, src)
    before = (tree / "sources.json").read_bytes(), sorted(p.name for p in (tree / "templates").iterdir())
    done = harness(tree, "pin-template", src, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert ((tree / "sources.json").read_bytes(), sorted(p.name for p in (tree / "templates").iterdir())) == before


def test_a_file_that_is_not_utf8_text_is_refused(tree, tmp_path):
    src = tmp_path / "bad.jinja"
    src.write_bytes(b"{{ '\xff' }}")
    done = harness(tree, "pin-template", src, "--id", "bad")
    assert done.returncode == 2 and "must be UTF-8" in done.stderr
