"""`harness run --suite bfcl`: BFCL v4's single-turn cases through the runner, as scenario samples are.

Each case is a Scenario (harness.evaluation.bfcl) driven by harness.live.runner.run_model: the model's own
template, every mode the model runs in (or --mode), the strict parser. Samples go to DIR/bfcl/<model>.jsonl in
the transcript format, so a killed run resumes; `harness report` judges them (our checks and BFCL's checker)
into DIR/bfcl.md."""

from __future__ import annotations

import sys

from harness.core.errors import HarnessError
from harness.evaluation.results import ResultsDir


def _categories(given) -> list | None:
    if not given:
        return None
    return [c.strip() for item in given for c in item.split(",") if c.strip()]


def run_bfcl(args) -> int:
    from harness.cli.common import emit_json, report_hint
    from harness.cli.run import _default_modes, _opened_models, _progress, _with_template
    from harness.evaluation.bfcl import draw, load_suite
    from harness.live.modes import parse_modes
    from harness.live.runner import planned_count, run_model
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
    pinned = [m for m in args.model or () if not m.endswith(".gguf")]
    if not args.model and not args.endpoint:
        pinned = [m.id for m in sources.default_models()]
    for model_id in pinned:
        sources.model(model_id)
    opened = _opened_models(args, sources, modes)
    if args.template and pinned and not args.endpoint:
        opened += _with_template(pinned, args, sources)
        pinned = []
    models = pinned + [m.id for m in opened]
    by_id = {m.id: m for m in opened}
    total = sum(planned_count(scenarios, None, _default_modes(m, by_id, sources), modes) for m in models)
    summaries, failures = [], []
    with _progress(total) as bar:
        for model_id in models:
            bar.set_description(f"{model_id} (bfcl)")
            try:
                summaries.append(run_model(model_id, scenarios, None, args.seed, bar, sources,
                                           results_dir=results, threads=args.threads, modes=modes,
                                           model=by_id.get(model_id), transcript=results.bfcl_transcript(model_id),
                                           warn=lambda m: bar.write(f"warning: {m}", file=sys.stderr)))
            except HarnessError as exc:
                failures.append({"model": model_id, "error": str(exc)})
                bar.write(f"harness run: {model_id}: {exc}", file=sys.stderr)
    if args.json:
        emit_json({"suite": "bfcl", "cases": len(cases), "skipped": len(suite.skipped), "models": summaries,
                   "failures": failures})
    else:
        for s in summaries:
            per = f", {s['seconds'] / s['ran']:.1f} s a case" if s["ran"] else ""
            print(f"{s['model']}: bfcl: ran {s['ran']}, already recorded {s['skipped']}, {s['seconds']} s{per}"
                  f" -> {s['transcript']}")
        if summaries:
            print(report_hint(results))
    return 1 if failures or any(s["failed"] for s in summaries) else 0
