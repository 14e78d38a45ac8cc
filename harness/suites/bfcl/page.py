"""results/bfcl.md: BFCL v4 cases per model × mode × category, judged by BFCL's checker and by our checks, and
the bottom line's BFCL sentences (summary.md, report.html).

Rebuilt from DIR/bfcl/*.jsonl alone (harness run --suite bfcl), judged by harness.suites.bfcl.judging. Nothing
is written when the folder holds no BFCL record, so a results folder without them regenerates as before; the
grammar designs page (harness.suites.bfcl.designs) is written with it from the same verdicts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.core.errors import BFCLCheckerError
from harness.storage.results import ResultsDir
from harness.evaluation.scoring import wilson
from harness.peers.bfcl import SETUP_COMMAND, BFCLChecker
from harness.pins.archives import archive_tree
from harness.reports.rates import rate_cell
from harness.reports.tables import mode_order
from harness.suites import stage_page
from harness.suites.bfcl.cases import ARCHIVE_ID, CATEGORIES, IRRELEVANCE, category_of
from harness.suites.bfcl.designs import designs_markdown
from harness.suites.bfcl.judging import Judged, judge, read_outcomes, valid_verdict
from harness.suites.bfcl.published import published_lines


# What a cell of BFCL's columns says when its checker was not run: and the command that makes it run.
NOT_JUDGED = f"not judged (`{SETUP_COMMAND}`)"


def judge_folder(results: ResultsDir, warnings: list, checker_python: Path | None = None) -> Judged:
    """Every BFCL record of the folder, judged by BFCL's checker where its environment runs (an empty Judged
    when the folder holds none: the checker is never started for nothing)."""
    outcomes, suite, _ = read_outcomes(results, warnings)
    if not outcomes:
        return Judged([])
    out = Judged(outcomes, suite=suite)
    try:
        with BFCLChecker(checker_python, tree=archive_tree(ARCHIVE_ID)) as checker:
            out.hello = checker.hello
            out.verdicts = judge(outcomes, checker, suite)
    except BFCLCheckerError as exc:
        out.note = (f"BFCL's checker was not run ({exc}); its columns say \"not judged\" until its environment is "
                    f"built: `{SETUP_COMMAND}`, then `harness report` again.")
        warnings.append(out.note)
    return out


def _kinds(verdicts) -> str:
    """BFCL's error types of the failed verdicts, most frequent first: what the checker said was wrong."""
    counts = Counter(v.get("error_type") or ("checker error" if "error" in v else "failed")
                     for v in verdicts if not valid_verdict(v))
    return ", ".join(f"{kind} ×{n}" for kind, n in counts.most_common()) or "–"


def rows(outcomes: list, verdicts: dict | None, suite) -> list:
    groups = {}
    for o in outcomes:
        groups.setdefault((o.model, o.mode, o.category), []).append(o)
    order = sorted(groups, key=lambda k: (k[0], mode_order(k[1]), CATEGORIES.index(k[2])))
    table = []
    for model, mode, category in order:
        group = groups[(model, mode, category)]
        got = [verdicts[(o.case, o.model, o.mode)] for o in group] if verdicts is not None else None
        irrelevance = category in IRRELEVANCE
        seconds = [o.seconds for o in group if o.seconds is not None]
        table.append({
            "model": model, "mode": mode, "category": category, "cases": len(group),
            "BFCL, strict calls": rate_cell([valid_verdict(s) for s, _ in got]) if got else NOT_JUDGED,
            "BFCL, lenient reading": rate_cell([valid_verdict(v) for _, v in got]) if got else NOT_JUDGED,
            "strict call parsed": "–" if irrelevance else rate_cell([bool(o.strict) for o in group]),
            "ours: no call attempted":
                rate_cell([not o.attempted and not o.errored for o in group]) if irrelevance else "–",
            "lenient reading found calls": sum(o.lenient_read for o in group),
            "BFCL's failures, lenient reading": _kinds(v for _, v in got) if got else NOT_JUDGED,
            "format failures": ", ".join(f"{d} ×{n}" for d, n in Counter(
                o.deviation for o in group if o.deviation).most_common()) or "–",
            "checker errors": sum("error" in s or "error" in v for s, v in got) if got else "–",
            "stopped by an error": sum(o.errored for o in group),
            "skipped (schema)": len(suite.skipped_in(category)),
            "s a case": f"{sum(seconds) / len(seconds):.1f}" if seconds else "–"})
    return table


