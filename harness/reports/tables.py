"""The tables every report shows, built from transcripts alone: collect() scores each recorded sample through
the current parsers (harness.evaluation.scored, the function `harness score` prints), and the table builders
group those rows by model, mode and scenario. harness.reports.report writes them as markdown,
harness.reports.html_report as HTML, harness.reports.heatmap as a picture.

Call-due and no-call samples are counted apart: over all samples, "right tool" of a model whose template
carries no tools is only the share of scenarios where no call is due."""

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from harness.core.values import MODES
from harness.storage.records import SampleRecord
from harness.evaluation.replays import Replays, load_replays
from harness.storage.results import ResultsDir
from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scored import score_transcripts
from harness.evaluation.scoring import FIRST_REPLY, VERDICTS, parse_steps, score_sample
from harness.reports.acted import acted_cell, grammar_acted, took_over_cell
from harness.reports.examples import forget_read_records, markdown_cell
from harness.reports.markdown import visible_controls
from harness.reports.rates import rate_cell, rate_value, reply_key

# Rates every table shows, in order, with their column titles.
RATES = {"parsed": "parsed as expected", "call_readable": "call attempts read", "intended_tool": "intended tool",
         "right_tool": "right tool", "valid_arguments": "valid typed args", "expected_arguments": "expected args",
         "answer": "expected answer", "result_used": "uses tool result", "passed": "all checks"}

# The columns of the tables over many scenarios: (title, verdict, which samples: True call due, False no call
# due, None all). "call parsed" is *parsed as expected* where a call is due, "no call made" *right tool* where
# none is.
CLASS_RATES = (("call parsed", "parsed", True), ("intended tool", "intended_tool", True),
               ("right tool", "right_tool", True), ("valid typed args", "valid_arguments", True),
               ("expected args", "expected_arguments", True), ("no call made", "right_tool", False),
               ("expected answer", "answer", None), ("uses tool result", "result_used", None),
               ("call attempts read", "call_readable", None), ("all checks", "passed", None))
FIRST_REPLIES = "fallback, first replies"  # the row of fallback's native first replies, before any rewrite

EXAMPLES = "example replies of failed samples"

LEGEND = (
    "Rates: successes/samples where the check applies, with the Wilson 95% interval. Where replies repeat (the "
    "same scenario, and word for word the same text in every step: a low temperature gives one reply to "
    "several seeds), a cell reads *k/n p%, k'/d distinct [interval]*: the interval is over the d distinct "
    "replies, since a repeated reply is no new evidence. *–*: the check applied to none of the row's samples "
    "(no sample reached it: expected args needs a call to the expected tool; or no scenario of the row asks "
    "it). *Call due*: the samples "
    "whose scenario expects a call; *call parsed*: their first reply is a call the strict parser reads; "
    "*intended tool*: their first reply chose the expected tool, read from the call or, for a named near miss, "
    "from the name it wrote (chose right, wrote it wrong); *right tool*: the strict reading. *No call due*: the "
    "samples whose scenario expects no call; *no call made*: none was made or attempted. *Call attempts read*: "
    "of the samples whose replies tried to call, how many the strict parser reads. An answer is the model's "
    "own text: a reply that repeats the user or the tool message, or that only stopped at the token limit, "
    "answers nothing (findings `echoed-user`, `echoed-tool-message`, `runaway-answer`). A step that errored "
    "fails every check it reaches. *Fallback, first replies*: fallback's native first replies, before the "
    "grammar rewrote the failed ones (the fallback row scores the rewrite). Deviations name the near misses; "
    "findings name behaviours a rate hides."
)


@dataclass
class Collected:
    samples: pd.DataFrame                      # one row per scored sample (live, and replies the ADR quotes)
    models: dict                               # model id -> latest model record from its transcript
    stale: Counter = field(default_factory=Counter)   # (model, scenario) -> records of an older scenario
    warnings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)       # malformed records left out (also in warnings)
    described: list = field(default_factory=list)
    scenarios: list = field(default_factory=list)     # the Scenario objects, by name
    illustrations: list = field(default_factory=list)  # reconstructed replies: shown, never scored
    source: ResultsDir | None = None                  # the folder the transcripts were read from
    model_files: dict = field(default_factory=dict)   # (model id, sha256) -> model record: in process and served


