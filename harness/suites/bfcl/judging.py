"""BFCL's records of a results folder read again and judged: each record through the current parser
(harness.suites.bfcl.outcome), then, by `judge`, BFCL's own checker on the calls the strict parser read, and
separately on the calls a lenient reading of the named near miss gives. The checker (harness.peers.bfcl, in its
own environment) is started by the page (harness.suites.bfcl.page.judge_folder), so declaring the suite loads
none of it. What the page, the grammar designs page and the deployment suite count."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.storage.counted_once import CountedOnce, distinct_files, sample_home
from harness.storage.records import ModelRecord, SampleRecord
from harness.storage.results import ResultsDir
from harness.evaluation.setups import CurrentSetups
from harness.grammar.plan import folder_variant
from harness.storage.transcripts import read_transcript
from harness.suites.bfcl.cases import CATEGORIES, category_of, load_suite
from harness.suites.bfcl.outcome import outcome

# What each case comes to on bfcl.md, in the page's words: BFCL's checker's verdict on its calls, or why there
# is none. BFCL's checker names its own error types (its `error_type`, e.g. "simple_function_checker:wrong_count"),
# which the page counts as they come; these are the states this code gives a case.
LABELS = {
    "valid": "BFCL's own checker accepted the calls handed to it (for irrelevance: no decodable call)",
    "invalid": "BFCL's own checker rejected the calls; its error type, counted on the page, says why",
    "stopped-by-error": "the sample stopped on an error (the template raised, generation failed); no checker "
                        "was asked and the case fails every column",
    "checker error": "BFCL's checker raised on the request instead of judging; counted as a failure, apart",
    "not judged": "BFCL's checker environment is not built here (scripts/setup_bfcl.sh); no verdict at all",
}


def read_outcomes(results: ResultsDir, warnings: list) -> tuple:
    """(outcomes, suite, model records by id) of every BFCL record; records of a case that changed since (or
    that this pin does not have) are left out with a warning."""
    once, models, setups = CountedOnce(), {}, CurrentSetups(folder_variant(results.root))
    # Each file once and each case's record once: a copy or a link of a file beside it counts nothing twice.
    for path in distinct_files(results.bfcl_files(), warnings):
        transcript = read_transcript(path)
        warnings += transcript.warnings
        once.add_file(path, [(r.key(), sample_home(r), r) for r in transcript.records if isinstance(r, SampleRecord)])
        models.update({r.model.id: r for r in transcript.records if isinstance(r, ModelRecord)})
        for r in transcript.records:
            if isinstance(r, ModelRecord):
                setups.add(r)
    records = once.values()
    warnings += once.warnings()
    if not records:
        return [], None, models
    wanted = sorted({c for r in records for c in [category_of(r.scenario.name[len("bfcl-"):])] if c},
                    key=CATEGORIES.index)
    suite = load_suite(wanted)
    out, stale, outdated = [], Counter(), Counter()
    for record in records:     # one per sample: CountedOnce kept the later record of a key
        case = suite.by_name(record.scenario.name)
        if case is None or case.scenario.hash != record.scenario.hash:
            stale[record.model.id] += 1
            continue
        if setups.outdated(record, case.scenario):
            outdated[(record.model.id, record.mode)] += 1
            continue
        out.append(outcome(case, record))
    warnings += [f"{model}: {n} BFCL record(s) of cases this pin does not hold as recorded, left out (re-run)"
                 for model, n in sorted(stale.items())]
    warnings += [f"{model} {mode}: {n} BFCL record(s) written under an older setup (grammar or fallback rule), "
                 "left out (re-run with harness run --suite bfcl)" for (model, mode), n in sorted(outdated.items())]
    return out, suite, models


def judge(outcomes: list, checker, suite) -> dict:
    """{(case, model, mode): (strict verdict, lenient verdict)}, each {"valid", "error_type"} or {"error"}."""
    out = {}
    for o in outcomes:
        if o.errored:
            # The sample stopped on an error (the template raised, generation failed): nothing the model wrote
            # can be right, so no checker is asked, and an irrelevance case is no abstention either.
            stopped = {"valid": False, "error_type": "stopped-by-error", "errors": []}
            out[(o.case, o.model, o.mode)] = (stopped, stopped)
            continue
        functions, answer = suite.cases[o.case].functions, suite.cases[o.case].answer
        strict = checker.judge(o.category, functions, o.strict, answer)
        lenient = checker.judge(o.category, functions, o.lenient, answer) if o.lenient_read else strict
        out[(o.case, o.model, o.mode)] = (strict, lenient)
    return out


def valid_verdict(verdict) -> bool:
    return bool(verdict and verdict.get("valid"))


@dataclass
class Judged:
    """BFCL's records of a folder, read again and judged: what bfcl.md and the bottom line are written from."""
    outcomes: list
    verdicts: dict | None = None   # None: BFCL's checker was not run
    suite: object = None
    hello: dict | None = None
    note: str | None = None
