"""`harness report`: every table rebuilt from transcripts alone (no model loaded), re-scored through the
current parsers, plus the replies the seed ADR quotes verbatim through the same scoring, in tables of their own
(reconstructed ones are shown as illustrations, never scored).

Outputs: results/<model>.md per model (one row per scenario: samples, rates with Wilson 95% intervals, named
deviations and findings, example replies of failed samples), results/summary.md across models,
results/heatmap.png (see harness.reports.heatmap), results/report.html (the tables with every sample's transcript, see
harness.reports.html_report)."""

import difflib
from collections import Counter
from pathlib import Path

import pandas as pd

from harness.core.errors import UnsafeWriteError
from harness.core.safe_writes import check_target
from harness.storage.records import ModelRecord
from harness.storage.results import ResultsDir
from harness.pins.sources import load_sources, resolve_template
from harness.reports import markdown
from harness.reports.rates import counts
from harness.reports.html_report import write_html
from harness.reports.staged import Pages, StagedWrites, report_lock
from harness.reports.tables import (
    EXAMPLES, FIRST_REPLIES, IN_PROCESS, LEGEND, RATES, Collected, checks_table, class_table, collect,
    coverage_lines, family_name, illustration_lines, mode_order, mode_table, rate_value, replay_table, row_labels,
    scenario_table, trade_off_lines,
)
from harness.reports.verdict import recorded_differences, top_deviations_lines, verdict_lines


def _diff_lines(old_text: str, new_text: str, old_name: str, new_name: str) -> list:
    diff = list(difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), old_name, new_name,
                                     lineterm="", n=0))
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    body = ["", "```diff", *_crop_pairs(diff[:24]), *(["…"] if len(diff) > 24 else []), "```", ""]
    return [f"+{added} −{removed} lines", body]


