"""One text hasher (harness.core.hashing). The digests below were computed by each hasher before it was merged
into it, and records and results hold such digests: merging must not move one. A text with a lone surrogate (JSON
lets a request or reply spell one) gets a digest everywhere instead of a UnicodeEncodeError in some places."""

import ast
import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.hashing import sha256_json, sha256_text
from harness.storage.results import file_stem
from harness.suites.runtime_conformance.driver import case_hash
from harness.suites.runtime_conformance.endpoint import entry_hash
from harness.reports.rates import reply_key

PACKAGE = Path(__file__).resolve().parents[2] / "harness"

DIGESTS = [
    (lambda: sha256_text("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (lambda: sha256_text("{{ x }} é"), "2dc446cdb0dbe5049a61b8200afa3147b0502ad19da724e84e95e8baa54e0abb"),
    (lambda: file_stem("../../README"), "README~7762005a43c3735b"),
    (lambda: file_stem("Qwen/Qwen3 é"), "Qwen-Qwen3~b6e119a1739d84a6"),
    (lambda: file_stem("a\ud800b"), "a-b~45e334b6c74ca5db"),
    (lambda: reply_key("arithmetic", [{"reply": "hi é"}, {"reply": "x", "fallback_from": {"reply": "y"}}], None),
     "edcbbe9fe1a597a7dc3c"),
    (lambda: reply_key("s", [{"reply": "a\ud800"}], "boom"), "d027f4cee76ee8a41ca6"),
    (lambda: entry_hash({"request": {"b": 1, "a": ["é"]}, "reply": {"content": "hi"}}), "5a77cd9ea20ed6d6"),
    (lambda: case_hash(SimpleNamespace(messages=[{"role": "user", "content": "é"}], tools=[], reply="r",
                                       template_kwargs={"z": 1, "a": 2})), "bba535a863997aa7"),
]


@pytest.mark.parametrize("index", range(len(DIGESTS)))
def test_a_merged_hasher_gives_the_digest_it_gave_before(index):
    digest, expected = DIGESTS[index]
    assert digest() == expected


LONE_SURROGATES = ["\ud800", "a\udfffb", "\udc80 é"]


@pytest.mark.parametrize("text", LONE_SURROGATES)
def test_a_lone_surrogate_is_hashed_not_refused(text):
    assert sha256_text(text) == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    request = {"messages": [{"role": "user", "content": text}]}
    assert entry_hash({"request": request, "reply": {"content": text}}) == sha256_json([request, {"content": text}])[:16]
    assert case_hash(SimpleNamespace(messages=request["messages"], tools=[], reply=text, template_kwargs={}))


def test_no_module_hashes_a_text_of_its_own():
    """hashlib.sha256 over a text's .encode(...) belongs to harness.core.hashing; bytes read from files are
    hashed where they are read."""
    found = []
    for path in sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts):
        if path == PACKAGE / "core" / "hashing.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "sha256"
                    and any(isinstance(n, ast.Attribute) and n.attr == "encode" for a in node.args for n in ast.walk(a))):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []
