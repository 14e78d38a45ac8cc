"""`harness report`: every table rebuilt from transcripts alone (no model loaded), re-scored through the
current parsers, plus the seed ADR's replayed replies through the same scoring.

Outputs: results/<model>.md per model (one row per scenario: samples, rates with Wilson 95% intervals, named
deviations and findings, example replies of failed samples), results/summary.md across models,
results/heatmap.png (see harness.reports.heatmap), results/report.html (the tables with every sample's transcript, see
harness.reports.html_report)."""

import difflib
import json
from collections import Counter
from pathlib import Path

import pandas as pd

from harness.core import constants
from harness.evaluation.runtime_agreement import agreement_markdown, read_records
from harness.evaluation.runtime_conformance import conformance_markdown
from harness.evaluation.runtime_conformance import read_records as read_conformance
from harness.pins.sources import load_sources, resolve_template
from harness.reports.html_report import write_html
from harness.reports.tables import (
    LEGEND, RATES, Collected, by_mode, collect, mode_order, mode_table, rate_cell, rate_value, replay_table,
    scenario_table, trade_off_lines,
)


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


def template_comparison(model_record: dict | None, model_id: str, sources) -> list:
    """Whether the template the model ran with is byte-identical to its pin and to an official template,
    and if not, how it differs (the seed ADR's Qwen2.5 GGUF quirk is such a difference)."""
    if model_record is None:
        return ["- Template: no model record in the transcript."]
    tpl = model_record["template"]
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
    live = frame[~frame["replayed"]]
    replayed = frame[frame["replayed"]]
    record = collected.models.get(model_id)
    lines = [f"# {model_id}", ""]
    if record is not None:
        det = record.get("detection", {})
        lines += [f"- Model file sha256: `{record['model']['sha256']}` ({record['model'].get('file')})",
                  f"- Family: **{record.get('family') or 'none (chat without tools)'}**: {det.get('reason', '')}"]
        if record.get("template_kwargs"):
            lines.append(f"- Template variables: {record['template_kwargs']}")
    if record is not None:
        lines += template_comparison(record, model_id, sources)
    elif not replayed.empty:
        lines.append(f"- Not run here (no transcript; fetch it with `harness fetch --models {model_id}` where the Hub "
                     f"is reachable). Family as the seed ADR reports detection: {_family(replayed['family'].iloc[0])}.")
    if not live.empty:
        seconds = live["seconds"].dropna()
        lines += [f"- Live samples: {len(live)}, mode {', '.join(sorted(live['mode'].unique()))}; "
                  f"{seconds.sum():.0f} s of generation ({seconds.mean():.1f} s a sample)"]
        changed = int(live["parse_changed"].sum())
        if changed:
            lines.append(f"- {changed} sample(s) parse differently now than when they were recorded (re-scored).")
    stale = sum(n for (m, _), n in collected.stale.items() if m == model_id)
    if stale:
        lines.append(f"- {stale} older record(s) of since-changed scenarios left out (re-run to refresh).")
    lines += ["", LEGEND, ""]
    if not live.empty:
        if live["mode"].nunique() > 1:
            lines += ["## Modes", "", "All scenarios together, per mode (native: the model's template and parser; "
                      "grammar: sampling constrained by a grammar from the tool schemas; fallback: native, with a "
                      "failed step rewritten under the grammar).", "", mode_table(live).to_markdown(index=False), "",
                      *trade_off_lines(live), ""]
        lines += ["## Live, by scenario and mode", "", scenario_table(live).to_markdown(index=False), ""]
    if not replayed.empty:
        lines += ["## Replayed from the seed ADR (not run here)", "", replay_table(replayed).to_markdown(index=False), ""]
        for _, r in replayed.iterrows():
            lines.append(f"- {r['scenario']} ({r['replay_kind']}): the ADR: “{r['quote']}”"
                         + (f" Note: {r['note']}" if isinstance(r["note"], str) else ""))
        lines.append("")
    notes = [d for d in collected.described if d["model"] == model_id]
    if notes:
        lines += ["Described by the ADR without a reply to replay (not scored):", ""]
        lines += [f"- {d['scenario'] or 'prompt not given'}: {d['what']} ({d['why']})" for d in notes] + [""]
    return "\n".join(lines)


