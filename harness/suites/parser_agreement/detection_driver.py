"""SGLang's template detection asked of every pinned template, through the peers worker (its `detect` request),
into DIR/template-detection/sglang.jsonl (template_detection.py reads and compares it)."""

from __future__ import annotations

import json

from harness.core.hashing import sha256_text
from harness.suites.parser_agreement.driver import _SPECIAL, _TAG
from harness.suites.parser_agreement.template_detection import DETECTORS, PROJECT, TEMPLATE


def vocabulary(text: str) -> set:
    """The markers a template's text spells as a tokenizer's added tokens would be: <|…|>, <｜…｜>, [UPPER_CASE] and
    tags. The pins carry no tokenizer, and SGLang's vocabulary rules ask for these alone."""
    return set(_SPECIAL.findall(text)) | set(_TAG.findall(text))


def detect_all(peers, templates, version: str) -> list:
    """The file's lines: the detectors line (the worker's table of SGLang parser names), then one per template
    (ResolvedTemplate), in the order given."""
    lines = [{"kind": DETECTORS, "project": PROJECT, "version": version, "detectors": peers.detectors()}]
    for ref in templates:
        vocab = vocabulary(ref.text)
        answer = peers.detect(ref.text, vocab)
        answer.pop("id", None)
        lines.append({"kind": TEMPLATE, "project": PROJECT, "version": version, "template": ref.id,
                      "sha256": sha256_text(ref.text), "vocabulary": len(vocab), **answer})
    return lines


def write_detections(path, lines: list) -> None:
    """The whole file at once (a rerun of the same templates and version writes the same bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines),
                   encoding="utf-8")
    tmp.replace(path)
