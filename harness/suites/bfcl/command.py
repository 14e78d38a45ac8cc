"""`harness run --suite bfcl`: BFCL v4's single-turn cases through the runner, as scenario samples are.

BFCL has no command of its own: its cases are scenarios, run by `harness run` (harness.cli.run adds this
suite's flags with add_arguments and hands the run to run_bfcl when they ask for it). Each case is a Scenario
(harness.suites.bfcl.cases) driven by harness.live.runner.run_model: the model's own template, every mode the
model runs in (or --mode), the strict parser. Samples go to DIR/bfcl/<model>.jsonl in the transcript format, so
a killed run resumes; `harness report` judges them (our checks and BFCL's checker) into DIR/bfcl.md."""

from __future__ import annotations

import sys

from harness.core.errors import HarnessError
from harness.core.values import int_argument
from harness.storage.results import ResultsDir


def add_arguments(parser) -> None:
    """`harness run`'s flags that choose this suite and its cases."""
    parser.add_argument("--suite", choices=("scenarios", "bfcl"), default="scenarios",
                        help="scenarios (scenarios/*.yaml, the default) or bfcl: BFCL v4's single-turn cases from "
                             "the pinned bfcl-eval wheel, into DIR/bfcl/<model>.jsonl (docs/bfcl.md)")
    parser.add_argument("--category", action="append", metavar="NAME",
                        help="with --suite bfcl: a BFCL category, e.g. simple_python (repeatable or a comma list; "
                             "default: every single-turn category)")
    parser.add_argument("--cases", type=int_argument(1, 100000), metavar="N",
                        help="with --suite bfcl: N cases per category, a draw seeded by --seed (default: all)")


def asked(args) -> bool:
    """The run is BFCL's: --suite bfcl, or a flag that only chooses BFCL cases (run_bfcl says it needs the suite)."""
    return args.suite == "bfcl" or bool(args.category) or bool(args.cases)


def _categories(given) -> list | None:
    if not given:
        return None
    return [c.strip() for item in given for c in item.split(",") if c.strip()]


def run_bfcl(args) -> int:
    from harness.suites.command_line import emit_json, report_hint
    from harness.suites.run_loop import drive, models_to_run
    from harness.suites.bfcl.cases import draw, load_suite
    from harness.live.modes import parse_modes
    from harness.pins.sources import load_sources

    if args.suite != "bfcl":
        raise HarnessError("--category and --cases choose BFCL cases: add --suite bfcl")
    if args.scenario or args.samples:
        raise HarnessError("--scenario and --samples choose YAML scenarios: a BFCL case is one sample "
                           "(choose cases with --category and --cases)")
    sources = load_sources()
    modes = parse_modes(args.mode) or None
    categories = _categories(args.category)
    suite = load_suite(categories)        # the pinned wheel is verified here, before any model is opened
    for category in suite.totals:
        skipped = suite.skipped_in(category)
        if skipped:
            print(f"harness run: bfcl {category}: {len(skipped)} of {suite.totals[category]} cases skipped "
                  f"(e.g. {skipped[0].id}: {skipped[0].reason})", file=sys.stderr)
    cases = draw(suite, categories, args.cases, args.seed)
    scenarios = [c.scenario for c in cases]
    results = ResultsDir.at(args.results_dir)
    models, by_id, backend_cls = models_to_run(args, sources, modes)
    outcome = drive(args, models, by_id, backend_cls, scenarios, None, sources, modes,
                    transcript_for=results.bfcl_transcript, label=" (bfcl)")
    if isinstance(outcome, int):
        return outcome
    summaries, failures = outcome
    if args.json:
        emit_json({"suite": "bfcl", "cases": len(cases), "skipped": len(suite.skipped), "models": summaries,
                   "failures": failures})
    else:
        for s in summaries:
            per = f", {s['seconds'] / s['ran']:.1f} s a case" if s["ran"] else ""
            if s.get("superseded"):
                per += (f"; {s['superseded']} recorded under another setup run again, "
                        f"{s.get('dropped', 0)} old record(s) superseded")
            print(f"{s['model']}: bfcl: ran {s['ran']}, already recorded {s['skipped']}, {s['seconds']} s{per}"
                  f" -> {s['transcript']}")
        if summaries:
            print(report_hint(results))
    return 1 if failures or any(s["failed"] for s in summaries) else 0
