"""The runtime-check suite's pages, rebuilt by `harness report` from its records: DIR/runtime-agreement.md (the
runtime × served model × template matrix, then every pair that disagrees, with where two replies fork) and its
section of report.html."""

from __future__ import annotations

import pandas as pd

from harness.evaluation.judging import fork
from harness.reports.html_overview import table_section
from harness.suites import stage_page
from harness.suites.runtime_check.judging import LABELS, agreement_table


def _detail(record) -> str:
    """The record's detail; for replies-differ, where the texts fork, from the two texts it keeps (records
    written before `fork` hold both texts cropped to the same first characters)."""
    if record.label == "replies-differ":
        strict = ((record.strict or {}).get("parse") or {}).get("content")
        runtime = (record.runtime_reply or {}).get("content")
        if isinstance(strict, (str, type(None))) and isinstance(runtime, (str, type(None))):
            return fork(strict, runtime)
    return record.detail


def markdown(records: list) -> str:
    """results/runtime-agreement.md: the runtime × served model × template matrix, then every pair that
    disagrees."""
    labels = tuple(LABELS)
    lines = ["# Runtime agreement", "",
             "The same conversation and seed, greedy, through the harness's strict path (its own render, raw "
             "/v1/completions text, the family's strict parser) and the runtime's own path (/v1/chat/completions "
             "with tools). Labels are defined in harness/suites/runtime_check/judging.py.", "",
             "| runtime | served model | template | pairs | " + " | ".join(labels) + " | deviations forgiven |",
             "|---|---|---|---:|" + "---:|" * len(labels) + "---|"]
    for row in agreement_table(records):
        forgiven = ", ".join(f"`{k}` ×{v}" for k, v in sorted(row["forgiven"].items())) or "–"
        lines.append(f"| {row['runtime']} | {row['served_model']} | {row['template']} | {row['pairs']} | "
                     + " | ".join(str(row[k]) for k in labels) + f" | {forgiven} |")
    lines += ["", "## Pairs that disagree", ""]
    for r in sorted(records, key=lambda r: (r.runtime, r.served_model, r.scenario.name, r.seed)):
        if r.label != "agree":
            lines.append(f"- {r.runtime} / {r.served_model} / {r.scenario.name} seed {r.seed}: "
                         f"`{r.label}` — {_detail(r)}")
    return "\n".join(lines) + "\n"


def html_section(records: list) -> str:
    """Its section of report.html: pairs per label for each runtime, served model and template."""
    frame = pd.DataFrame([{k: row[k] for k in ("runtime", "served_model", "template", "pairs", *LABELS)}
                          for row in agreement_table(records)])
    return table_section("runtime-agreement", "Runtime agreement",
                         "The same conversation and seed through the strict path and the runtime's "
                         "/v1/chat/completions with tools: pairs per label. Each disagreeing pair, and where two "
                         "replies fork, is in runtime-agreement.md.", frame)


def write_pages(pages, records: list, page: str) -> list:
    """DIR/<page> and the report.html section, staged with the rest of the report; nothing without records."""
    if not records:
        return []
    return stage_page(pages, page, lambda: markdown(records), lambda: html_section(records))
