"""The tables every report shows, built from transcripts alone: collect() scores each recorded sample through
the current parsers, and the table builders group those rows by model, mode and scenario. harness.reports.report
writes them as markdown, harness.reports.html_report as HTML, harness.reports.heatmap as a picture."""

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.core.values import MODES
from harness.evaluation.replays import load_replays
from harness.evaluation.scenarios import load_scenarios
from harness.evaluation.scoring import VERDICTS, score_sample, wilson
from harness.evaluation.transcripts import read_all
from harness.reports.examples import markdown_cell

# Rates every table shows, in order, with their column titles.
RATES = {"parsed": "parsed as expected", "call_readable": "call attempts read", "intended_tool": "intended tool",
         "right_tool": "right tool",
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


def by_mode(frame: pd.DataFrame, keys: list):
    groups = list(frame.groupby(keys, sort=True))
    at = keys.index("mode")
    return sorted(groups, key=lambda g: tuple((mode_order(k), k) if i == at else (0, k) for i, k in enumerate(g[0])))


# The comparison issue 4 asks for: grammar buys syntax; does it buy right tools and right arguments?
TRADE_OFF = ("parsed", "right_tool", "valid_arguments", "expected_arguments", "answer", "passed")


def mode_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per mode over all scenarios of a model: the rates, and how often the loop stepped in."""
    rows = []
    for (mode,), group in by_mode(frame, ["mode"]):
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
    for (name, mode), group in by_mode(frame, ["scenario", "mode"]):
        row = {"scenario": name, "mode": mode, "samples": len(group)}
        row.update({title: rate_cell(group[key]) for key, title in RATES.items()})
        row["deviations"] = named_counts(group["deviations"])
        row["findings"] = named_counts(group["findings"])
        row[EXAMPLES] = markdown_cell(group)
        rows.append(row)
    return pd.DataFrame(rows)


def replay_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in frame.iterrows():
        rows.append({"scenario": r["scenario"], "replay": r["replay_kind"],
                     "reply": "`" + str(r["reply"]).replace("\n", "\\n").replace("|", "\\|")[:160] + "`",
                     **{RATES[k]: {True: "yes", False: "no", None: "–"}.get(r[k], "–")
                        for k in ("parsed", "right_tool", "valid_arguments", "expected_arguments")},
                     "deviations": named_counts([r["deviations"]]), "findings": named_counts([r["findings"]])})
    return pd.DataFrame(rows)
