"""results/grammar-designs.md: the grammar designs of grammar mode side by side, per model, over the same BFCL
cases (results/designs/<variant>/bfcl/, each run with `harness run --suite bfcl --mode grammar
--grammar-variant <variant>`; the default design's rows are the main folder's grammar rows).

Per model × design: BFCL's checker on the calls the strict parser read, where a call is due; our rule (no call
made or attempted) where none is; how often the grammar acted (steps where it refused a sampled token); tokens
and seconds a case. Beside them, the reference the goal is stated against: BFCL's checker on native mode's
lenient reading of the same call-due cases (what the model knows, format aside). Only cases every design of a
model ran are counted, so the rows of a model compare like with like.

lazy-trigger's grammar may hold a call in another spelling than the family's (a fenced or bare JSON object at the
start of the reply): the strict parser reads it as a near miss, so the strict column never counts it. Its own
column gives BFCL's checker on those held calls (their lenient reading: the object the grammar held), apart."""

from __future__ import annotations

from collections import defaultdict

from harness.storage.records import SampleRecord
from harness.storage.results import ResultsDir
from harness.storage.transcripts import read_transcript
from harness.grammar.plan import DEFAULT_VARIANT, LAZY_TRIGGER, VARIANTS
from harness.reports.rates import rate_cell
from harness.reports.tables import collect


def _steps(results: ResultsDir) -> dict:
    """(model, case, mode) -> (steps where the grammar refused a token, steps, completion tokens)."""
    out = {}
    for path in results.bfcl_files():
        for record in read_transcript(path).records:
            if not isinstance(record, SampleRecord):
                continue
            steps = [s for t in record.turns for s in t.get("steps", [])]
            out[(record.model.id, record.scenario.name.removeprefix("bfcl-"), record.mode)] = (
                sum((s.get("grammar_refused") or 0) > 0 for s in steps), len(steps),
                sum(s.get("completion_tokens") or 0 for s in steps))
    return out


def _carried(results: ResultsDir) -> dict:
    """model -> {design carried from: samples}: the folder's samples taken over from another design whose prompt
    and grammar were the same for that model (tools/adopt_design.py --carry-from)."""
    out = defaultdict(lambda: defaultdict(int))
    for path in results.bfcl_files() + results.transcript_files():
        for record in read_transcript(path).records:
            if isinstance(record, SampleRecord) and record.carried:
                out[record.model.id][record.carried.get("from")] += 1
    return out


