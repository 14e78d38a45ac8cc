"""The runtime-conformance suite's pages, rebuilt by `harness report` from its records: DIR/runtime-conformance.md
(its root causes, the builds side by side, the runtimes, the runtime × family matrix, the history cases, then every
disagreement under its cause with its reply and the command that replays it) and its section of report.html."""

from __future__ import annotations

import json
from pathlib import Path

from harness.backends import runtimes
from harness.backends.binaries import build_words
from html import escape

import pandas as pd

from harness.evaluation.judging import cell
from harness.reports.html_overview import table_section
from harness.suites import stage_page
from harness.suites.runtime_conformance import history_cases
from harness.suites.runtime_conformance.causes import cause_line, root_causes
from harness.suites.runtime_conformance.coverage import gap_lines, gaps
from harness.suites.runtime_conformance.judging import LABELS, matrix, replay_command
from harness.suites.runtime_conformance.versions import compare, comparison_lines


def conformance_replay(record) -> str:
    """The line that asks a runtime-conformance record again: through the script its runtime's module names where
    the harness does not start that runtime but a script of the repository serves it (vLLM's CPU build and
    transformers serve: the server started, asked, stopped), else the suite's own line."""
    runtime = runtimes.of_record(record.runtime)
    return (runtime.replay(record) if runtime else None) or replay_command(record)


def conformance_markdown(records: list, unscripted: list, unasked: list = ()) -> str:
    """results/runtime-conformance.md: the root causes (one line each: what a runtime does, how many requests,
    which families, a replay), the runtimes, the runtime × family matrix, then every disagreement grouped under its
    cause with its reply and the command that replays it. unscripted: (template id, why no scripted model is built
    for it); unasked: the lines of the section on requests not asked (coverage.gap_lines)."""
    labels = tuple(LABELS)
    causes = root_causes(records)
    lines = ["# Runtime conformance", "",
             "Scripted models (real GGUFs: a family's vocabulary, the pinned template, weights that write exact "
             "replies) write every case of each template's corpus through the runtime's /v1/chat/completions, "
             "non-streamed and streamed. Each request is labelled by what the runtime did with a reply whose "
             "strict parse is known; a request can carry several labels (a row counts each once). Labels are "
             "defined in harness/suites/runtime_conformance/judging.py; the corpus in "
             "harness/suites/runtime_conformance/corpus.py; root causes in harness/suites/runtime_conformance/causes.py; made by "
             "`harness runtime-conformance` and `harness report`. Replays run from the repository root and print "
             "each request's labels and details.", "", "## Root causes", "",
             "Each disagreeing request under one cause: its most telling label (an error, then what the runtime "
             "parsed, then a rewrite or a stream that differs, then a prompt that differs), most requests first.", ""]
    lines += [f"{n}. {cause_line(c, conformance_replay)}" for n, c in enumerate(causes, 1)] or ["None."]
    lines += version_sections(records)
    lines += ["", "## Runtimes", "", *runtime_table(records), *unread_lines(records), "",
              "## Matrix", "", "| runtime | family | templates | requests | " + " | ".join(labels) + " |",
              "|---|---|---:|---:|" + "---:|" * len(labels)]
    for row in matrix(records):
        lines.append(f"| {row['runtime']} | {row['family']} | {len(row['templates'])} | {row['requests']} | "
                     + " | ".join(str(row[k]) for k in labels) + " |")
    lines += history_lines(records)
    lines += list(unasked)
    if unscripted:
        lines += ["", "## Templates without a scripted model", ""]
        lines += [f"- {t}: {why}" for t, why in unscripted]
    lines += ["", "## Disagreements by root cause", ""]
    for n, cause in enumerate(causes, 1):
        lines += [f"### {n}. {cause.runtime} {cause.does} ({len(cause.records)})", ""]
        for r in cause.records:
            lines.append(f"- {r.template['id']} ({r.family}) / {r.case['name']}/{r.variant}: "
                         f"`{'`, `'.join(r.labels)}` — {'; '.join(r.details)}")
            lines.append(f"  reply {cell(r.reply, 160)}; replay: `{conformance_replay(r)}`")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def version_sections(records: list) -> list:
    """For each registered runtime that is a newer build of another (Runtime.newer_than), both with records: their
    root causes side by side (harness.suites.runtime_conformance.versions)."""
    lines = []
    for runtime in runtimes.every():
        if runtime.newer_than is None:
            continue
        older = runtimes.get(runtime.newer_than)
        comparison = compare(records, older.record_name, runtime.record_name)
        if comparison is not None:
            lines += ["", *comparison_lines(comparison, older.version, runtime.version, conformance_replay)]
    return lines


