"""results/conformance.md and results/conformance.json from a conformance run (pandas + tabulate)."""

import pandas as pd

from harness.core.safe_writes import check_target, write_atomically
from harness.storage.results import ResultsDir
from harness.formats import deviations
from harness.template.conformance import dumps


def _cell(text, limit=90):
    if text is None:
        return ""
    flat = text.replace("\n", "\\n").replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _table(rows, columns) -> str:
    return pd.DataFrame(rows, columns=columns).to_markdown(index=False)


def markdown(report: dict) -> str:
    s = report["summary"]
    out = [
        "# Conformance report",
        "",
        f"Made by `harness conformance` (harness {report['harness_version']}), offline: every pinned template is "
        "rendered with a probe conversation, its tool-call family detected from the rendered call, and every "
        "family's strict parser run over every family's outputs.",
        "",
        f"- templates: {s['templates']} — detected {s['detected']}, declared {s['declared']}, walls {s['walls']}, "
        f"without tools {s['no_tools']}",
        f"- families: {s['families']}; rejection-matrix cases: {s['matrix_cases']}; "
        f"violations (a parser accepting another family's text, or rejecting its own): {s['matrix_violations']}",
        f"- full tool conversation fails to render: {s['full_conversation_failures']} template(s)",
        f"- round trip (the parsed call rendered back as the assistant's message) gives other text: "
        f"{s['round_trip_failures']} template(s)",
        "",
        "How to read it: **detected** means the family's parser reads the template's rendered call back as the "
        "probe call `get_weather(location=\"Paris\", days=3)`. **wall** means the template renders a call that no "
        "family reads (the reason says why). **no tools** means neither tools nor tool calls reach the rendered text "
        "(a template that renders calls but not tools is detected, with a `tools-in-system-prompt` finding). "
        "**declared** means the template never renders a call and its pin in sources.json declares the family, with "
        "its evidence (model card, peer parsers); detection did not find it. **round trip**: the call the family's "
        "parser reads out of the rendered call, rendered back through the template as the assistant's message "
        "(typed calls, content, reasoning), gives the same text; — where no parser read a rendered call.",
        "",
        "## Templates",
        "",
    ]
    rows = []
    for t in report["templates"]:
        reason = t["wall"] or ("" if t["status"] == "detected" else t["reason"])
        rows.append([t["id"], t["sha256"][:12], t["family"] or "—", t["status"],
                     {True: "yes", False: "no", None: "—"}[t["round_trips"]],
                     "yes" if t["full_conversation_renders"] else "no",
                     _cell(reason, 160)])
    out.append(_table(rows, ["template", "sha256", "family", "status", "round trip", "full conversation", "reason"]))
    out += ["", "## Rendered calls", "", "What each template renders for the probe call, cut at the end-of-turn token.", ""]
    rows = [[t["id"], t["family"] or "—", t["arguments_style"], f"`{_cell(t['rendered_call'], 140)}`"]
            for t in report["templates"] if t["rendered_call"]]
    out.append(_table(rows, ["template", "family", "arguments", "rendered call"]))
    found = [t for t in report["templates"] if t["findings"]]
    if found:
        out += ["", "## Findings", "",
                "Named facts beside a template's verdict: `tools-as-functions` (tools reach the template only as "
                "llama.cpp passes them to Firefunction v2), `list-methods-refused` (what the template renders in a "
                "sandbox that differs from Hugging Face's only by allowing list methods; the verdict stays the "
                "refusal), `calls-through-content` (the template drops `tool_calls` and passes content through), "
                "`tools-in-system-prompt` (the template renders calls but never reads `tools`: the tool list goes "
                "where the model card says, and live runs put it there).",
                ""]
        rows = [[t["id"], f["name"], f.get("family") or "—", _cell(f["detail"], 200),
                 f"`{_cell(f['rendered_call'], 120)}`" if f.get("rendered_call") else ""]
                for t in found for f in t["findings"]]
        out.append(_table(rows, ["template", "finding", "family", "detail", "rendered call"]))
    declared = [t for t in report["templates"] if t["declared"]]
    if declared:
        out += ["", "## Declared families", "",
                "Templates that never render a call, whose pin declares the family with its evidence.", ""]
        out.append(_table([[t["id"], t["declared"]["family"], t["declared"]["model_card"],
                            _cell("; ".join(f"{k}: {v}" for k, v in t["declared"]["parsers"].items()), 160)]
                           for t in declared], ["template", "family", "model card", "peer parsers"]))
    out += _round_trip_section(report["templates"])
    failures = [t for t in report["templates"] if not t["full_conversation_renders"]]
    if failures:
        out += ["", "## Full tool conversation failures", "",
                "System, user, call, tool result, answer, follow-up, rendered with the detected argument style.", ""]
        out.append(_table([[t["id"], _cell(t["full_conversation_error"], 200)] for t in failures], ["template", "error"]))
    out += ["", "## Families", ""]
    rows = [[f["name"], f["label"], ", ".join(f"`{_cell(m, 30)}`" for m in f["markers"]),
             "yes" if f["start_only"] else "no", ", ".join(f["templates"]) or "—"] for f in report["families"]]
    out.append(_table(rows, ["family", "label", "markers", "whole reply", "templates"]))
    out += _matrix_section(report["matrix"])
    out += ["", "## Deviation names", "", "A rejected text is labelled with one of: " +
            ", ".join(f"`{d}`" for d in deviations.ALL) + ".", ""]
    return "\n".join(out)