IN_PROCESS = "in process"   # llama-cpp-python in this process: a sample with no runtime of its own


def runtime_of(model_id: str, sha256: str, model_files: dict) -> str:
    """Where a sample's replies came from. A served sample (its weights' hash is "served") names the runtime
    of its model record (`harness run --endpoint` writes it), or "served" when the record names none; any
    other ran in process. Rows are kept apart by it, so served and in-process samples of one id never merge."""
    if sha256 != "served":
        return IN_PROCESS
    runtime = getattr(model_files.get((model_id, "served")), "runtime", None)
    name = runtime.get("name") if isinstance(runtime, dict) else None
    return name if isinstance(name, str) and name else "served"


def _row(record: SampleRecord, scenario, verdicts: dict, runtime: str = IN_PROCESS, ref=None) -> dict:
    """One sample's row: what the tables count. A sample read from a transcript keeps the place of its record
    (`ref`), not the record: the pages that show it read it again, one at a time."""
    steps = [s for t in record.turns for s in t.get("steps", [])]
    # Steps under a lazy "auto" grammar (one from the first token always takes over: what it refused says
    # whether it acted), and the steps that count their grammar's refusals.
    lazy = (record.grammar or {}).get("lazy", True)
    auto = [s for s in steps if s.get("grammar") == "auto" and "grammar_from" in s and lazy]
    counted = [s for s in steps if s.get("grammar") and isinstance(s.get("grammar_refused"), int)]
    replay = record.replay or {}
    return {
        "model": record.model.id, "runtime": runtime, "scenario": record.scenario.name, "mode": record.mode,
        "sample": record.sample, "seed": record.seed, "family": record.family,
        "replayed": record.replayed, "replay_kind": replay.get("kind"), "call_due": scenario.call_due,
        **{name: verdicts.get(name) for name in (*VERDICTS, "passed", "call_readable")},
        **{f"first_{name}": verdicts.get(f"first_{name}") for name in FIRST_REPLY},
        "deviations": verdicts["deviations"], "findings": verdicts["findings"],
        "parse_changed": verdicts["parse_changed"], "seconds": record.seconds,
        "completion_tokens": sum(s.get("completion_tokens") or 0 for s in steps),
        "steps": len(steps), "turns": len(record.turns), "error": record.error,
        "errored": bool(record.error) or any(s.get("error") for s in steps),
        # The grammar or the fallback wrote a step of this sample: what "what a grammar buys" compares.
        "acted": any(s.get("fallback_from") or grammar_acted(s) for s in steps),
        "auto_steps": len(auto), "auto_took_over": sum(s["grammar_from"] is not None for s in auto),
        "grammar_steps": len(counted), "grammar_acted": sum(s["grammar_refused"] > 0 for s in counted),
        "reply": (steps[0].get("reply") if steps else None) if ref is None else None,  # the replay tables' reply
        "quote": replay.get("quote"), "note": replay.get("note"),
        # The record (or where to read it) and its per-turn verdicts: the HTML transcripts and the example
        # replies read them.
        "record": record if ref is None else ref,
        "turn_verdicts": [{k: t.get(k) for k in VERDICTS} for t in verdicts["turns"]],  # not their answers' text
        "model_sha256": record.model.sha256,
        # Repeats of one reply count once in an interval (harness.reports.rates).
        "reply_key": reply_key(record.scenario.name, steps, record.error),
        # What the run recorded as its verdict then, only to say where today's scoring differs from it.
        "recorded_passed": run_passed(record.recorded_verdicts),
    }


def run_passed(stored: dict | None):
    """The all-checks verdict the run itself stored: kept as `rescored.run_passed` once tools/rescore_transcripts.py
    has brought the stored block up to current scoring."""
    stored = stored or {}
    rescored = stored.get("rescored")
    return rescored.get("run_passed") if isinstance(rescored, dict) else stored.get("passed")


