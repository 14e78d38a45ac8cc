"""The bottom line that opens summary.md and report.html: one sentence per question a reader brings (does the
model call a tool right when a call is due; does it answer without one when none is), then the sentences the
suites add (harness.reports.staged.Pages.bottom_line: BFCL's), each ranked over that question's samples alone,
and each saying only what the samples support: a leader only when its interval lies above every other row's,
else that the samples do not separate them. Then the deviations each model writes most.

Rows are ranked only against rows run on the same cases (scenario, sample, seed): a model run on fewer
scenarios or seeds is ranked in a group of its own, never interleaved with rows its numbers do not compare to.
A model run in fewer modes than the others of its group is flagged (a mode not run is no result). Fallback's
first replies are not a mode of their own (they are fallback's native attempts), so they are not ranked."""

from collections import Counter
from dataclasses import dataclass, replace

import pandas as pd

from harness.reports import markdown
from harness.reports.rates import counts, interval, rate_cell
from harness.reports.tables import by_mode, mode_order


@dataclass(frozen=True)
class Question:
    name: str          # as the bottom line says it
    call_due: bool     # which samples answer it
    column: str        # the check it is ranked on
    check: str         # the check's name
    meaning: str       # what a sample must do to count


QUESTIONS = (
    Question("Calls due", True, "right_call", "right first call",
             "the first reply is a call the strict parser reads, to the expected tool, with arguments its schema "
             "accepts and equal to the expected ones; what follows the call is not part of this check"),
    Question("No call due", False, "passed", "all checks",
             "no call made or attempted, and the expected answer in the model's own words"),
)

RULE = ("How the bottom line is reached. Each question is answered over its own samples: *calls due* over the "
        "samples whose scenario expects a call, *no call due* over the others. Within a question, rows are "
        "ranked by the lower end of the Wilson 95% interval of its check, then by the point rate, then native "
        "before grammar before fallback (the simpler setup first). Only rows run on the same cases (scenario, "
        "sample and seed) are ranked together; a row run on other cases is ranked in a group of its own. A row "
        "leads only when its interval lies above every other row's in its group; otherwise the sentence says "
        "these samples do not separate them. Intervals count distinct replies: where one reply recurs word for "
        "word (a low temperature gives the same text to several seeds), it is one observation, and the cell "
        "says *k/n p%, k'/d distinct* with the interval over the d distinct replies.")


def right_call(frame: pd.DataFrame) -> list:
    """Per call-due sample, the headline check of calls: the right tool first, its arguments valid, and equal
    to the expected ones where the scenario names them; None where no call is due."""
    def one(due, tool, valid, expected) -> bool | None:
        if due is None or due != due or not due:
            return None
        return bool(tool == True and valid == True and expected is not False)  # noqa: E712 -- None is neither
    return [one(*row) for row in zip(frame["call_due"], frame["right_tool"], frame["valid_arguments"],
                                     frame["expected_arguments"])]


@dataclass
class Ranked:
    label: str
    model: str
    runtime: str
    mode: str
    samples: pd.DataFrame
    column: str

    @property
    def cell(self) -> str:
        return rate_cell(self.samples[self.column], self.samples["reply_key"])

    @property
    def bounds(self) -> tuple:
        return interval(self.samples[self.column], self.samples["reply_key"])

    @property
    def counts(self) -> tuple:
        return counts(self.samples[self.column], self.samples["reply_key"])

    def key(self) -> tuple:
        k, n, _, _ = self.counts
        return (-self.bounds[0], -(k / n if n else 0.0), mode_order(self.mode), self.model, self.runtime)


def _label(model: str, runtime: str, mode: str, several: bool) -> str:
    return f"{model}{f' ({runtime})' if several else ''}, {mode}"


def case_groups(part: pd.DataFrame, column: str, several: bool) -> list:
    """[(cases, [Ranked best first])] of one question's samples: rows that ran the same cases together, the
    group of the most rows first."""
    groups = {}
    for (model, runtime, mode), group in by_mode(part, ["model", "runtime", "mode"]):
        cases = frozenset(zip(group["scenario"], group["sample"], group["seed"]))
        groups.setdefault(cases, []).append(Ranked(_label(model, runtime, mode, several), model, runtime, mode,
                                                   group, column))
    ordered = sorted(groups.items(), key=lambda g: (-len(g[1]), -len(g[0]), sorted(map(str, g[0]))))
    return [(cases, sorted(rows, key=Ranked.key)) for cases, rows in ordered]