def _crop_pairs(diff: list, width: int = 150) -> list:
    """Long template lines cropped around where a removed line and the added line after it first differ, so
    a one-character change (the {{ of the Qwen2.5 GGUF quirk) is visible in the report."""
    out = list(diff)
    for i in range(len(out) - 1):
        old, new = out[i], out[i + 1]
        if old.startswith("-") and new.startswith("+") and not old.startswith("---") and max(len(old), len(new)) > width:
            at = next((k for k, (a, b) in enumerate(zip(old[1:], new[1:])) if a != b), min(len(old), len(new)) - 1)
            start = max(0, at - width // 2)
            out[i], out[i + 1] = (f"{line[0]}…{line[1 + start:1 + start + width]}…" for line in (old, new))
    return [line if len(line) <= width + 3 else line[:width] + "…" for line in out]


def _official_templates(sources) -> list:
    """Templates as the model makers publish them (not read out of a GGUF), present on disk."""
    return [t for t in sources.templates.values() if t.model is None and t.path.is_file()]


def template_comparison(model_record: ModelRecord | None, model_id: str, sources) -> list:
    """Whether the template the model ran with is byte-identical to its pin and to an official template,
    and if not, how it differs (the seed ADR's Qwen2.5 GGUF quirk is such a difference)."""
    if model_record is None:
        return ["- Template: no model record in the transcript."]
    tpl = model_record.template
    source = {"gguf": "the GGUF's embedded template",
              "llama.cpp-default-chatml": "llama.cpp's default ChatML (the GGUF embeds no chat template)"}
    lines = [f"- Template used: {source.get(tpl['source'], tpl['source'])} (sha256 `{tpl['sha256'][:16]}…`)"]
    pin = sources.models[model_id].template if model_id in sources.models else None
    if pin is None:
        lines.append("- sources.json pins no template for this model.")
    elif sources.templates[pin].sha256 == tpl["sha256"]:
        lines.append(f"- Byte-identical to its pin in sources.json (`{pin}`).")
    else:
        summary, body = _diff_lines(resolve_template(pin, sources).text, tpl["text"], pin, tpl["source"])
        lines += [f"- **Differs from its pin** `{pin}` in sources.json: {summary}", *body]
    official = _official_templates(sources)
    same = [t.id for t in official if t.sha256 == tpl["sha256"]]
    if same:
        lines.append(f"- Byte-identical to the official template {', '.join(f'`{i}`' for i in same)}.")
        return lines
    used = tpl["text"].splitlines()
    texts = {t.id: t.path.read_text(encoding="utf-8") for t in official}
    ranked = sorted(texts, key=lambda i: difflib.SequenceMatcher(None, texts[i].splitlines(), used).ratio(),
                    reverse=True)
    if not ranked:
        return lines
    closest = ranked[0]
    ratio = difflib.SequenceMatcher(None, texts[closest].splitlines(), used).ratio()
    if ratio < 0.5:
        lines.append("- Byte-identical to no official template, and close to none.")
        return lines
    summary, body = _diff_lines(texts[closest], tpl["text"], closest, tpl["source"])
    lines += [f"- Not byte-identical to any official template; closest is `{closest}`: {summary}", *body]
    return lines


def model_markdown(model_id: str, frame: pd.DataFrame, collected: Collected, sources) -> str:
    live = frame[~frame["replayed"]] if not frame.empty else frame
    replayed = frame[frame["replayed"]] if not frame.empty else frame
    illustrations = [i for i in collected.illustrations if i["model"] == model_id]
    record = collected.models.get(model_id)
    lines = [f"# {markdown.line(model_id)}", ""]
    if record is not None:
        det = record.detection or {}
        lines += [_model_file_line(r) for (m, _), r in sorted(collected.model_files.items()) if m == model_id]
        lines += [
                  f"- Family: **{markdown.line(record.family or 'none (chat without tools)')}**: "
                  f"{markdown.line(det.get('reason', ''))}"]
        if record.template_kwargs:
            lines.append(f"- Template variables: {record.template_kwargs}")
    if record is not None:
        lines += template_comparison(record, model_id, sources)
    elif not replayed.empty or illustrations:
        family = replayed["family"].iloc[0] if not replayed.empty else illustrations[0]["family"]
        lines.append(f"- Not run here (no transcript; fetch it with `harness fetch --models {model_id}` where the Hub "
                     f"is reachable). Family as the seed ADR reports detection: {family_name(family)}.")
    if not live.empty:
        seconds = live["seconds"].dropna()
        lines += [f"- Live samples: {len(live)}, mode {', '.join(sorted(live['mode'].unique()))}; "
                  f"{seconds.sum():.0f} s of generation ({seconds.mean():.1f} s a sample)"]
        changed = int(live["parse_changed"].sum())
        if changed:
            lines.append(f"- {changed} sample(s) parse differently now than when they were recorded (re-scored).")
        differ = recorded_differences(live)
        if differ:
            lines.append(f"- {markdown.line(differ)}")
    stale = sum(n for (m, _), n in collected.stale.items() if m == model_id)
    if stale:
        lines.append(f"- {stale} older record(s) of since-changed scenarios or setups (grammar, fallback rule) left "
                     "out (`harness run` runs them again and supersedes them).")
    lines.append("")
    if not frame.empty:
        lines += [LEGEND, ""]
    if not live.empty:
        lines += coverage_lines(collected.scenarios) + [""]
    runtimes = sorted(set(live["runtime"])) if not live.empty else []
    for runtime in runtimes:
        # One id served by a runtime and run in process: each runtime's tables apart, never merged.
        part = live[live["runtime"] == runtime]
        where = f" ({runtime})" if len(runtimes) > 1 else ""
        if part["mode"].nunique() > 1:
            lines += [f"## Modes{where}", "", "All scenarios together, per mode (native: the model's template and "
                      "parser; grammar: sampling constrained by a grammar from the tool schemas; fallback: native, "
                      f"with a failed step rewritten under the grammar; {FIRST_REPLIES}: its native first replies, "
                      "before the rewrite).", "", markdown.table(mode_table(part)), "",
                      *map(markdown.line, trade_off_lines(part)), ""]
        lines += [f"## Live, by scenario and mode{where}", "",
                  markdown.table(scenario_table(part), verbatim=(EXAMPLES,)), ""]
    if not replayed.empty:
        lines += ["## Quoted by the seed ADR (not run here)", "",
                  "Replies the ADR quotes verbatim, each scored on its own (one reply is no rate; the ADR quotes no "
                  "answer, so the answer checks do not apply).", "",
                  markdown.table(replay_table(replayed), verbatim=("reply",)), ""]
        for _, r in replayed.iterrows():
            lines.append(f"- {r['scenario']}: the ADR: “{r['quote']}”"
                         + (f" Note: {r['note']}" if isinstance(r["note"], str) else ""))
        lines.append("")
    if illustrations:
        lines += ["## Reconstructed from the seed ADR's description (illustrations, not scored)", "",
                  "The ADR describes these replies without quoting them whole; the text below is ours, so scoring "
                  "it would grade our own writing. Shown with what the strict parser reads in it.", "",
                  *illustration_lines(illustrations), ""]
    notes = [d for d in collected.described if d["model"] == model_id]
    if notes:
        lines += ["Described by the ADR without a reply to replay (not scored):", ""]
        lines += [f"- {d['scenario'] or 'prompt not given'}: {d['what']} ({d['why']})" for d in notes] + [""]
    return "\n".join(lines)


def _model_file_line(record: ModelRecord) -> str:
    runtime = record.runtime if isinstance(record.runtime, dict) else {}
    if record.model.sha256 == "served":
        name = runtime.get("name") if isinstance(runtime.get("name"), str) else "a runtime"
        endpoints = ", ".join(str(e) for e in runtime.get("endpoints") or []) if isinstance(
            runtime.get("endpoints"), list) else ""
        return f"- Served by {name}" + (f" at {endpoints}" if endpoints else "") + " (weights not hashed here)"
    return f"- Model file sha256: `{record.model.sha256}` ({record.model.file})"


def summary_markdown(collected: Collected, more=()) -> str:
    """more: the sentences the suites add to the bottom line (harness.reports.staged.Pages.bottom_line)."""
    frame = collected.samples
    live = frame[~frame["replayed"]]
    quoted = frame[frame["replayed"]]
    names = lambda due: ", ".join(s.name for s in collected.scenarios if s.call_due is due)  # noqa: E731
    lines = ["# Summary", "", _provenance(collected, quoted), ""]
    differ = recorded_differences(live) if not live.empty else None
    if differ:
        lines += [markdown.line(differ), ""]
    if not live.empty:
        lines += ["## Bottom line", "", *verdict_lines(live, more)]
    lines += [_reading_guide(collected), "", LEGEND, "",
              "## What each scenario checks", "", markdown.table(checks_table(collected.scenarios)), "",
              *coverage_lines(collected.scenarios), ""]
    if not live.empty:
        lines += ["## Top deviations per model", "",
                  "The named near misses (deviations) and behaviours (findings) each model's live samples show "
                  "most, over all its modes.", "", *top_deviations_lines(live), ""]
        lines += ["## Models and modes", "", f"### Call due ({names(True)})", "",
                  markdown.table(class_table(live, True)), "",
                  f"### No call due ({names(False)})", "", markdown.table(class_table(live, False)), "",
                  "### All scenarios", "", markdown.table(class_table(live, None)), ""]
    trade = [markdown.line(t) for t in trade_off_lines(live)]
    if trade:
        lines += ["## The trade-off: what a grammar buys", "",
                  "A grammar makes the call's syntax right once it is triggered; whether the model then picks the "
                  "right tool with the right arguments, and still answers, is what these differences show "
                  "(percentage points against native on the same scenarios and seeds, counted only where the "
                  "grammar or the fallback wrote a step).", "", *trade, ""]
    if not live.empty:
        lines += ["## All checks passed, by scenario", "",
                  "Samples that passed every check, of those run (*k/n*, with the distinct replies where they "
                  "repeat); –: the row did not run the scenario.", "", markdown.table(pass_grid(live), index=True), "",
                  "The heat map's top panel is the funnel, per model and mode: each stage a sample passes through "
                  "(call due: chose the tool, wrote it parseably, right tool, right arguments, used the result, "
                  "answered, all checks; no call due: made no call, answered, all checks). Every sample's "
                  "transcript (raw replies, parses, deviations, verdicts) is in [report.html](report.html).", "",
                  "![heat map](heatmap.png)", ""]
    if not quoted.empty:
        lines += ["## Quoted by the seed ADR (not run here)", "",
                  "Replies the ADR quotes verbatim, scored one by one (the ADR quotes no answers).", "",
                  markdown.table(replay_table(quoted, with_model=True), verbatim=("reply",)), ""]
    if collected.illustrations:
        lines += ["Reconstructed from the ADR's description, shown as illustrations and never scored: "
                  + "; ".join(sorted({f"{i['model']} ({i['scenario']})" for i in collected.illustrations}))
                  + ". See each model's page.", ""]
    return "\n".join(lines)


def _provenance(collected: Collected, quoted: pd.DataFrame) -> str:
    """Where the tables come from: the folder read (as the project names it, relative for its own results/)."""
    source = collected.source
    folder = "results" if source is None or source.is_project else str(source.root)
    if quoted.empty and not collected.illustrations:
        return (f"Rebuilt by `harness report` from {folder}/transcripts/*.jsonl, through the current parsers "
                "(live samples only).")
    return (f"Rebuilt by `harness report` from {folder}/transcripts/*.jsonl and scenarios/replays/*.yaml, "
            "through the current parsers. Live samples only in the rates; the replies the seed ADR quotes are in "
            "a table of their own below.")


READING_GUIDE = "docs/reading-the-reports.md"


def _reading_guide(collected: Collected) -> str:
    """Where the tables are explained: a link that resolves from the project's results/, the path elsewhere."""
    source = collected.source
    if source is None or source.is_project:
        return f"How to read these tables: [{READING_GUIDE}](../{READING_GUIDE})."
    return f"How to read these tables: {READING_GUIDE} in the harness checkout."


def pass_grid(frame: pd.DataFrame) -> pd.DataFrame:
    """Models and modes (rows) × scenarios: of the live samples run, those that passed every check, as counts
    (with the distinct replies where they repeat); '–' where the row did not run the scenario."""
    labels = row_labels(frame)
    framed = frame.assign(label=labels)
    cells = {(label, scenario): _count_cell(group)
             for (label, scenario), group in framed.groupby(["label", "scenario"], sort=True)}
    order = framed.drop_duplicates("label")
    order = sorted(zip(order["model"], order["runtime"], order["mode"].map(mode_order), order["label"]))
    rows = [label for *_, label in order]
    scenarios = sorted(set(frame["scenario"]))
    return pd.DataFrame([[cells.get((row, s), "–") for s in scenarios] for row in rows], index=rows,
                        columns=scenarios)


def _count_cell(group: pd.DataFrame) -> str:
    k, n, kd, nd = counts(group["passed"], group["reply_key"])
    if not n:
        return "–"
    return f"{k}/{n}" + (f", {kd}/{nd} distinct" if nd != n else "")


def write_reports(results_dir: Path | None = None, scenarios_dir: Path | None = None, plot=True,
                  replays: bool | None = None, pages=()) -> dict:
    """replays: add the seed ADR's quoted replies (harness.reports.tables.collect: by default to results/ only).
    pages: the writers of pages this floor cannot import (the suites above it, harness.suites: `harness report`
    hands their FolderSuite.write_pages down), each Pages -> paths written (harness.reports.staged.Pages), run
    with the other pages and put in place with them; a page that opens report.html adds its HTML fragment to
    Pages.first_screen, which report.html shows first, above the bottom line, a section of report.html to
    Pages.sections (after the tables, in the order the suites are registered), and sentences of the bottom line
    of summary.md and report.html to Pages.bottom_line (BFCL's). Each suite checks its own pages' paths before it
    stages them."""
    results = ResultsDir.at(results_dir)
    collected = collect(results, scenarios_dir, replays)
    sources = load_sources()
    frame = collected.samples
    models = sorted(set(frame["model"]) | {i["model"] for i in collected.illustrations}) if not frame.empty else []
    # Every file this report may write is checked before any is written: a link planted at one of them (to a
    # file outside the folder) stops the report with its path, not half way through rewriting the others.
    for path in [results.summary, results.html, results.heatmap, *map(results.model_table, models)]:
        try:
            check_target(path, results.root)
        except UnsafeWriteError as exc:
            raise UnsafeWriteError(f"cannot write the reports into {results.root}: {exc}") from None
    # Every file to a temporary name first, all put in place at the end: a report that fails halfway leaves
    # the previous reports whole. One report at a time per folder, which clears what a killed one left staged.
    with report_lock(results.root), StagedWrites() as staged:
        context, written = Pages(results, collected.warnings, staged, samples=collected.samples), []
        for page in pages:
            written += page(context)
        if collected.samples.empty:
            staged.commit()
            return {"written": written, "warnings": collected.warnings, "skipped": collected.skipped,
                    "models": {}}
        for model in models:
            text = model_markdown(model, frame[frame["model"] == model], collected, sources)
            written.append(str(staged.text(results.model_table(model), text)))
        written.append(str(staged.text(results.summary, summary_markdown(collected, context.bottom_line))))
        written += write_html(collected, results.html, context, results.conformance[1], staged)
        if plot and not frame[~frame["replayed"]].empty:
            from harness.reports.heatmap import draw_heatmap  # matplotlib loads only when a picture is drawn

            draw_heatmap(frame[~frame["replayed"]], staged.file(results.heatmap))
            written.append(str(results.heatmap))
        staged.commit()
    _remove_stale_pages(results, written)
    return {"written": written, "warnings": collected.warnings, "skipped": collected.skipped,
            "models": json_summary(collected)}


def _remove_stale_pages(results: ResultsDir, written: list) -> None:
    """Sample pages of an earlier report that this one did not write (fewer samples, a model gone)."""
    kept = set(written)
    for path in results.sample_page_files():
        if str(path) not in kept:
            path.unlink()


def json_summary(collected: Collected) -> dict:
    out = {}
    keys = ["model", "runtime", "replayed", "mode", "scenario"]
    for (model, runtime, replayed, mode, scenario), group in collected.samples.groupby(keys):
        # Native keeps the plain model key (the --json contract); other modes are keyed "<model> [<mode>]", and a
        # served model's samples "<model> @<runtime>", apart from the same id in process.
        label = (model + (f" @{runtime}" if runtime != IN_PROCESS else "") + (f" [{mode}]" if mode != "native" else "")
                 + (" (replayed)" if replayed else ""))
        entry = out.setdefault(label, {})
        entry[scenario] = {"samples": len(group), **{k: rate_value(group[k]) for k in RATES},
                           "deviations": dict(Counter(d for ds in group["deviations"] for d in ds)),
                           "findings": dict(Counter(f for fs in group["findings"] for f in fs))}
    return out