def _illustration(record: SampleRecord) -> dict:
    """A reconstructed reply: what the parser reads in it, never a verdict (its text is ours, not the model's)."""
    step = record.turns[0]["steps"][0]
    parse = parse_steps([step], record.family)[0]
    reading = ("calls " + ", ".join(c.name for c in parse.calls) if parse.accepted else
               f"no call: {parse.deviation}" if parse.deviation else "text")
    replay = record.replay
    return {"model": record.model.id, "scenario": record.scenario.name, "family": record.family,
            "reply": step["reply"], "reading": reading, "quote": replay["quote"], "note": replay["note"]}


def collect(results_dir: Path | None = None, scenarios_dir: Path | None = None,
            replays: bool | None = None) -> Collected:
    """replays: add the seed ADR's quoted replies; by default only to the project's own results/ (another
    folder holds an experiment's transcripts, and the replays are not part of it)."""
    results = ResultsDir.at(results_dir)
    scenarios = {s.name: s for s in load_scenarios(scenarios_dir)}
    forget_read_records()
    # A stream over the transcripts: each record is scored as it is read and only its row kept (the row holds
    # where the record is, not its replies), so memory follows the number of samples, not their size.
    scored = score_transcripts(results.transcript_files(), scenarios,
                               keep=lambda record, scenario, verdicts, ref: _row(record, scenario, verdicts, ref=ref),
                               slim=_slim)
    out = Collected(pd.DataFrame(), scored.models, scored.stale_counts(), scored.warnings, scored.skipped,
                    scenarios=list(scenarios.values()), source=results, model_files=scored.model_files)
    rows = scored.samples
    for row in rows:
        row["runtime"] = runtime_of(row["model"], row["model_sha256"], scored.model_files)
    if replays is None:
        replays = results.is_project
    replays = load_replays(scenarios_dir, scenarios) if replays else Replays([], [], {})
    known = {**scenarios, **replays.scenarios}
    for record in replays.records:
        if record.replay["kind"] != "quoted":
            out.illustrations.append(_illustration(record))  # scoring text we wrote ourselves is circular
            continue
        scenario = known[record.scenario.name]
        rows.append(_row(record, scenario, score_sample(scenario, record)))
    out.described = replays.described
    out.samples = pd.DataFrame(rows)
    return out


def _slim(record: SampleRecord) -> SampleRecord:
    """A stale or not-generated record as the reports count it: without its step log."""
    return replace(record, turns=[], recorded_verdicts=None, template=None, grammar=None)


def row_labels(frame: pd.DataFrame) -> pd.Series:
    """"model · mode" per sample, with the runtime when the samples come from more than one."""
    runtime = (" (" + frame["runtime"] + ")") if frame["runtime"].nunique() > 1 else ""
    return frame["model"] + runtime + " · " + frame["mode"]


def of_class(frame: pd.DataFrame, call_due) -> pd.DataFrame:
    return frame if call_due is None else frame[frame["call_due"] == call_due]


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


def class_cells(group: pd.DataFrame, first: bool = False) -> dict:
    """The CLASS_RATES cells of a group of samples; first: of fallback's native first replies (the checks a
    first reply has; '–' for the rest)."""
    row = {"call due": int((group["call_due"] == True).sum()),  # noqa: E712 -- None is neither
           "no call due": int((group["call_due"] == False).sum())}  # noqa: E712
    for title, key, call_due in CLASS_RATES:
        column = f"first_{key}" if first else key
        part = of_class(group, call_due)
        row[title] = rate_cell(part[column], part["reply_key"]) if column in group else "–"
    return row


