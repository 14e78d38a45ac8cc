#!/usr/bin/env python
"""Maintainer tool: label the committed runtime-conformance records again from the answers they hold, offline (no
runtime is asked): after a change to the labels (harness.suites.runtime_conformance.judging.classify) or to a parser,
the records say what the current harness makes of the same answers: each record's strict parse (`expect`) is
read again from its case as the corpus writes it today, and so is the strict parse of the text the runtime
shows it generated instead of the script (`generated_expect`), then its labels.

    python tools/relabel_runtime_conformance.py          # rewrite results/runtime-conformance/*.jsonl
    python tools/relabel_runtime_conformance.py --check  # exit 1 when a record is not what it would be made today

Each record is judged with its template's corpus tools (harness.suites.runtime_conformance.corpus: one list per
template, which types the arguments) and its family's call opener, as the run that asked it did. Records written
before the harness read a stream that ends without `data: [DONE]` after its finish_reason as finished are brought
to today's shape first (see `finished_stream`), and an absolute manifest path (a scratch folder of the machine
that ran it) becomes the manifest's file name, as records are written now; nothing else in a record changes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.suites.runtime_conformance import SUITE  # noqa: E402
from harness.suites.runtime_conformance.judging import classify, generated_expect  # noqa: E402
from harness.suites.runtime_conformance.corpus import build_corpus  # noqa: E402
from harness.storage.transcript_writer import encode_line  # noqa: E402
from harness.families import get as family_get  # noqa: E402
from harness.pins.sources import load_sources, resolve_template  # noqa: E402
from harness.core.hashing import sha256_text  # noqa: E402

FOLDER = ROOT / "results" / "runtime-conformance"
OLD_NO_DONE = "cut short: the stream ended without [DONE]"


def finished_stream(stream: dict | None) -> dict | None:
    """A stream recorded as cut short for want of [DONE] alone, though a chunk carried its finish_reason, as
    harness.backends.chat_answers.chat_stream now reads it: finished, `no_done_sentinel` noted."""
    cut = (stream or {}).get("cut_short") or ""
    if not cut.startswith(OLD_NO_DONE) or "finish_reason" in cut or stream.get("finish_reason") is None:
        return stream
    stream = {k: v for k, v in stream.items() if k != "cut_short"}
    problems = [p for p in stream.pop("problems", []) if p != cut]
    return {**stream, **({"problems": problems} if problems else {}), "no_done_sentinel": True}


class Judge:
    """Tools and marker per template and family, each corpus built once."""

    def __init__(self):
        self.sources, self.tools, self.cases = load_sources(), {}, {}

    def _corpus(self, template: dict) -> None:
        if template["id"] not in self.tools:
            ref = resolve_template(template["id"], self.sources)
            if sha256_text(ref.text) != template["sha256"]:
                raise SystemExit(f"{template['id']}: the pinned template is not the one recorded; ask it again")
            corpus = build_corpus(ref)
            self.tools[template["id"]] = corpus.cases[0].tools if corpus.cases else []
            self.cases[template["id"]] = {c.name: c for c in corpus.cases}

    def corpus_tools(self, template: dict) -> list:
        self._corpus(template)
        return self.tools[template["id"]]

    def expect(self, record) -> dict | None:
        """The strict parse of the record's reply after our render of its case's prompt, as the current parsers
        read it: the case of that name in the template's corpus, when it still writes the same reply under the
        same template variables (else the record keeps the parse it was asked with). The case's hash is not
        compared: a run keyed to another runtime pads the conversation to other prompt lengths, which leaves
        the generation prompt, all the strict parse reads of it, as it is."""
        self._corpus(record.template)
        case = self.cases[record.template["id"]].get(record.case["name"])
        variables = (record.request or {}).get("chat_template_kwargs") or {}
        same = case is not None and case.reply == record.reply and (case.template_kwargs or {}) == variables
        return case.expect if same else record.expect

    def generated_expect(self, record) -> dict | None:
        """The strict parse of the text the runtime generated instead of the script (where it shows it), after
        the case's prompt as the corpus renders it today; the record's own when its case is gone."""
        self._corpus(record.template)
        case = self.cases[record.template["id"]].get(record.case["name"])
        variables = (record.request or {}).get("chat_template_kwargs") or {}
        if case is None or case.reply != record.reply or (case.template_kwargs or {}) != variables:
            return record.generated_expect
        return generated_expect(record, lambda text: case.parse(record.family, text))

    def labels(self, record) -> tuple:
        markers = family_get(record.family).markers if record.family else ()
        return classify(record.to_json(), self.corpus_tools(record.template), markers[0] if markers else None)


def relabel(path: Path, judge: Judge) -> tuple:
    """(records, how many changed) of one file, relabelled."""
    records, warnings = SUITE.read_records(path)
    if warnings:
        raise SystemExit(f"{path}: {'; '.join(map(str, warnings))}")
    changed = 0
    for r in records:
        before = r.to_json()
        r.stream = finished_stream(r.stream)
        if r.manifest and Path(r.manifest).is_absolute():
            r.manifest = Path(r.manifest).name        # as harness.suites.runtime_conformance.endpoint.manifest_field names it
        # The strict parse the labels compare against is the current parsers' (a parser fix changes it), then
        # the labels themselves.
        r.expect = judge.expect(r)
        r.generated_expect = judge.generated_expect(r)
        r.labels, r.details = (list(x) for x in judge.labels(r))
        changed += r.to_json() != before
    return records, changed


def main(argv: list) -> int:
    judge, stale = Judge(), 0
    for path in sorted(FOLDER.glob("*.jsonl")):
        records, changed = relabel(path, judge)
        stale += changed
        print(f"{path.relative_to(ROOT)}: {len(records)} record(s), {changed} relabelled")
        if changed and "--check" not in argv:
            scratch = path.with_name(path.name + ".tmp")
            scratch.write_bytes(b"".join(encode_line(r.to_json()) for r in records))
            os.replace(scratch, path)
    if "--check" in argv and stale:
        print("out of date: run python tools/relabel_runtime_conformance.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