def history_lines(records: list) -> list:
    """The history section: per runtime, how its render of a history with the reasoning it returned sent back
    compares with the template's, then per template and case what the template does and what each runtime does
    (harness.suites.runtime_conformance.history_cases). Nothing where no record carries such a history."""
    asked = [r for r in records if r.history]
    if not asked:
        return []
    runtimes_asked = sorted({r.runtime for r in asked})
    words = ("as the template", "dropped", "kept", "differs", "error")
    lines = ["", "## History: the reasoning sent back", "",
             "The reasoning and call of a template's `reasoning-then-call` reply, sent back as an OpenAI client sends "
             "a runtime's answer (`reasoning_content`, `tool_calls`), then the tool result (`"
             f"{history_cases.AFTER_TOOL}`), or the tool result, the answer and a new user turn (`"
             f"{history_cases.AFTER_USER}`). The runtime's prompt for the next request (its /apply-template text, "
             "else its length) is held against the pinned template's render of the same messages, with and "
             "without the reasoning: `as the template` (the same render, or one that differs only in how the "
             "arguments or switches reach the template), `dropped` (history-reasoning-dropped), `kept` "
             "(history-reasoning-kept), `differs` (history-differs), `error` (no prompt: the runtime answered the "
             "request with an error, see its root cause).", "",
             "| runtime | requests | " + " | ".join(words) + " |", "|---|---:|" + "---:|" * len(words)]
    for runtime in runtimes_asked:
        mine = [history_cases.verdict(r) for r in asked if r.runtime == runtime]
        lines.append(f"| {runtime} | {len(mine)} | " + " | ".join(str(mine.count(w)) for w in words) + " |")
    by_case: dict = {}
    for r in asked:
        by_case.setdefault((r.template["id"], r.family, r.case["name"]), {})[r.runtime] = r
    lines += ["", "| template | family | case | the template | " + " | ".join(runtimes_asked) + " |",
              "|---|---|---|---|" + "---|" * len(runtimes_asked)]
    for (template, family, case), seen in sorted(by_case.items()):
        does = next(iter(seen.values())).history["template"]
        lines.append(f"| {template} | {family} | {case} | {does} | "
                     + " | ".join(history_cases.verdict(seen[x]) if x in seen else "–" for x in runtimes_asked) + " |")
    return lines


def runtime_table(records: list) -> list:
    """What each runtime of the records is, from its module in harness.backends.runtimes (by its `--server`
    name, else by the name its records carry; a runtime served by the user, or no longer registered, by its
    records' name only)."""
    rows = ["| runtime | server | what it is | build (as its records say) | prompt length from | sampled ids shown | "
            "several models in one process | request fields it ignores | set in its environment |",
            "|---|---|---|---|---|---|---|---|---|"]
    builds: dict = {}
    for r in records:
        builds.setdefault((r.runtime, r.server), {})[repr(sorted((r.build or {}).items()))] = r.build
    for name, server in sorted(builds):
        runtime = runtimes.of_records(server, name)
        built = "; ".join(build_words(b) for _, b in sorted(builds[(name, server)].items()))
        if runtime is None:
            rows.append(f"| {name} | {server} | served by the user (--endpoint) | {built} | the manifest, checked "
                        "against usage.prompt_tokens | – | – | – | – |")
            continue
        ignores = "; ".join(f"`{k}` ({why})" for k, why in runtime.ignores.items()) or "none known"
        keyed = ("its rendered prompt, counted" if runtime.shows_prompt and server != "endpoint" else
                 "the manifest, checked against usage.prompt_tokens" if server == "endpoint" else "usage.prompt_tokens")
        rows.append(f"| {name} | {server} | {runtime.summary} | {built} | {keyed} | "
                    f"{'yes' if runtime.shows_sampled_ids else 'no'} | "
                    f"{'yes' if runtime.hosts_several_models else 'no'} | {ignores} | "
                    f"{runtimes.started_with(server, name) or 'nothing'} |")
    return rows


