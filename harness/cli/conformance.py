"""`harness conformance`: the offline conformance report over every pinned template, and the rejection matrix."""

from __future__ import annotations

from harness.suites.command_line import EXIT_FINDING, EXIT_OK, add_results_dir, emit_json
from harness.core.errors import HarnessError
from harness.core.safe_writes import check_writable
from harness.pins.sources import list_templates, resolve_template
from harness.reports import conformance as conformance_report
from harness.template import conformance


def cmd_conformance(args) -> int:
    if args.template:
        return _given_templates(args)
    root = args.results_dir.root
    # The run takes minutes; a folder it cannot write into is said before, not after them.
    check_writable(root, "conformance.md and conformance.json")
    refs = [resolve_template(pin.id) for pin in list_templates()]
    report = conformance.run(refs)
    try:
        md, js = conformance_report.write(report, args.results_dir)
    except OSError as exc:          # the disk filled up, or the folder changed, while the report was made
        raise HarnessError(f"cannot write the conformance report into {root}: {exc.strerror or exc}"
                           + (f": {exc.filename}" if exc.filename else "")) from None
    if args.json:
        emit_json(report["summary"])
    else:
        s = report["summary"]
        print(f"{s['templates']} templates: {s['detected']} detected, {s['declared']} declared, {s['walls']} walls, "
              f"{s['no_tools']} without tools; round trip forks: {s['round_trip_failures']}; "
              f"{s['families']} families; matrix violations: {s['matrix_violations']}")
        print(f"wrote {md} and {js}")
    return 1 if report["matrix"]["violations"] else 0


def _given_templates(args) -> int:
    """Conformance of the templates named (any .jinja file or GGUF, pinned or not), printed: the report over
    the pinned set in the results folder is not rewritten from a subset."""
    report = conformance.run([resolve_template(t) for t in args.template])
    rows = report["templates"]
    if args.json:
        emit_json({"templates": rows, "matrix_violations": report["matrix"]["violations"]})
    else:
        for row in rows:
            trip = {True: "same", False: "forks", None: "n/a"}[row["round_trips"]]
            print(f"{row['id']}: {row['family'] or 'none'} ({row['status']}) — {row['reason']}")
            print(f"  round trip: {trip}; full tool conversation renders: "
                  + ("yes" if row["full_conversation_renders"] else f"no ({row['full_conversation_error']})"))
        for violation in report["matrix"]["violations"]:
            print(f"matrix violation: {violation}")
    failed = report["matrix"]["violations"] or any(r["status"] == "wall" or r["round_trips"] is False
                                                   for r in rows)
    return EXIT_FINDING if failed else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("conformance", help="offline conformance report over every pinned template",
                       description="Detect, round-trip and render every pinned template; run the rejection matrix; "
                                   "write conformance.md and conformance.json.")
    add_results_dir(p, "write conformance.md and conformance.json into DIR", "--out")
    p.add_argument("--template", action="append", metavar="PATH_OR_ID",
                   help="check this template only (a .jinja file or a GGUF, pinned or not; repeatable): printed, "
                        "nothing written; exit status 1 for a wall, a round trip that forks or a matrix violation")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (with --template: the rows)")
    p.epilog = ("Per template: the family detection finds (a probe conversation with and without a call, the "
                "difference read back by each family's parser; no template source is fingerprinted), the status, "
                "the round trip (the parsed call rendered back gives the same text) and the full conversation. The "
                "rejection matrix runs every parser over every family's canonical outputs and near misses and every "
                "template's rendered call: only the diagonal may accept. docs/strictness.md lists where a peer "
                "runtime reads a call the strict parser rejects, and why (python tools/strictness_ledger.py). "
                "exit status: 0, 1 when the matrix has a violation, 2 error")
    p.set_defaults(func=cmd_conformance)