def _round_trip_section(templates) -> list:
    forks = [t for t in templates if t["round_trips"] is False]
    if not forks:
        return []
    out = ["", "## Round trip forks", "",
           "Templates whose parsed call, rendered back as the assistant's message, is not the rendered call: where "
           "the two texts fork (character offset) and each from a little before it.", ""]
    rows = [[t["id"], t["family"], t["round_trip"]["error"] or t["round_trip"]["fork"]["offset"],
             f"`{_cell(t['round_trip']['fork']['rendered'], 80)}`" if t["round_trip"]["fork"] else "",
             f"`{_cell(t['round_trip']['fork']['round_trip'], 80)}`" if t["round_trip"]["fork"] else ""]
            for t in forks]
    out.append(_table(rows, ["template", "family", "fork at", "rendered", "rendered back"]))
    return out


def _matrix_section(m) -> list:
    names = m["families"]
    out = ["", "## Rejection matrix", "",
           "Rows: who wrote the texts (each family's canonical outputs, plus the rendered calls of templates "
           "detected as it; `(no family)` holds walls' rendered calls). Columns: the parser. A cell counts the texts "
           "the parser accepted. Near misses are in the JSON report, each rejected by every parser.", ""]
    rows = []
    for writer, counts in m["counts"].items():
        rows.append([writer] + [counts[r] if counts[r] else "·" for r in names])
    out.append(pd.DataFrame(rows, columns=["writer \\ parser", *names]).to_markdown(index=False))
    out += ["", f"Violations: {len(m['violations'])}" + ("" if not m["violations"] else ":"), ""]
    out += [f"- {v}" for v in m["violations"]]
    near = [c for c in m["cells"] if c["source"] == "near-miss"]
    out += ["", "### Near misses", "",
            f"{len(near)} near misses; each row gives the verdict of the family it imitates (its deviation name).", ""]
    out.append(_table([[c["writer"], c["label"].removeprefix("near miss: "), f"`{_cell(c['text'], 100)}`",
                        c["verdicts"][c["writer"]]] for c in near], ["family", "deviation", "text", "verdict"]))
    return out


def write(report: dict, results: ResultsDir) -> tuple:
    results.root.mkdir(parents=True, exist_ok=True)
    md, js = results.conformance
    for path in (md, js):
        check_target(path, results.root)
    write_atomically(md, markdown(report), results.root)
    write_atomically(js, dumps(report), results.root)
    return md, js
