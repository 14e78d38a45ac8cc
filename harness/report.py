"""`harness report`: every table rebuilt from transcripts alone (no model loaded), re-scored through the
current parsers, plus the seed ADR's replayed replies through the same scoring.

Outputs: results/<model>.md per model (one row per scenario: samples, rates with Wilson 95% intervals, named
deviations and findings, example replies of failed samples), results/summary.md across models,
results/heatmap.png (see harness.heatmap), results/report.html (the tables with every sample's transcript, see
harness.html_report)."""

import difflib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness import constants
from harness.examples import markdown_cell
from harness.replays import load_replays
from harness.scenarios import MODES, load_scenarios
from harness.scoring import VERDICTS, score_sample, wilson
from harness.sources import load_sources, resolve_template
from harness.transcripts import read_all

# Rates every table shows, in order, with their column titles.
RATES = {"parsed": "parsed as expected", "call_readable": "call attempts read", "right_tool": "right tool",
         "valid_arguments": "valid typed args", "expected_arguments": "expected args",
         "answer": "expected answer", "result_used": "uses tool result", "passed": "all checks"}

EXAMPLES = "example replies of failed samples"

LEGEND = (
    "Rates: successes/samples where the check applies, with the Wilson 95% interval. *Parsed as expected*: "
    "the first reply is a call of the model's family where a call is due, plain text where none is. *Call "
    "attempts read*: of the samples whose replies tried to call (a call or a call-shaped near miss), how many "
    "the strict parser reads as calls. Deviations name the near misses; findings name behaviours a rate hides."
)


@dataclass
class Collected:
    samples: pd.DataFrame                      # one row per scored sample (live and replayed)
    models: dict                               # model id -> latest model record from its transcript
    stale: Counter = field(default_factory=Counter)   # (model, scenario) -> records of an older scenario
    warnings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)       # malformed records left out (also in warnings)
    described: list = field(default_factory=list)
    scenarios: list = field(default_factory=list)


def _row(record: dict, verdicts: dict) -> dict:
    steps = [s for t in record.get("turns", []) for s in t.get("steps", [])]
    # Steps written under an "auto" grammar, and how many of them it constrained (a lazy one only once its
    # trigger fired): a grammar mode that scores as native did because the grammar never took over.
    auto = [s for s in steps if s.get("grammar") == "auto" and "grammar_from" in s]
    replay = record.get("replay") or {}
    return {
        "model": record["model"]["id"], "scenario": record["scenario"]["name"], "mode": record.get("mode", "native"),
        "sample": record.get("sample"), "seed": record.get("seed"), "family": record.get("family"),
        "replayed": bool(record.get("replayed")), "replay_kind": replay.get("kind"),
        **{name: verdicts.get(name) for name in (*VERDICTS, "passed", "call_readable")},
        "deviations": verdicts["deviations"], "findings": verdicts["findings"],
        "parse_changed": verdicts["parse_changed"], "seconds": record.get("seconds"),
        "completion_tokens": sum(s.get("completion_tokens") or 0 for s in steps),
        "steps": len(steps), "error": record.get("error"),
        "auto_steps": len(auto), "auto_took_over": sum(s["grammar_from"] is not None for s in auto),
        "reply": steps[0].get("reply") if steps else None,
        "quote": replay.get("quote"), "note": replay.get("note"),
        # The whole record and its per-turn verdicts: the HTML transcripts and the example replies read them.
        "record": record, "turn_verdicts": verdicts["turns"],
    }


def collect(results_dir: Path | None = None, scenarios_dir: Path | None = None) -> Collected:
    scenarios = {s.name: s for s in load_scenarios(scenarios_dir)}
    out = Collected(pd.DataFrame(), {}, scenarios=list(scenarios))
    rows = []
    for transcript in read_all(results_dir):
        out.warnings += transcript.warnings
        out.skipped += transcript.skipped
        for record in transcript.records:
            if record.get("kind") == "model":
                out.models[record["model"]["id"]] = record
        for record in transcript.samples():
            scenario = scenarios.get(record["scenario"]["name"])
            if scenario is None or scenario.hash != record["scenario"]["hash"]:
                # Recorded against a scenario that has since changed what the model sees: not comparable.
                out.stale[(record["model"]["id"], record["scenario"]["name"])] += 1
                continue
            try:
                rows.append(_row(record, score_sample(scenario, record)))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                # Turns or steps unlike any a run writes: that record is lost, not the whole report.
                problem = f"{transcript.where(record)}: malformed record skipped: cannot be scored: " \
                          f"{type(exc).__name__}: {exc}"
                out.skipped.append(problem)
                out.warnings.append(problem)
    replays = load_replays(scenarios_dir, scenarios)
    known = {**scenarios, **replays.scenarios}
    for record in replays.records:
        rows.append(_row(record, score_sample(known[record["scenario"]["name"]], record)))
    out.described = replays.described
    out.samples = pd.DataFrame(rows)
    return out


def rate_cell(values) -> str:
    """'k/n p% [lo–hi]' over the samples where the verdict applies; '–' when it applies to none."""
    known = [bool(v) for v in values if v is not None and v == v]  # NaN != NaN: pandas' missing value
    if not known:
        return "–"
    k, n = sum(known), len(known)
    low, high = wilson(k, n)
    return f"{k}/{n} {100 * k / n:.0f}% [{100 * low:.0f}–{100 * high:.0f}]"


def rate_value(values):
    known = [bool(v) for v in values if v is not None and v == v]
    return (sum(known) / len(known)) if known else None


def named_counts(series) -> str:
    counts = Counter(name for names in series for name in names)
    return ", ".join(f"{name} ×{n}" for name, n in counts.most_common()) or "–"