def fewer_modes(rows: list) -> dict:
    """model (runtime) -> the modes its group ran that it was not run in."""
    every = {r.mode for r in rows}
    out = {}
    for r in rows:
        missing = every - {o.mode for o in rows if (o.model, o.runtime) == (r.model, r.runtime)}
        if missing:
            out[(r.model, r.runtime)] = sorted(missing, key=lambda m: (mode_order(m), m))
    return out


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _cases_text(cases: frozenset) -> str:
    """'30 cases (6 scenarios × 5 samples)', or the scenarios alone where the samples differ by scenario."""
    scenarios = {c[0] for c in cases}
    seeds = {c[1:] for c in cases}
    if len(cases) == len(scenarios) * len(seeds):
        return (f"{plural(len(cases), 'case')} ({plural(len(scenarios), 'scenario')} × "
                f"{plural(len(seeds), 'sample')})")
    return f"{plural(len(cases), 'case')} (over {plural(len(scenarios), 'scenario')})"


def _named(rows: list, most: int = 3) -> str:
    shown = [f"{r.label}: {r.cell}" for r in rows[:most]]
    return "; ".join(shown) + (f"; and {len(rows) - most} more" if len(rows) > most else "")


def lead_clause(rows: list) -> str:
    """Who leads a group on its check, or that the samples do not separate the first rows (markdown)."""
    best, rest = rows[0], rows[1:]
    total = sum(r.counts[1] for r in rows)
    if not rest:
        return f"**{best.label}**: {best.cell} (the only row)."
    if not any(r.counts[0] for r in rows):
        return f"No row passes it on a single sample (0 of {total} samples over {len(rows)} rows)."
    overlapping = [r for r in rest if r.bounds[1] >= best.bounds[0]]
    if not overlapping:
        return (f"**{best.label}** leads with {best.cell}; its interval lies above every other row's "
                f"(next: {rest[0].label}: {rest[0].cell}).")
    return (f"These samples do not separate the first row, {best.label} ({best.cell}), from {len(overlapping)} "
            f"other row{'s' if len(overlapping) > 1 else ''} whose interval overlaps it ({_named(overlapping)}).")


def _all_checks_clause(rows: list) -> str:
    """For calls due: the whole sample (the call, then an answer from its result), which the headline check
    leaves out."""
    whole = sorted((replace(r, column="passed") for r in rows), key=Ranked.key)
    passed = sum(r.counts[0] for r in whole)
    total = sum(r.counts[1] for r in whole)
    if not passed:
        right = sum(r.counts[0] for r in rows)
        return (f" No row passes every check of a call-due sample (0 of {total} samples)"
                + (f"; each of the {right} samples with a right first call fails another check." if right else "."))
    return (f" Every check of a call-due sample (the call and what follows it): {passed} of {total} samples "
            f"pass; first by the same rule: {whole[0].label} ({whole[0].cell}).")


def _fewer_modes_sentence(model: str, runtime: str, rows: list, missing: list, several: bool) -> str:
    ran = sorted({r.mode for r in rows if (r.model, r.runtime) == (model, runtime)}, key=mode_order)
    return (f"{model}{f' ({runtime})' if several else ''} was run on these cases in {' and '.join(ran)} only, not "
            f"in {' or '.join(missing)}: a mode not run is missing here, not failed.")


def question_lines(live: pd.DataFrame, question: Question) -> list:
    """The bottom line of one question (markdown, one item per case group) and its ranking tables."""
    part = live[live["call_due"] == question.call_due]
    if part.empty:
        return [f"**{question.name}**: no sample of this folder asks it."], []
    if question.column == "right_call":
        part = part.assign(right_call=right_call(part))
    several = live["runtime"].nunique() > 1
    groups = case_groups(part, question.column, several)
    lines, tables = [], []
    for index, (cases, rows) in enumerate(groups):
        many = plural(len(rows), "row")
        if index == 0:
            text = (f"**{question.name}**: ranked on *{question.check}* ({question.meaning}), over the same "
                    f"{_cases_text(cases)} in each of {many}. " + lead_clause(rows))
        else:
            text = (f"**{question.name}**, {many} run on other cases, {_cases_text(cases)}, ranked apart and never "
                    "against the rows above: " + lead_clause(rows))
        if question.column == "right_call":
            chose = sorted((replace(r, column="intended_tool") for r in rows), key=Ranked.key)
            text += (" Chose the expected tool however it was written (*intended tool*, read from the call or "
                     "from the name a near miss wrote): " + lead_clause(chose))
            text += _all_checks_clause(rows)
        flagged = fewer_modes(rows)
        if flagged:
            text += " " + " ".join(_fewer_modes_sentence(model, runtime, rows, missing, several)
                                   for (model, runtime), missing in sorted(flagged.items()))
        lines.append(text)
        tables.append((index, cases, ranking_table(rows, question, flagged, several)))
    return lines, tables


