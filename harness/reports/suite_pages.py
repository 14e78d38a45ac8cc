"""The markdown pages of the runtime suites (harness.evaluation.suite), rebuilt by `harness report` from their
records: DIR/runtime-conformance.md, which opens on its root causes and lists every disagreement with its reply
and the command that replays it (disagreement_lines, which the parser-agreement suite's page uses too). A suite without a page of its own here gets labels_page: its labels, what
they mean and how many records carry each, then every disagreement with its replay."""

from __future__ import annotations

import json
from pathlib import Path

from harness.backends import runtimes
from harness.backends.binaries import build_words
from harness.evaluation import history_cases, runtime_conformance
from harness.evaluation.judging import cell
from harness.evaluation.runtime_causes import cause_line, root_causes
from harness.evaluation.runtime_versions import compare, comparison_lines
from harness.evaluation.suite import Suite, registered


def conformance_replay(record) -> str:
    """The line that asks a runtime-conformance record again: through the script its runtime's module names where
    the harness does not start that runtime but a script of the repository serves it (vLLM's CPU build and
    transformers serve: the server started, asked, stopped), else the suite's own line."""
    runtime = runtimes.of_record(record.runtime)
    return (runtime.replay(record) if runtime else None) or runtime_conformance.replay_command(record)


def disagreement_lines(records: list, order, head, replay, limit: int = 160) -> list:
    """The "Disagreements" section of a suite's page: each record not labelled agree, in `order`, as `head(r)`,
    its labels and details, then its reply and the command `replay(r)` that asks it again."""
    lines = ["", "## Disagreements", ""]
    for r in sorted(records, key=order):
        if r.labels == ["agree"]:
            continue
        lines.append(f"- {head(r)}: `{'`, `'.join(r.labels)}` — {'; '.join(r.details)}")
        lines.append(f"  reply {cell(r.reply, limit)}; replay: `{replay(r)}`")
    return lines


def conformance_markdown(records: list, unscripted: list) -> str:
    """results/runtime-conformance.md: the root causes (one line each: what a runtime does, how many requests,
    which families, a replay), the runtimes, the runtime × family matrix, then every disagreement grouped under its
    cause with its reply and the command that replays it. unscripted: (template id, why no scripted model is built
    for it)."""
    suite = runtime_conformance.SUITE
    labels = suite.label_names
    causes = root_causes(records)
    lines = ["# Runtime conformance", "",
             "Scripted models (real GGUFs: a family's vocabulary, the pinned template, weights that write exact "
             "replies) write every case of each template's corpus through the runtime's /v1/chat/completions, "
             "non-streamed and streamed. Each request is labelled by what the runtime did with a reply whose "
             "strict parse is known; a request can carry several labels (a row counts each once). Labels are "
             "defined in harness/evaluation/runtime_conformance.py; the corpus in "
             "harness/evaluation/runtime_corpus.py; root causes in harness/evaluation/runtime_causes.py; made by "
             "`harness runtime-conformance` and `harness report`. Replays run from the repository root and print "
             "each request's labels and details.", "", "## Root causes", "",
             "Each disagreeing request under one cause: its most telling label (an error, then what the runtime "
             "parsed, then a rewrite or a stream that differs, then a prompt that differs), most requests first.", ""]
    lines += [f"{n}. {cause_line(c, conformance_replay)}" for n, c in enumerate(causes, 1)] or ["None."]
    lines += version_sections(records)
    lines += ["", "## Runtimes", "", *runtime_table(records), *unread_lines(records), "",
              "## Matrix", "", "| runtime | family | templates | requests | " + " | ".join(labels) + " |",
              "|---|---|---:|---:|" + "---:|" * len(labels)]
    for row in suite.matrix(records):
        lines.append(f"| {row['runtime']} | {row['family']} | {len(row['templates'])} | {row['requests']} | "
                     + " | ".join(str(row[k]) for k in labels) + " |")
    lines += history_lines(records)
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
    root causes side by side (harness.evaluation.runtime_versions)."""
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
    (harness.evaluation.history_cases). Nothing where no record carries such a history."""
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
            "several models in one process | request fields it ignores |", "|---|---|---|---|---|---|---|---|"]
    builds: dict = {}
    for r in records:
        builds.setdefault((r.runtime, r.server), {})[repr(sorted((r.build or {}).items()))] = r.build
    for name, server in sorted(builds):
        runtime = runtimes.get(server) if server in runtimes.RUNTIMES else runtimes.of_record(name)
        built = "; ".join(build_words(b) for _, b in sorted(builds[(name, server)].items()))
        if runtime is None:
            rows.append(f"| {name} | {server} | served by the user (--endpoint) | {built} | the manifest, checked "
                        "against usage.prompt_tokens | – | – | – |")
            continue
        ignores = "; ".join(f"`{k}` ({why})" for k, why in runtime.ignores.items()) or "none known"
        keyed = ("its rendered prompt, counted" if runtime.shows_prompt and server != "endpoint" else
                 "the manifest, checked against usage.prompt_tokens" if server == "endpoint" else "usage.prompt_tokens")
        rows.append(f"| {name} | {server} | {runtime.summary} | {built} | {keyed} | "
                    f"{'yes' if runtime.shows_sampled_ids else 'no'} | "
                    f"{'yes' if runtime.hosts_several_models else 'no'} | {ignores} |")
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


def _conformance_page(records: list, results_dir: Path) -> str:
    asked = {r.template["sha256"]: r.template["id"] for r in records}
    unscripted = [(t, why) for t, why in unscripted_templates(results_dir, asked) if t not in asked.values()]
    return conformance_markdown(records, unscripted)


def _labels(record) -> list:
    return list(record.labels) if hasattr(record, "labels") else [record.label]


def labels_page(suite: Suite, records: list) -> str:
    """The page of a suite that has none of its own: each label, what it means and how many records carry it,
    then each record not labelled agree with the command that replays it."""
    counts = {label: 0 for label in suite.label_names}
    for r in records:
        for label in {suite.label_head(x) for x in _labels(r)}:
            counts[label] = counts.get(label, 0) + 1
    module = suite.classify.__module__.replace(".", "/") + ".py"
    lines = [f"# {suite.name}", "", f"{len(records)} records; labels are defined in {module}.", "",
             "| label | meaning | records |", "|---|---|---:|"]
    lines += [f"| {label} | {suite.labels.get(label, '(not a label of this suite)')} | {n} |"
              for label, n in counts.items()]
    lines += ["", "## Disagreements", ""]
    lines += sorted(f"- `{'`, `'.join(_labels(r))}`; replay: `{suite.replay_command(r)}`" for r in records
                    if _labels(r) != ["agree"])
    return "\n".join(lines) + "\n"


# Suite name -> its page, page(records, results folder): the folder for what the page says the suite left out.
PAGES = {
    runtime_conformance.SUITE.name: _conformance_page,
}


def page_for(suite: Suite):
    return PAGES.get(suite.name) or (lambda records, results_dir: labels_page(suite, records))


def write_pages(results_dir: Path, records: dict, staged) -> list:
    """DIR/<page> of every registered suite that has records (records: suite name -> its records), in the
    table's order, staged (harness.reports.staged) to be put in place with the rest of the report; the paths."""
    written = []
    for name, suite in registered().items():
        if records.get(name):
            out = Path(results_dir) / suite.page
            staged.text(out, page_for(suite)(records[name], Path(results_dir)))
            written.append(str(out))
    return written
