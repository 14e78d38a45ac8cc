"""The cross-family rejection matrix: every parser against every family's canonical outputs, every
family's near misses and every template's rendered call. A parser may accept only its own family's texts.
Detectable families only: generic-json, which no template writes, reads other families' bare JSON on purpose."""

from dataclasses import dataclass

from harness import families as registry
from harness.formats.canonical import canonical_outputs

ACCEPT = "accept"


@dataclass
class Case:
    """One text put through every parser. `owner` is the family that should accept it, None for none."""

    source: str  # "canonical", "near-miss" or "template"
    writer: str  # the family (or template id) that wrote it
    label: str
    text: str
    owner: str | None


def cases(template_rows=()) -> list:
    out = []
    for family in registry.detectable().values():
        for label, _, text in canonical_outputs(family):
            out.append(Case("canonical", family.name, label, text, family.name))
        for miss in family.near_misses:
            out.append(Case("near-miss", family.name, f"near miss: {miss.deviation}", miss.text, None))
    for row in template_rows:
        if row.get("rendered_call"):
            out.append(Case("template", row["id"], "rendered probe call", row["rendered_call"], row.get("family")))
    return out


def verdict(result) -> str:
    if result.accepted:
        return ACCEPT
    return result.deviation or "no call"


def run(template_rows=(), prompts=None) -> dict:
    """Return {"families": [...], "cells": [{case..., "verdicts": {family: verdict}}], "counts": writer×reader,
    "violations": [...]}. prompts maps a template id to the prompt its rendered call follows."""
    names = list(registry.detectable())
    prompts = prompts or {}
    cells = []
    counts = {writer: {reader: 0 for reader in names} for writer in [*names, "(no family)"]}
    violations = []
    for case in cases(template_rows):
        prompt = prompts.get(case.writer, "") if case.source == "template" else ""
        verdicts = {name: verdict(registry.parse(name, case.text, prompt)) for name in names}
        cells.append({**case.__dict__, "verdicts": verdicts})
        row = case.owner if case.owner in counts else (case.writer if case.source != "template" else "(no family)")
        for reader, v in verdicts.items():
            if v == ACCEPT:
                counts[row][reader] += 1
                if reader != case.owner:
                    violations.append(f"{reader} accepts {case.source} text of {case.writer} ({case.label})")
        if case.owner and verdicts.get(case.owner) != ACCEPT:
            violations.append(f"{case.owner} rejects its own {case.source} text from {case.writer} ({case.label}): "
                              f"{verdicts.get(case.owner)}")
    return {"families": names, "cells": cells, "counts": counts, "violations": violations}
