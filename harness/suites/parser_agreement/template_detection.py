"""SGLang's template detection (`--tool-call-parser auto`, sglang.srt.parser.template_detection) beside ours, on
every pinned template.

`harness parser-agreement` asks the peers worker once per template (detection_driver.py) and writes
DIR/template-detection/sglang.jsonl: a first line naming the detector class behind every SGLang parser name (two
names can be one parser: `glm` and `glm45`), then one line per template with the parser SGLang picks, the rule
that picked it, and what the template text alone gives. Ours is the family `harness conformance` gives the
template (conformance.json: detected from its rendered call, or declared by its pin) and the SGLang parser that
family names for it (`peers:`, Family.peer). The comparison is made here, from those two committed files, so
`harness report` writes it again offline; results/parser-agreement.md and docs/strictness.md both carry it.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness import families as registry

PROJECT = "sglang"
DETECTORS = "detectors"       # the first line's kind
TEMPLATE = "template"         # every other line's kind

# Outcome -> (agrees, what it says). An outcome is one of these, per template.
OUTCOMES = {
    "same parser": (True, "SGLang picks the parser our family names for SGLang"),
    "same detector": (True, "SGLang picks another name of the same SGLang parser class"),
    "neither": (True, "SGLang picks no parser and our family names none for SGLang (or we read no format)"),
    "other parser": (False, "SGLang picks another parser than our family names"),
    "sglang picks none": (False, "our family names an SGLang parser; SGLang's detection picks none"),
    "unmapped family": (False, "SGLang picks a parser; our family names no SGLang parser"),
    "no family": (False, "SGLang picks a parser; we read no tool format in the template (no tools, or a wall)"),
    "stale": (False, "the template changed since SGLang was asked (its sha256 is not the one asked)"),
    "not asked": (False, "no record of SGLang's detection for the template"),
}


def read_detections(path: Path) -> tuple:
    """(detectors: name -> class, version, records by template id) of one project's file; empty when absent."""
    if not path.is_file():
        return {}, None, {}
    detectors, version, records = {}, None, {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("kind") == DETECTORS:
            detectors, version = record["detectors"], record["version"]
        elif record.get("kind") == TEMPLATE:
            records[record["template"]] = record
    return detectors, version, records


def conformance_rows(results_root: Path) -> list:
    path = Path(results_root) / "conformance.json"
    if not path.is_file():
        return []
    return json.loads(path.read_text(encoding="utf-8")).get("templates") or []


def our_parser(row: dict) -> str | None:
    """The SGLang parser the family conformance gives the template names for it (None: no family, or none)."""
    family = row.get("family")
    if not family or family not in registry.families():
        return None
    return registry.get(family).peer(PROJECT, row["id"])


def outcome(row: dict, record: dict | None, detectors: dict) -> str:
    if record is None:
        return "not asked"
    if record.get("sha256") != row.get("sha256"):
        return "stale"
    ours, theirs = our_parser(row), record.get("tool_call_parser")
    if ours == theirs:
        return "same parser" if ours else "neither"
    if ours and theirs and detectors.get(ours) and detectors.get(ours) == detectors.get(theirs):
        return "same detector"
    if theirs is None:
        return "sglang picks none" if ours else "neither"
    if ours:
        return "other parser"
    return "unmapped family" if row.get("family") else "no family"


def compare(results_root: Path, path: Path) -> dict:
    """{version, rows: [{template, status, family, ours, sglang, rule, text_only, detector, outcome}]} for every
    template of conformance.json, in its order; None values where a side has nothing."""
    detectors, version, records = read_detections(path)
    rows = []
    for row in conformance_rows(results_root):
        record = records.get(row["id"])
        rows.append({"template": row["id"], "status": row.get("status"), "family": row.get("family"),
                     "ours": our_parser(row), "sglang": (record or {}).get("tool_call_parser"),
                     "rule": (record or {}).get("rule"), "text_only": (record or {}).get("text_only"),
                     "detector": detectors.get((record or {}).get("tool_call_parser") or ""),
                     "outcome": outcome(row, record, detectors)})
    return {"version": version, "rows": rows}


def _code(value) -> str:
    return f"`{value}`" if value else "–"


def detection_lines(compared: dict, heading: str = "##") -> list:
    """The section: how it was made, the counts per outcome, then every template where the two disagree."""
    rows = compared["rows"]
    if not rows or compared["version"] is None:
        return []
    agree = [r for r in rows if OUTCOMES[r["outcome"]][0]]
    counts = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    lines = ["", f"{heading} SGLang's template detection beside ours", "",
             f"SGLang {compared['version']}'s `--tool-call-parser auto` (sglang.srt.parser.template_detection: "
             "the reasoning toggle read from the template, then its tool-call rules in order, the first that holds) "
             "on every pinned template, in the peers environment (`bash scripts/setup_peers.sh`; made by "
             "`harness parser-agreement`, records in template-detection/sglang.jsonl). Its vocabulary: every "
             "special-token and tag spelling the template's text holds (the pins carry no tokenizer; a real one "
             "holds those markers as added tokens); *text only* is what it picks with none. Ours: the family "
             "`harness conformance` gives the template (conformance.json) and the SGLang parser that family names "
             "for it (`peers:`).", "",
             f"{len(agree)}/{len(rows)} templates agree, {len(rows) - len(agree)} disagree: "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) + ".", "",
             "| outcome | meaning | templates |", "|---|---|---:|"]
    lines += [f"| {k} | {OUTCOMES[k][1]} | {counts[k]} |" for k in OUTCOMES if k in counts]
    lines += ["", "| template | ours (status, family) | our SGLang parser | SGLang picks | its rule | text only "
              "| outcome |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if OUTCOMES[r["outcome"]][0]:
            continue
        ours = f"{r['status']}, {r['family']}" if r["family"] else r["status"]
        lines.append(f"| {r['template']} | {ours} | {_code(r['ours'])} | {_code(r['sglang'])} | {_code(r['rule'])} "
                     f"| {_code(r['text_only'])} | {r['outcome']} |")
    return lines