def unread_lines(records: list) -> list:
    """The templates a runtime was given with no parser to read their calls (its module's no_reader: transformers
    serve where transformers has no response template for the family), so each such record reads as what that
    runtime's users get, not as a parser that failed."""
    lines = []
    for name in sorted({r.runtime for r in records}):
        runtime = runtimes.of_record(name)
        if runtime is None or not runtime.no_reader:
            continue
        unread = [r for r in records
                  if r.runtime == name and runtime.call_reader(r.family, r.template["id"]) is None]
        if unread:
            templates = sorted({r.template["id"] for r in unread})
            families = ", ".join(sorted({r.family or "none" for r in unread}))
            lines += ["", f"{name}, {runtime.no_reader}: {len(templates)} template(s), {len(unread)} request(s), "
                          f"families {families}: {', '.join(templates)}."]
    return lines


def unscripted_templates(results_dir: Path, asked: dict) -> list:
    """(template, why) for the templates of conformance.json that have no records: no detected family (no call
    shape to script), or the same bytes as a template that was asked (asked: sha256 -> template id)."""
    path = results_dir / "conformance.json"
    if not path.is_file():
        return []
    out = []
    for row in json.loads(path.read_text(encoding="utf-8")).get("templates") or []:
        if row.get("status") != "detected":
            out.append((row["id"], f"{row['status']}: {row['reason']}"))
        elif row.get("sha256") in asked:
            out.append((row["id"], f"the same template as {asked[row['sha256']]}"))
    return out


def markdown(records: list, results_dir: Path) -> str:
    """results/runtime-conformance.md, naming the templates of results_dir's conformance.json left unscripted."""
    asked = {r.template["sha256"]: r.template["id"] for r in records}
    unscripted = [(t, why) for t, why in unscripted_templates(results_dir, asked) if t not in asked.values()]
    return conformance_markdown(records, unscripted, gap_lines(gaps(records)))


def html_section(records: list) -> str:
    """Its section of report.html: the root causes, then requests per label for each runtime and family."""
    frame = pd.DataFrame([{"runtime": row["runtime"], "family": row["family"], "templates": len(row["templates"]),
                           "requests": row["requests"], **{k: row[k] for k in LABELS}} for row in matrix(records)])
    causes = "".join(f"<li>{escape(cause_line(c, conformance_replay))}</li>" for c in root_causes(records))
    # A column per label: the "labels" class lets its headers wrap.
    return table_section("runtime-conformance", "Runtime conformance",
                         "Exact replies of scripted models through each runtime's /v1/chat/completions. Root causes "
                         "first (what the runtime does, how many requests, which families, a replay run from the "
                         f"repository root):</p><ol>{causes}</ol><p>Requests per label. Every disagreement, under its "
                         "cause with its reply and the command that replays it, is in runtime-conformance.md.", frame,
                         cls="labels")


def write_pages(pages, records: list, page: str) -> list:
    """DIR/<page> and the report.html section, staged with the rest of the report; nothing without records."""
    if not records:
        return []
    return stage_page(pages, page, lambda: markdown(records, pages.results.root), lambda: html_section(records))