def mode_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per mode over all scenarios of a model (and one for fallback's first replies): the rates, and
    how often the loop stepped in."""
    rows = []
    for (mode,), group in by_mode(frame, ["mode"]):
        findings = Counter(f for fs in group["findings"] for f in fs)
        row = {"mode": mode, "samples": len(group), **class_cells(group)}
        row["grammar acted"] = acted_cell(group)
        row["grammar took over"] = took_over_cell(group)
        row["grammar retries of native steps"] = findings.get("native-fallback", 0)
        row["unconstrained retries"] = findings.get("grammar-runtime-retry", 0)
        rows.append(row)
        if mode == "fallback":
            rows.append({"mode": FIRST_REPLIES, "samples": len(group), **class_cells(group, first=True),
                         **dict.fromkeys(("grammar acted", "grammar took over", "grammar retries of native steps",
                                          "unconstrained retries"), "–")})
    return pd.DataFrame(rows)


# What a grammar buys, in points: (title, verdict, which samples) as in CLASS_RATES.
TRADE_OFF = tuple(c for c in CLASS_RATES if c[0] != "call attempts read")


def trade_off_lines(frame: pd.DataFrame) -> list:
    """Per model, each non-native mode against native on the same scenarios and seeds, over the samples where
    the grammar or the fallback acted (wrote a step) and neither sample errored: elsewhere the two modes ran
    the same text, or a render that raised in one mode compares nothing a grammar does."""
    lines = []
    for model, group in frame.groupby("model", sort=True):
        native = group[group["mode"] == "native"]
        for mode in [m for m in MODES[1:] if m in set(group["mode"])]:
            other = group[group["mode"] == mode]
            pairs = set(zip(native["scenario"], native["seed"])) & set(zip(other["scenario"], other["seed"]))
            if not pairs:
                continue
            pick = lambda f, keep: f[[p in keep for p in zip(f["scenario"], f["seed"])]]  # noqa: E731
            acted = {(s, seed) for s, seed, a in zip(other["scenario"], other["seed"], other["acted"]) if a} & pairs
            errored = {(s, seed) for f in (native, other) for s, seed, e in zip(f["scenario"], f["seed"], f["errored"])
                       if e}
            kept = acted - errored
            head = (f"- **{model}**, {mode} vs native: over the {len(kept)} of {len(pairs)} paired samples where "
                    f"the {'grammar wrote a step' if mode == 'grammar' else 'fallback rewrote a step'}"
                    + (f" ({len(acted - kept)} left out where a sample errored)" if acted - kept else ""))
            if not kept:
                lines.append(head + ": nothing to compare"
                             + (f"; the grammar acted in {acted_cell(other)}" if int(other["grammar_steps"].sum())
                                else f"; the grammar took over in {took_over_cell(other)}"
                                if int(other["auto_steps"].sum()) else ""))
                continue
            parts = []
            for title, key, call_due in TRADE_OFF:
                a = rate_value(of_class(pick(native, kept), call_due)[key])
                b = rate_value(of_class(pick(other, kept), call_due)[key])
                if a is not None and b is not None:
                    parts.append(f"{title} {100 * a:.0f}% → {100 * b:.0f}% ({100 * (b - a):+.0f})")
            lines.append(head + ": " + "; ".join(parts))
    return lines


def scenario_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (name, mode), group in by_mode(frame, ["scenario", "mode"]):
        row = {"scenario": name, "mode": mode, "samples": len(group)}
        row.update({title: rate_cell(group[key], group["reply_key"]) for key, title in RATES.items()})
        row["deviations"] = named_counts(group["deviations"])
        row["findings"] = named_counts(group["findings"])
        row[EXAMPLES] = markdown_cell(group)
        rows.append(row)
    return pd.DataFrame(rows)


def _yes_no(value) -> str:
    return {True: "yes", False: "no"}.get(value if value is None or value == value else None, "–")


def replay_table(frame: pd.DataFrame, with_model: bool = False) -> pd.DataFrame:
    """The replies the seed ADR quotes verbatim, each scored on its own (one reply is no rate)."""
    rows = []
    for _, r in frame.iterrows():
        rows.append({**({"model": r["model"]} if with_model else {}), "scenario": r["scenario"],
                     "reply": "`" + visible_controls(str(r["reply"]).replace("\n", "\\n")).replace("|", "\\|")[:160]
                              + "`",
                     **{RATES[k]: _yes_no(r[k]) for k in ("parsed", "intended_tool", "right_tool",
                                                          "valid_arguments", "expected_arguments", "passed")},
                     "deviations": named_counts([r["deviations"]]), "findings": named_counts([r["findings"]])})
    return pd.DataFrame(rows)


def illustration_lines(illustrations: list) -> list:
    """Reconstructed replies, shown without any verdict: the parser's reading, and what was filled in."""
    return [f"- {i['scenario']}: `{i['reply'].replace(chr(10), chr(92) + 'n')}` → {i['reading']}. "
            f"The ADR: “{i['quote']}” Filled in: {i['note']}" for i in illustrations]


def coverage_lines(scenarios: list) -> list:
    """Which scenarios each check covers, and what each scenario checks (its YAML's promises, written out)."""
    covers = {"expected args": lambda e: e.arguments is not None, "expected answer": lambda e: e.wants_answer,
              "uses tool result": lambda e: e.uses_tool_result}
    lines = []
    for title, applies in covers.items():
        names = [s.name for s in scenarios if any(applies(t.expect) for t in s.turns)]
        lines.append(f"- *{title}* covers {len(names)} of {len(scenarios)} scenarios: {', '.join(names) or 'none'}.")
    return lines


def check_sentences(expect) -> list:
    """What a sample must do in a turn, one plain sentence per check: the promises a scenario's YAML holds."""
    out = []
    if expect.tool:
        args = ("" if expect.arguments is None else " with no arguments" if not expect.arguments else
                " with " + ", ".join(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in expect.arguments.items()))
        out.append(f"calls {expect.tool} first{args}")
    if expect.not_tools:
        out.append("never calls " + ", ".join(expect.not_tools))
    if expect.no_tool:
        out.append("calls no tool")
    if expect.wants_answer:
        text = ("answers in text of its own (not an echo of the user or of a tool message, ended before the token "
                "limit)" + (f", after {expect.tool} ran" if expect.tool else ""))
        if expect.any_of:
            text += ", containing one of " + ", ".join(json.dumps(a, ensure_ascii=False) for a in expect.any_of)
        if expect.all_of:
            text += ", containing " + " and ".join(json.dumps(a, ensure_ascii=False) for a in expect.all_of)
        out.append(text)
    if expect.uses_tool_result:
        out.append(f"answers from {expect.tool}'s result")
    return out


def checks_table(scenarios: list) -> pd.DataFrame:
    rows = []
    for s in scenarios:
        turns = [f"turn {i + 1}: " + "; ".join(check_sentences(t.expect)) for i, t in enumerate(s.turns)
                 if check_sentences(t.expect)]
        rows.append({"scenario": s.name, "call due": {True: "yes", False: "no", None: "–"}[s.call_due],
                     "a sample passes when it": " / ".join(turns) or "(nothing is checked)"})
    return pd.DataFrame(rows)


def family_name(value) -> str:
    return value if isinstance(value, str) and value else "none"


# The columns of each class's table in summary.md (harness.reports.tables.CLASS_RATES).
CLASS_TITLES = {True: ("call parsed", "intended tool", "right tool", "valid typed args", "expected args",
                       "expected answer", "uses tool result", "all checks"),
                False: ("no call made", "expected answer", "all checks"),
                None: ("call attempts read", "all checks")}


def class_table(frame: pd.DataFrame, call_due) -> pd.DataFrame:
    """Models × modes over one class of samples (call due, no call due, or all), a fallback row followed by its
    first replies."""
    titles = CLASS_TITLES[call_due]
    several = frame["runtime"].nunique() > 1
    rows = []
    for (model, runtime, mode), group in by_mode(frame, ["model", "runtime", "mode"]):
        group = group if call_due is None else group[group["call_due"] == call_due]
        if group.empty:
            continue
        head = {"model": model, **({"runtime": runtime} if several else {}), "mode": mode,
                "family": family_name(group["family"].iloc[0]), "samples": len(group)}
        rows.append({**head, **{t: class_cells(group)[t] for t in titles}})
        if mode == "fallback":
            rows.append({**head, "mode": FIRST_REPLIES, **{t: class_cells(group, first=True)[t] for t in titles}})
    return pd.DataFrame(rows)