def mode_order(mode) -> int:
    """native, grammar, fallback side by side in every table (then any other, alphabetically)."""
    return MODES.index(mode) if mode in MODES else len(MODES)


def _by_mode(frame: pd.DataFrame, keys: list):
    groups = list(frame.groupby(keys, sort=True))
    at = keys.index("mode")
    return sorted(groups, key=lambda g: tuple((mode_order(k), k) if i == at else (0, k) for i, k in enumerate(g[0])))


# The comparison issue 4 asks for: grammar buys syntax; does it buy right tools and right arguments?
TRADE_OFF = ("parsed", "right_tool", "valid_arguments", "expected_arguments", "answer", "passed")


def mode_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per mode over all scenarios of a model: the rates, and how often the loop stepped in."""
    rows = []
    for (mode,), group in _by_mode(frame, ["mode"]):
        findings = Counter(f for fs in group["findings"] for f in fs)
        row = {"mode": mode, "samples": len(group)}
        row.update({RATES[k]: rate_cell(group[k]) for k in TRADE_OFF})
        row["grammar took over"] = took_over_cell(group)
        row["grammar retries of native steps"] = findings.get("native-fallback", 0)
        row["unconstrained retries"] = findings.get("grammar-runtime-retry", 0)
        rows.append(row)
    return pd.DataFrame(rows)


def took_over_cell(group: pd.DataFrame) -> str:
    """'k/n steps': of the steps written under an "auto" grammar, those it constrained."""
    steps = int(group["auto_steps"].sum())
    return f"{int(group['auto_took_over'].sum())}/{steps} steps" if steps else "–"


def trade_off_lines(frame: pd.DataFrame) -> list:
    """Per model, each non-native mode against native on the same scenarios and seeds, in points."""
    lines = []
    for model, group in frame.groupby("model", sort=True):
        native = group[group["mode"] == "native"]
        for mode in [m for m in MODES[1:] if m in set(group["mode"])]:
            other = group[group["mode"] == mode]
            # Only the (scenario, seed) pairs both modes ran: a mode run with fewer samples compares fairly.
            pairs = set(zip(native["scenario"], native["seed"])) & set(zip(other["scenario"], other["seed"]))
            if not pairs:
                continue
            pick = lambda f: f[[p in pairs for p in zip(f["scenario"], f["seed"])]]  # noqa: E731
            parts = []
            for key in TRADE_OFF:
                a, b = rate_value(pick(native)[key]), rate_value(pick(other)[key])
                if a is not None and b is not None:
                    parts.append(f"{RATES[key]} {100 * a:.0f}% → {100 * b:.0f}% ({100 * (b - a):+.0f})")
            scenarios = len({s for s, _ in pairs})
            if int(pick(other)["auto_steps"].sum()):
                parts.append(f"the grammar took over in {took_over_cell(pick(other))}")
            lines.append(f"- **{model}**, {mode} vs native ({scenarios} scenarios, {len(pairs)} paired samples): "
                         + "; ".join(parts))
    return lines


def scenario_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (name, mode), group in _by_mode(frame, ["scenario", "mode"]):
        row = {"scenario": name, "mode": mode, "samples": len(group)}
        row.update({title: rate_cell(group[key]) for key, title in RATES.items()})
        row["deviations"] = named_counts(group["deviations"])
        row["findings"] = named_counts(group["findings"])
        row[EXAMPLES] = markdown_cell(group)
        rows.append(row)
    return pd.DataFrame(rows)


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


def replay_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in frame.iterrows():
        rows.append({"scenario": r["scenario"], "replay": r["replay_kind"],
                     "reply": "`" + str(r["reply"]).replace("\n", "\\n").replace("|", "\\|")[:160] + "`",
                     **{RATES[k]: {True: "yes", False: "no", None: "–"}.get(r[k], "–")
                        for k in ("parsed", "right_tool", "valid_arguments", "expected_arguments")},
                     "deviations": named_counts([r["deviations"]]), "findings": named_counts([r["findings"]])})
    return pd.DataFrame(rows)


def summary_markdown(collected: Collected) -> str:
    frame = collected.samples
    lines = ["# Summary", "", "Rebuilt by `harness report` from results/transcripts/*.jsonl and "
             "scenarios/replays/*.yaml, through the current parsers. Replayed rows quote the seed ADR; "
             "they were not run here.", ""]
    overall = []
    for (model, replayed, mode), group in _by_mode(frame, ["model", "replayed", "mode"]):
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
    written = _write_agreement(results_dir, collected.warnings)
    if collected.samples.empty:
        return {"written": written, "warnings": collected.warnings, "skipped": collected.skipped, "models": {}}
    for model, group in collected.samples.groupby("model", sort=True):
        path = results_dir / f"{model}.md"
        path.write_text(model_markdown(model, group, collected, sources), encoding="utf-8")
        written.append(str(path))
    summary = results_dir / "summary.md"
    summary.write_text(summary_markdown(collected), encoding="utf-8")
    written.append(str(summary))
    from harness.html_report import write_html  # it renders with this module's tables

    written.append(str(write_html(collected, results_dir / "report.html")))
    if plot:
        from harness.heatmap import draw_heatmap

        written.append(str(draw_heatmap(collected.samples, results_dir / "heatmap.png")))
    return {"written": written, "warnings": collected.warnings, "skipped": collected.skipped,
            "models": json_summary(collected)}


def _write_agreement(results_dir: Path, warnings: list) -> list:
    """results/runtime-agreement.md from results/runtimes/*.jsonl (harness runtime-check), when there are any."""
    from harness.runtime_agreement import agreement_markdown, read_records

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
