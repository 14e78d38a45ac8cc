"""`harness score PATH...`: every recorded sample's verdicts under the current scoring, for CI gates and other
tools (`--json`), read from transcript files alone. The report tables count the same verdicts
(harness.evaluation.scored)."""

import sys
from pathlib import Path

from harness.core import constants
from harness.core.errors import HarnessError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "score", help="print every recorded sample's verdicts under the current scoring (no model loaded)",
        description="Re-score the samples of transcript files (results/transcripts/<model>.jsonl, or a folder of "
                    "them) through the current parsers and scenarios, and print per sample its model, scenario, "
                    "mode, seed, sample, verdicts (all_checks: every check that applies holds) and findings. A BFCL "
                    "record (results/bfcl/<model>.jsonl, `harness run --suite bfcl`) is scored against its case "
                    "in the pinned BFCL suite. A record of a scenario or case that has since changed what the "
                    "model sees is printed as stale, without verdicts. Exit 1 when a malformed record was "
                    "skipped.")
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="a transcript .jsonl file, or a folder whose *.jsonl files are read")
    parser.add_argument("--scenarios-dir", type=Path, default=constants.SCENARIOS_DIR, metavar="DIR",
                        help="the scenarios the samples are judged against (default: scenarios/)")
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per sample")
    parser.epilog = ('--json: per sample {"model", "scenario", "mode", "seed", "sample", "call_due", "verdicts": '
                     '{..., "all_checks"}, "deviations", "findings"}, the verdicts the report tables count; a '
                     'record of a since-changed scenario comes back with "stale": true and no verdicts.')
    parser.set_defaults(func=run)


def _files(paths) -> list:
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.jsonl"))
            if not found:
                raise HarnessError(f"{path}: no *.jsonl transcript in this folder")
            files += found
        elif path.exists():
            files.append(path)  # a FIFO or a device is refused by name when read, never opened for reading
        else:
            raise HarnessError(f"{path}: no such file or folder")
    return files


def run(args) -> int:
    from harness.suites.command_line import emit_json
    from harness.suites.bfcl.cases import WithCases
    from harness.evaluation.scenario_files import load_scenarios
    from harness.evaluation.scored import sample_entry, score_transcripts

    # A BFCL record (harness run --suite bfcl) was run on a case of the pinned suite, not on a scenario file: it
    # is scored against that case's scenario, as the report scores it.
    scenarios = WithCases({s.name: s for s in load_scenarios(args.scenarios_dir)})
    # Streamed: each record is scored as it is read and only its entry kept.
    scored = score_transcripts(_files(args.paths), scenarios,
                               keep=lambda record, scenario, verdicts, ref: sample_entry(record, scenario, verdicts))
    entries = list(scored.samples)
    entries += [sample_entry(record, None, None) for record in scored.stale]
    entries += [sample_entry(record, None, None, "not_generated") for record in scored.not_generated]
    for warning in scored.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        emit_json(entries)
    else:
        for e in entries:
            state = ("not generated" if e.get("not_generated") else "stale") if e["verdicts"] is None else {
                True: "pass", False: "fail", None: "n/a"}[e["verdicts"]["all_checks"]]
            names = ", ".join(e["deviations"] + e["findings"])
            print(f"{e['model']}  {e['scenario']}  {e['mode']}  seed {e['seed']}  sample {e['sample']}: {state}"
                  + (f" ({names})" if names else ""))
    if scored.skipped:
        print(f"harness score: {len(scored.skipped)} malformed transcript record(s) skipped (listed above)",
              file=sys.stderr)
        return 1
    return 0