def bfcl_markdown(outcomes: list, verdicts: dict | None, suite, hello: dict | None, note: str | None) -> str:
    table = rows(outcomes, verdicts, suite)
    header = list(table[0])
    lines = ["# BFCL v4 through the strict path", "",
             f"Rebuilt by `harness report` from bfcl/*.jsonl (`harness run --suite bfcl`): BFCL v4's single-turn cases "
             f"from the pinned wheel ({ARCHIVE_ID}), each rendered with its tools through the model's own template, "
             "the reply read by the strict parser. See docs/bfcl.md.", ""]
    if hello is not None:
        lines += [f"- Judged by BFCL's own checker: bfcl-eval {hello['bfcl_eval']}, `ast_checker.py` sha256 "
                  f"`{hello['files']['eval_checker/ast_eval/ast_checker.py'][:16]}…`, the pinned wheel's bytes; "
                  f"substituted: `{next(iter(hello['stubbed']))}` ({next(iter(hello['stubbed'].values()))})."]
    if note:
        lines.append(f"- {note}")
    lines += ["- BFCL, strict calls: BFCL's checker on the calls the strict parser read (none for a near miss). "
              "BFCL, lenient reading: on the calls a lenient reading of the named near miss gives (docs/bfcl.md); "
              "the gap between the two is format, not semantics.",
              "- Irrelevance: BFCL's rule counts a reply with no decodable call as a correct abstention, a malformed "
              "call included; ours (no call attempted) fails a near miss too. Both are shown.",
              "- Rates: k/n, percent, Wilson 95% interval. Skipped (schema): the category's cases whose schema our "
              "typing cannot read, never run. A case stopped by an error (the template raised, generation failed) "
              "fails every column.", "",
              "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(r[h]) for h in header) + " |" for r in table]
    lines += ["", "## Beside BFCL's published figures", "",
              "BFCL's leaderboard runs each model through its own handler (its prompts and decoder), not the model's "
              "template and a strict parser; a published figure is the model's, ours is the model on the strict "
              "path. Each category stands beside the board's column for that same category (Python Simple AST for "
              "simple_python; irrelevance and live_irrelevance apart). A model no board listed says so; a sibling's "
              "figures (same family and size, another fine-tune) are marked as a sibling's.", "",
              *published_lines(outcomes, verdicts, valid_verdict, NOT_JUDGED), ""]
    return "\n".join(lines)


def headline(judged: Judged) -> str:
    """The bottom line's BFCL sentences (markdown), one per question: the categories where a call is due, and
    the irrelevance ones where none is (pooled, a model that never calls would rank on its abstentions). In
    each, rows (model × mode) ranked on BFCL's checker over the calls the strict parser read, only rows run on
    the same cases together; a leader only when its interval lies above every other row's."""
    if not judged.outcomes:
        return ("**BFCL**: no BFCL runs in this folder (`harness run --suite bfcl` records them; `harness report` "
                "then writes bfcl.md).")
    if judged.verdicts is None:
        rows = {(o.model, o.mode) for o in judged.outcomes}
        return (f"**BFCL**: {len(judged.outcomes)} cases recorded over {len(rows)} model × mode rows, not judged: "
                f"BFCL's checker was not run here (bfcl.md says why; `{SETUP_COMMAND}` builds its environment), so "
                "these samples rank nothing.")
    out = []
    for question, abstain in (("calls due", False), ("no call due", True)):
        asked = [o for o in judged.outcomes if ((category_of(o.case) or "") in IRRELEVANCE) is abstain]
        if asked:
            out.append(_question(judged, asked, question))
    return " ".join(out)


def _question(judged: Judged, outcomes: list, question: str) -> str:
    rows = {}
    for o in outcomes:
        rows.setdefault((o.model, o.mode), []).append(o)
    groups = {}
    for (model, mode), group in rows.items():
        valid = [valid_verdict(judged.verdicts[(o.case, o.model, o.mode)][0]) for o in group]
        groups.setdefault(frozenset(o.case for o in group), []).append((model, mode, valid))
    out = []
    for index, (cases, members) in enumerate(sorted(groups.items(), key=lambda g: (-len(g[1]), -len(g[0]),
                                                                                    sorted(g[0])))):
        ranked = sorted(members, key=lambda m: (-wilson(sum(m[2]), len(m[2]))[0], -sum(m[2]) / len(m[2]),
                                                mode_order(m[1]), m[0]))
        categories = sorted({category_of(c) or "?" for c in cases},
                            key=lambda c: (CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES), c))
        many = f"{len(ranked)} row{'s' if len(ranked) > 1 else ''}"
        where = (f"ranked on *BFCL accuracy* (BFCL's own checker on the calls the strict parser read), over the "
                 f"same {len(cases)} case{'s' if len(cases) > 1 else ''} ({', '.join(categories)}) in each of "
                 f"{many}: " if index == 0 else
                 # Rows on other cases are partial runs: their categories are named on bfcl.md, not in the
                 # headline, which stays short enough for the report's first screen.
                 f"{many} run on other cases ({len(cases)} case{'s' if len(cases) > 1 else ''} in "
                 f"{len(categories)} categor{'ies' if len(categories) > 1 else 'y'}), ranked apart: ")
        out.append(f"**BFCL, {question}**, {where}{_lead(ranked)}")
    return " ".join(out)


