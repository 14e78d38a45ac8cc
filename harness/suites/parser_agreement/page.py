"""The parser-agreement suite's pages, rebuilt by `harness report` from its records: DIR/parser-agreement.md (the
family × project matrix, SGLang's names for what it forgives beside ours, SGLang's template detection beside
ours, then every disagreement with its reply and replay) and its section of report.html."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pandas as pd

from harness.evaluation.judging import cell
from harness.storage.results import ResultsDir
from harness.reports.html_overview import table_section
from harness.suites import stage_page
from harness.suites.parser_agreement import peer_vocabulary, template_detection
from harness.suites.parser_agreement.judging import LABELS, current, matrix, replay_command, unmapped


def _plan(records: list) -> dict:
    """The peers' versions and the split plans the records were made with (one of each in a whole run)."""
    versions: dict = {}
    for r in records:
        versions.setdefault(r.project, set()).add(r.version)
    return {"projects": {p: ", ".join(sorted(v)) for p, v in versions.items()},
            "splits": ", ".join(sorted({str(r.splits) for r in records})) or "0",
            "seed": ", ".join(sorted({str(r.seed) for r in records})) or "0"}


def _parsers(row: dict) -> str:
    if len(row["parsers"]) == 1:
        return f"`{next(iter(row['parsers']))}`"
    return ", ".join(f"`{p}` ×{n}" for p, n in sorted(row["parsers"].items()))


def disagreement_lines(records: list, order, head, replay, limit: int = 160) -> list:
    """The "Disagreements" section of the page: each record not labelled agree, in `order`, as `head(r)`,
    its labels and details, then its reply and the command `replay(r)` that asks it again."""
    lines = ["", "## Disagreements", ""]
    for r in sorted(records, key=order):
        if r.labels == ["agree"]:
            continue
        lines.append(f"- {head(r)}: `{'`, `'.join(r.labels)}` — {'; '.join(r.details)}")
        lines.append(f"  reply {cell(r.reply, limit)}; replay: `{replay(r)}`")
    return lines


def markdown(records: list, unmapped: list, results_dir: Path | None = None) -> str:
    """results/parser-agreement.md from the records (ParserAgreementRecord, those that stand): the family ×
    project matrix, SGLang's names for what it forgives beside ours, SGLang's template detection beside ours (from
    results_dir's template-detection/ and conformance.json, when given), then every disagreement with its reply
    and the command that replays it. unmapped: (family, why)."""
    labels = tuple(LABELS)
    records = current(records)
    environment = _plan(records)
    lines = ["# Parser agreement", "",
             "vLLM's and SGLang's own tool parsers, and transformers' parse_response with the response template "
             "`transformers serve` uses for the model type, in process in the peers environment (`bash "
             "scripts/setup_peers.sh`), on the strict parser's corpus: every family's canonical outputs and near "
             "misses, every template's runtime-conformance corpus, and the distinct replies real models wrote in "
             "transcripts/ (source `transcript:MODEL`, judged against the strict parse with the step's recorded "
             "prompt, as scoring reads it). Each reply is read one-shot and streamed "
             f"(whole, token by token, and {environment['splits']} seeded random splits of 1-4 tokens, seed "
             f"{environment['seed']}) through the family's vocabulary. Labels are defined in "
             "harness/suites/parser_agreement/judging.py; made by `harness parser-agreement` (records in "
             "parser-agreement/PROJECT.jsonl; `harness report` rebuilds this page from them).", "",
             "Peers: " + ", ".join(f"{k} {v}" for k, v in sorted(environment["projects"].items())) + ".", "",
             "| family | project | parser | cases | " + " | ".join(labels) + " | streams differing | forgiven |",
             "|---|---|---|---:|" + "---:|" * len(labels) + "---:|---|"]
    for row in matrix(records):
        forgiven = ", ".join(f"`{k}` ×{v}" for k, v in sorted(row["forgiven"].items())) or "–"
        share = f"{row['streams_differ']}/{row['streams']}"
        lines.append(f"| {row['family']} | {row['project']} | {_parsers(row)} | {row['cases']} | "
                     + " | ".join(str(row[k]) for k in labels) + f" | {share} | {forgiven} |")
    if unmapped:
        lines += ["", "## Not compared", ""] + [f"- {f}: {why}" for f, why in unmapped]
    lines += peer_vocabulary.vocabulary_lines(records)
    if results_dir is not None:
        results = ResultsDir.at(results_dir)
        lines += template_detection.detection_lines(template_detection.compare(
            results.root, results.template_detection_records(template_detection.PROJECT)))
    lines += disagreement_lines(records, lambda r: (r.family, r.project, r.source, r.case),
                                lambda r: f"**{r.project}** `{r.parser}` / {r.family} / {r.source} / {r.case}",
                                replay_command, limit=200)
    return "\n".join(lines) + "\n"


def html_section(records: list) -> str:
    """Its section of report.html: cases per label for each family and project, and the streams that differ."""
    rows = matrix(current(records))
    frame = pd.DataFrame([{"family": row["family"], "project": row["project"],
                           "parser": ", ".join(sorted(row["parsers"])), "cases": row["cases"],
                           **{k: row[k] for k in LABELS},
                           "streams differing": f"{row['streams_differ']}/{row['streams']}"} for row in rows])
    versions = ", ".join(f"{p} {v}" for p, v in sorted({(r.project, r.version) for r in records}))
    return table_section("parser-agreement", "Parser agreement",
                         f"Other projects' own tool parsers ({escape(versions)}), in process, on the strict parser's "
                         "corpus: each family's canonical outputs, near misses and runtime-conformance replies, read "
                         "one-shot and streamed (whole, token by token, seeded random splits of 1-4 tokens). Cases per "
                         "label, several labels per case possible; every disagreement, with its reply and the command "
                         "that replays it, is in parser-agreement.md.", frame, cls="wide")


def write_pages(pages, records: list, page: str) -> list:
    """DIR/<page> and the report.html section, staged with the rest of the report; nothing without records."""
    if not records:
        return []
    return stage_page(pages, page, lambda: markdown(records, unmapped(), pages.results.root), lambda: html_section(records))
