"""`harness report`: rebuild results/*.md, results/heatmap.png, results/report.html and the sample pages beside it
(results/samples/) from transcripts alone."""

import sys
from pathlib import Path

from harness.suites.command_line import add_results_dir, emit_json
from harness.core.errors import HarnessError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="rebuild the result tables and heat map from results/transcripts (no model loaded)",
        description="Re-score every recorded sample through the current parsers, add the seed ADR's replayed "
                    "replies, and write results/<model>.md, results/summary.md, results/heatmap.png and "
                    "results/report.html (the tables), with every sample's transcript on pages beside it in "
                    "results/samples/. Every file is put in place only once all are written.")
    add_results_dir(parser, "read DIR/transcripts and DIR/runtimes and write the reports into DIR")
    parser.add_argument("--no-plot", action="store_true", help="skip the heat map")
    parser.add_argument("--json", action="store_true", help="print the rates as JSON on stdout")
    parser.set_defaults(func=run)


def run(args) -> int:
    from harness import suites
    from harness.reports.report import write_reports

    root = args.results_dir.root
    if not root.is_dir():
        raise HarnessError(f"{root}: no such folder (a run writes its transcripts into DIR/transcripts; "
                           "`harness run --results-dir DIR` makes it)")
    try:
        result = write_reports(args.results_dir, plot=not args.no_plot,
                               pages=[suite.write_pages for suite in suites.registered().values()])
    except OSError as exc:
        # A folder we may read but not write (read-only, full, a file where a report goes): say where.
        raise HarnessError(f"cannot write the reports into {root}: {exc.strerror or exc}"
                           + (f": {exc.filename}" if exc.filename else "")) from exc
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        emit_json(result)
    else:
        pages = str(args.results_dir.samples)
        paged = [p for p in result["written"] if str(Path(p).parent) == pages]
        for path in result["written"]:
            if path not in paged:
                print(path)
        if paged:
            print(f"{pages}/ ({len(paged)} page{'s' if len(paged) > 1 else ''} of samples)")
        if not result["written"] and not result["skipped"]:
            print("no transcripts yet: run `harness run` first", file=sys.stderr)
    if result["skipped"]:
        # The reports are written without them, but a damaged transcript must not pass as a clean rebuild.
        print(f"harness report: {len(result['skipped'])} malformed transcript record(s) skipped (listed above); "
              "the reports leave them out", file=sys.stderr)
        return 1
    return 0