def summary_markdown(collected: Collected) -> str:
    frame = collected.samples
    lines = ["# Summary", "", "Rebuilt by `harness report` from results/transcripts/*.jsonl and "
             "scenarios/replays/*.yaml, through the current parsers. Replayed rows quote the seed ADR; "
             "they were not run here.", ""]
    overall = []
    for (model, replayed, mode), group in by_mode(frame, ["model", "replayed", "mode"]):
        row = {"model": model + (" (replayed)" if replayed else ""), "mode": mode,
               "family": _family(group["family"].iloc[0]), "samples": len(group)}
        row.update({RATES[k]: rate_cell(group[k]) for k in ("parsed", "call_readable", "right_tool",
                                                            "valid_arguments", "answer", "passed")})
        overall.append(row)
    lines += ["## Models and modes", "", LEGEND, "", pd.DataFrame(overall).to_markdown(index=False), ""]
    trade = trade_off_lines(frame[~frame["replayed"]])
    if trade:
        lines += ["## The trade-off: what a grammar buys", "",
                  "A grammar makes the call's syntax right once it is triggered; whether the model then picks the "
                  "right tool with the right arguments, and still answers, is what these differences show "
                  "(percentage points against native on the same scenarios and seeds).", "", *trade, ""]
    grid = pass_grid(frame)
    cells = grid.map(lambda v: "–" if v is None or v != v else f"{100 * v:.0f}%")
    lines += ["## All checks passed, by scenario", "", cells.to_markdown(), "",
              "The heat map adds, per model and mode, each stage a sample passes through (parsed, call attempts "
              "read, right tool, valid typed args, expected answer, all checks). Every sample's transcript (raw "
              "replies, parses, deviations, verdicts) is in [report.html](report.html).", "",
              "![heat map](heatmap.png)", ""]
    return "\n".join(lines)


def _family(value) -> str:
    return value if isinstance(value, str) and value else "none"


def pass_grid(frame: pd.DataFrame) -> pd.DataFrame:
    """Models and modes (rows; replayed ones labelled) × scenarios: the rate of samples that passed every check."""
    labels = frame["model"] + " · " + frame["mode"] + frame["replayed"].map({True: " (replayed)", False: ""})
    table = frame.assign(label=labels).groupby(["label", "scenario"])["passed"].agg(rate_value).unstack()
    order = frame.assign(label=labels).drop_duplicates("label")
    order = sorted(zip(order["replayed"], order["model"], order["mode"].map(mode_order), order["label"]))
    table = table.reindex([label for *_, label in order])
    return table.astype(object).where(table.notna(), None)


def write_reports(results_dir: Path | None = None, scenarios_dir: Path | None = None, plot=True) -> dict:
    results_dir = Path(results_dir or constants.RESULTS_DIR)
    collected = collect(results_dir, scenarios_dir)
    sources = load_sources()
    runtime_records = _conformance_records(results_dir, collected.warnings)
    written = _write_agreement(results_dir, collected.warnings) + _write_conformance(results_dir, runtime_records)
    if collected.samples.empty:
        return {"written": written, "warnings": collected.warnings, "skipped": collected.skipped, "models": {}}
    for model, group in collected.samples.groupby("model", sort=True):
        path = results_dir / f"{model}.md"
        path.write_text(model_markdown(model, group, collected, sources), encoding="utf-8")
        written.append(str(path))
    summary = results_dir / "summary.md"
    summary.write_text(summary_markdown(collected), encoding="utf-8")
    written.append(str(summary))
    written.append(str(write_html(collected, results_dir / "report.html", runtime_records)))
    if plot:
        from harness.reports.heatmap import draw_heatmap  # matplotlib loads only when a picture is drawn

        written.append(str(draw_heatmap(collected.samples, results_dir / "heatmap.png")))
    return {"written": written, "warnings": collected.warnings, "skipped": collected.skipped,
            "models": json_summary(collected)}


def _write_agreement(results_dir: Path, warnings: list) -> list:
    """results/runtime-agreement.md from results/runtimes/*.jsonl (harness runtime-check), when there are any."""
    records = []
    for path in sorted((results_dir / "runtimes").glob("*.jsonl")):
        found, problems = read_records(path)
        records += found
        warnings += problems
    if not records:
        return []
    out = results_dir / "runtime-agreement.md"
    out.write_text(agreement_markdown(records), encoding="utf-8")
    return [str(out)]


def _conformance_records(results_dir: Path, warnings: list) -> list:
    """The records of results/runtime-conformance/*.jsonl (harness runtime-conformance)."""
    records = []
    for path in sorted((results_dir / "runtime-conformance").glob("*.jsonl")):
        found, problems = read_conformance(path)
        records += found
        warnings += problems
    return records


def _write_conformance(results_dir: Path, records: list) -> list:
    """results/runtime-conformance.md from the records."""
    if not records:
        return []
    asked = {r["template"]["sha256"]: r["template"]["id"] for r in records}
    unscripted = [(t, why) for t, why in unscripted_templates(results_dir, asked) if t not in asked.values()]
    out = results_dir / "runtime-conformance.md"
    out.write_text(conformance_markdown(records, unscripted), encoding="utf-8")
    return [str(out)]


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


def json_summary(collected: Collected) -> dict:
    out = {}
    for (model, replayed, mode, scenario), group in collected.samples.groupby(["model", "replayed", "mode", "scenario"]):
        # Native keeps the plain model key (the --json contract); other modes are keyed "<model> [<mode>]".
        label = model + (f" [{mode}]" if mode != "native" else "") + (" (replayed)" if replayed else "")
        entry = out.setdefault(label, {})
        entry[scenario] = {"samples": len(group), **{k: rate_value(group[k]) for k in RATES},
                           "deviations": dict(Counter(d for ds in group["deviations"] for d in ds)),
                           "findings": dict(Counter(f for fs in group["findings"] for f in fs))}
    return out