def designs_markdown(main: ResultsDir, main_judged, judge, valid, main_samples=None) -> str | None:
    """The page, or None when the folder holds no design study. judge(ResultsDir) -> Judged
    (harness.suites.bfcl.judging.judge_folder); valid(verdict) reads one BFCL verdict. main_samples: the main
    folder's scored scenario samples where the report has them (else they are read here, if a study ran any)."""
    folders = main.design_folders()
    if not folders:
        return None
    rows = {DEFAULT_VARIANT: (main_judged, _steps(main))}
    carried = {}
    for variant, folder in folders.items():
        if variant != DEFAULT_VARIANT:
            rows[variant] = (judge(folder), _steps(folder))
            carried[variant] = _carried(folder)
    lines = ["# Grammar designs side by side", "",
             "Rebuilt by `harness report` from results/designs/<variant>/bfcl/ (`harness run --suite bfcl --mode "
             "grammar --grammar-variant <variant> --results-dir results/designs/<variant>`) and, for "
             f"`{DEFAULT_VARIANT}` (the default), the main folder's grammar rows. Only the cases every design of a "
             "model ran are counted. Calls due: BFCL's checker on the calls the strict parser read. No call due: "
             "our rule, no call made or attempted (a call to an offered tool in any spelling is an attempt). "
             "Native, lenient: BFCL's checker on native mode's lenient reading of the same call-due cases, the "
             "reference the goal is stated against (grammar's strict calls at least half of it, and no worse a no-call "
             "rate than native's, the next reference column). Goal: both of those hold on these cases (met), or which "
             "fails; '–' where native's lenient reading passes none (nothing to hold half of). Grammar acted: "
             "steps in which the grammar refused a sampled token. Held in another spelling (`lazy-trigger` only): "
             "BFCL's checker on the calls its grammar held from a fence or a bare JSON object, which are not in the "
             "family's format (the strict column does not count them), and how many such calls there were. Rates: "
             "k/n, percent, Wilson 95%.", "",
             "Designs: " + "; ".join(f"`{name}`: {text}" for name, text in VARIANTS.items()) + ".", "",
             "| model | design | cases (call due / none due) | calls due: BFCL, strict | calls due: held in another "
             "spelling, BFCL | native, lenient (reference) | no call due: none made or attempted | native, no call "
             "due (reference) | goal | grammar acted | tokens a case | s a case |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by_model = defaultdict(dict)
    for variant, (judged, steps) in rows.items():
        for o in judged.outcomes:
            if o.mode == "grammar":
                by_model[o.model].setdefault(variant, {})[o.case] = o
    notes = []
    for model in sorted(by_model):
        designs = by_model[model]
        if len(designs) < 2:
            continue
        common = set.intersection(*(set(cases) for cases in designs.values()))
        native = {o.case: o for o in main_judged.outcomes if o.model == model and o.mode == "native"}
        for variant in [v for v in VARIANTS if v in designs]:
            judged, steps = rows[variant]
            group = [designs[variant][c] for c in sorted(common)]
            due = [o for o in group if o.call_due]
            none_due = [o for o in group if not o.call_due]
            strict_right = None if judged.verdicts is None else \
                [valid(judged.verdicts[(o.case, o.model, o.mode)][0]) for o in due]
            held = _held_cell(variant, judged, due, valid)
            lenient_right = None if main_judged.verdicts is None else \
                [valid(main_judged.verdicts[(c.case, model, "native")][1]) for c in due if c.case in native]
            abstained_list = [not o.attempted and not o.errored for o in none_due]
            native_list = [not native[o.case].attempted and not native[o.case].errored
                           for o in none_due if o.case in native]
            strict = "not judged" if strict_right is None else rate_cell(strict_right)
            lenient = "not judged" if lenient_right is None else rate_cell(lenient_right)
            abstained, native_abstained = rate_cell(abstained_list), rate_cell(native_list)
            goal = _goal(strict_right, lenient_right, abstained_list, native_list)
            counted = [steps.get((model, o.case, "grammar"), (0, 0, 0)) for o in group]
            acted = f"{sum(a for a, _, _ in counted)}/{sum(n for _, n, _ in counted)} steps"
            tokens = f"{sum(t for _, _, t in counted) / len(group):.0f}" if group else "–"
            seconds = [o.seconds for o in group if o.seconds is not None]
            per = f"{sum(seconds) / len(seconds):.1f}" if seconds else "–"
            lines.append(f"| {model} | {variant} | {len(due)} / {len(none_due)} | {strict} | {held} | {lenient} "
                         f"| {abstained} | {native_abstained} | {goal} | {acted} | {tokens} | {per} |")
        skipped = sorted(set().union(*designs.values()) - common)
        if skipped:
            notes.append(f"- {model}: {len(skipped)} case(s) run by some designs only, left out.")
        for variant in [v for v in VARIANTS if v in designs]:
            for source, count in sorted(carried.get(variant, {}).get(model, {}).items()):
                notes.append(f"- {model}: {count} of `{variant}`'s samples (BFCL and scenarios, grammar and "
                             f"fallback) were carried from `{source}`, whose prompt and grammar are the same for this "
                             "model (only the design's name differs; tools/adopt_design.py --carry-from).")
    lines += [""] + notes + ([""] if notes else [])
    lines += scenario_lines(main, folders, main_samples)
    return "\n".join(lines)


def scenario_lines(main: ResultsDir, folders: dict, main_samples=None) -> list:
    """The YAML scenarios under each design (a study folder's transcripts/, the default's from the main folder),
    per model over the samples (scenario, seed) every design of it ran: where a call is due, a call parsed, the
    expected arguments, whether the answer used the result, and all checks; where none is, no call made and all
    checks; beside them native mode's same samples (the tool it intended, read leniently; no call made). [] when
    no study ran a scenario."""
    frames = {v: collect(f.root, replays=False).samples for v, f in folders.items()
              if v != DEFAULT_VARIANT and f.transcript_files()}
    frames = {v: f for v, f in frames.items() if not f.empty}
    if not frames:
        return []
    main_samples = collect(main.root).samples if main_samples is None else main_samples
    if main_samples.empty:
        return []
    frames = {DEFAULT_VARIANT: main_samples, **frames}
    lines = ["## The YAML scenarios", "",
             "Every scenario's grammar-mode samples (`harness run --mode grammar --results-dir "
             "results/designs/<variant>`; the default's are the main folder's), per model over the samples (scenario "
             "and seed) every design of the model ran; native mode's same samples as the reference. Call parsed: the "
             "strict parser read a call in the turn's first reply; expected args: the expected tool with the expected "
             "arguments; native's intended tool: the tool native mode's reply meant, read leniently (a near miss "
             "counts), what the model knows format aside; answer uses the result: after a tool ran, the turn's answer "
             "holds what the result said (the question a design that answers after a result is for); all checks: "
             "the scenario's every check on every turn (results/<model>.md's *all checks*). Rates: k/n, percent, "
             "Wilson 95% over distinct replies where replies repeat.", "",
             "| model | design | samples (call due / none due) | calls due: call parsed | calls due: expected args "
             "| calls due: answer uses the result | calls due: all checks | no call due: no call made "
             "| no call due: all checks | native, calls due: intended tool | native, no call due: no call made |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    live = {v: f[~f["replayed"].astype(bool)] for v, f in frames.items()}
    for model in sorted(set(main_samples["model"])):
        by = {v: f[(f["model"] == model) & (f["mode"] == "grammar")] for v, f in live.items()}
        by = {v: g for v, g in by.items() if not g.empty}
        if len(by) < 2:
            continue
        common = set.intersection(*(set(zip(g["scenario"], g["sample"])) for g in by.values()))
        native = live[DEFAULT_VARIANT]
        native_due, native_none = _by_class(native[(native["model"] == model) & (native["mode"] == "native")],
                                            common)
        for variant in [v for v in VARIANTS if v in by]:
            due, none = _by_class(by[variant], common)
            lines.append(
                f"| {model} | {variant} | {len(due)} / {len(none)} | {rate_cell(due['parsed'], due['reply_key'])} "
                f"| {rate_cell(due['expected_arguments'], due['reply_key'])} "
                f"| {rate_cell(due['result_used'], due['reply_key'])} "
                f"| {rate_cell(due['passed'], due['reply_key'])} "
                f"| {rate_cell(none['right_tool'], none['reply_key'])} | {rate_cell(none['passed'], none['reply_key'])} "
                f"| {rate_cell(native_due['intended_tool'], native_due['reply_key'])} "
                f"| {rate_cell(native_none['right_tool'], native_none['reply_key'])} |")
    return lines + [""]


def _goal(strict, lenient, abstained, native_abstained) -> str:
    """Whether a design meets the goal on the same cases: its strict calls right at least half as often as
    native's lenient reading, and no call made or attempted on no-call cases at least as often as native."""
    if strict is None or lenient is None:
        return "not judged"
    if not sum(lenient):
        return "–"
    failed = []
    if 2 * sum(strict) < sum(lenient):
        failed.append("calls below half")
    if sum(abstained) < sum(native_abstained):
        failed.append("no-call below native")
    return "met" if not failed else ", ".join(failed)


def _by_class(frame, common: set) -> tuple:
    """(call due, no call due) of the samples of `frame` whose (scenario, seed) is in `common`."""
    frame = frame[[key in common for key in zip(frame["scenario"], frame["sample"])]]
    return frame[frame["call_due"] == True], frame[frame["call_due"] == False]  # noqa: E712


def _held_cell(variant: str, judged, due: list, valid) -> str:
    """lazy-trigger: BFCL's checker on the calls its grammar held in another spelling, over the call-due cases
    (a case whose judged reply was no such call counts as a failure here), and how many were held."""
    if variant != LAZY_TRIGGER:
        return "–"
    if judged.verdicts is None:
        return "not judged"
    cell = rate_cell([o.held and valid(judged.verdicts[(o.case, o.model, o.mode)][1]) for o in due])
    return f"{cell} ({sum(o.held for o in due)} held)"