def ranking_table(rows: list, question: Question, flagged: dict, several: bool) -> pd.DataFrame:
    out = []
    for i, r in enumerate(rows):
        k, n, kd, nd = r.counts
        out.append({"rank": i + 1, "model": r.model, **({"runtime": r.runtime} if several else {}), "mode": r.mode,
                    "samples": len(r.samples), "distinct replies": r.samples["reply_key"].nunique(),
                    question.check: r.cell,
                    **({"all checks": rate_cell(r.samples["passed"], r.samples["reply_key"])}
                       if question.column != "passed" else {}),
                    "note": (f"not run in {', '.join(flagged[(r.model, r.runtime)])}"
                             if (r.model, r.runtime) in flagged else "")})
    return pd.DataFrame(out)


def bottom_line(live: pd.DataFrame, more=()) -> tuple:
    """(sentences, [(question, group index, cases, table)]): the bottom line per question, in markdown; `more`:
    the sentences the suites add after them (harness.reports.staged.Pages.bottom_line)."""
    sentences, tables = [], []
    for question in QUESTIONS:
        lines, found = question_lines(live, question)
        sentences += lines
        tables += [(question, *t) for t in found]
    sentences += [s for s in more if s]
    return sentences, tables


def table_title(question: Question, index: int, cases: frozenset) -> str:
    return (f"{question.name}: ranked on {question.check}" + ("" if index == 0 else
                                                              f", rows run on other cases ({_cases_text(cases)})"))


def verdict_lines(live: pd.DataFrame, more=()) -> list:
    """summary.md's bottom line: the sentences, the rule, and each question's ranking per case group."""
    sentences, tables = bottom_line(live, more)
    lines = [*(f"- {markdown.line(s)}" for s in sentences), "", RULE, ""]
    for question, index, cases, table in tables:
        lines += [f"### {markdown.line(table_title(question, index, cases))}", "", markdown.table(table), ""]
    return lines


def recorded_differences(live: pd.DataFrame) -> str | None:
    """How many samples the run recorded a different all-checks verdict for than today's scoring gives."""
    then = live["recorded_passed"]
    differ = [(a, b) for a, b in zip(then, live["passed"]) if a is not None and a == a and bool(a) != bool(b)]
    if not differ:
        return None
    passed_then = sum(1 for a, _ in differ if a)
    return (f"{len(differ)} sample(s) score differently now than the verdict their run recorded ({passed_then} "
            "recorded as passed now fail); the run's verdicts are kept in the transcripts as `recorded_verdicts` "
            "(older records: `verdicts`; once brought up to current scoring by tools/rescore_transcripts.py, the "
            "run's all-checks verdict as `rescored.run_passed`), and every table here counts the current scoring.")


def top_names(live: pd.DataFrame, top: int = 3) -> list:
    """(label, samples, [(deviation, count)], [(finding, count)]) per model (and runtime), over all modes."""
    out = []
    several = live["runtime"].nunique() > 1
    for (model, runtime), group in live.groupby(["model", "runtime"], sort=True):
        most = [sorted(Counter(n for names in group[column] for n in names).items(), key=lambda c: (-c[1], c[0]))[:top]
                for column in ("deviations", "findings")]
        out.append((model + (f" ({runtime})" if several else ""), len(group), *most))
    return out


def top_deviations_lines(live: pd.DataFrame, top: int = 3) -> list:
    """Per model (and runtime), the deviations and findings its live samples show most, over all modes."""
    shown = lambda pairs: ", ".join(f"`{name}` ×{n}" for name, n in pairs) or "none"  # noqa: E731
    return [f"- **{markdown.line(label)}** ({n} samples): deviations {shown(devs)}; findings {shown(finds)}"
            for label, n, devs, finds in top_names(live, top)]