def _lead(ranked: list) -> str:
    cell = lambda m: f"{m[0]}, {m[1]}: {rate_cell(m[2])}"  # noqa: E731
    best, rest = ranked[0], ranked[1:]
    if not any(any(m[2]) for m in ranked):
        return f"No row passes a single case (0 of {sum(len(m[2]) for m in ranked)})."
    if not rest:
        return f"**{best[0]}, {best[1]}**: {rate_cell(best[2])} (the only row)."
    low = wilson(sum(best[2]), len(best[2]))[0]
    overlapping = [m for m in rest if wilson(sum(m[2]), len(m[2]))[1] >= low]
    if not overlapping:
        return (f"**{best[0]}, {best[1]}** leads with {rate_cell(best[2])}; its interval lies above every other "
                f"row's (next: {cell(rest[0])}).")
    return (f"These samples do not separate the first row ({cell(best)}) from {len(overlapping)} other "
            f"row{'s' if len(overlapping) > 1 else ''} whose interval overlaps it ("
            + "; ".join(cell(m) for m in overlapping[:3]) + (f"; and {len(overlapping) - 3} more" if
                                                             len(overlapping) > 3 else "") + ").")


def write_bfcl(results: ResultsDir, warnings: list, checker_python: Path | None = None, staged=None,
               judged: Judged | None = None) -> list:
    """results/bfcl.md from the BFCL records, or nothing when there are none; staged with the rest of the report
    (harness.reports.staged) when `staged` is given. `judged`: the folder already judged (judge_folder)."""
    judged = judged if judged is not None else judge_folder(results, warnings, checker_python)
    if not judged.outcomes:
        return []
    out = results.bfcl_report
    text = bfcl_markdown(judged.outcomes, judged.verdicts, judged.suite, judged.hello, judged.note)
    if staged is not None:
        staged.text(out, text)
    else:
        out.write_text(text, encoding="utf-8")
    return [str(out)]


def write_pages(pages, checker_python: Path | None = None) -> list:
    """`harness report`'s part for BFCL (pages: harness.reports.staged.Pages): the folder's records judged once,
    into bfcl.md (nothing without records), grammar-designs.md (nothing without a design study) and the bottom
    line's BFCL sentences (pages.bottom_line); staged with the rest of the report, each target checked first."""
    results, warnings = pages.results, pages.warnings
    judged = judge_folder(results, warnings, checker_python)
    written = []
    if judged.outcomes:
        written += stage_page(pages, results.bfcl_report.name, lambda: bfcl_markdown(
            judged.outcomes, judged.verdicts, judged.suite, judged.hello, judged.note))
    designs = designs_markdown(results, judged, lambda folder: judge_folder(folder, warnings, checker_python),
                               valid_verdict, pages.samples)
    if designs is not None:
        written += stage_page(pages, results.designs_report.name, lambda: designs)
    pages.bottom_line.append(headline(judged))
    return written
