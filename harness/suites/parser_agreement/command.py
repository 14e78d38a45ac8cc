"""`harness parser-agreement`: vLLM's, SGLang's and transformers' tool parsers on the strict parser's corpus, one-shot and
streamed, in the peers environment (scripts/setup_peers.sh); a whole run writes DIR/parser-agreement/PROJECT.jsonl
(resumable) and DIR/parser-agreement.md."""

from __future__ import annotations

import json
import sys

from harness.suites.command_line import EXIT_FINDING, EXIT_OK, add_results_dir, log


def run(args) -> int:
    from harness.peers import SETUP_COMMAND, Peers, peers_python
    from harness.core.errors import HarnessError
    from harness.pins.sources import load_sources, resolve_template
    from harness.suites.parser_agreement.detection_driver import detect_all, write_detections
    from harness.suites.parser_agreement.driver import TRANSCRIPT, build_cases, parser_for, run_case, run_suite
    from harness.suites.parser_agreement.judging import PROJECTS, unmapped
    from harness.suites.parser_agreement.page import markdown

    python = peers_python()
    if python is None:
        raise HarnessError(f"the peers environment is not built; build it with: {SETUP_COMMAND}")
    sources = load_sources()
    if args.detection:
        with Peers(python) as peers:
            version = _versions(peers, ["sglang"])["sglang"]
            lines = detect_all(peers, [resolve_template(t, sources) for t in sources.templates], version)
        path = args.results_dir.template_detection_records("sglang")
        write_detections(path, lines)
        print(f"SGLang {version}'s template detection on {len(lines) - 1} template(s) -> {path}")
        return EXIT_OK
    ids = args.template or list(sources.templates)
    if args.source and args.source not in ("canonical", "near-miss", "sglang-event"):
        ids = [] if args.source.startswith(TRANSCRIPT) else [args.source]
    templates = [resolve_template(t, sources) for t in ids]
    cases, _ = build_cases(templates, set(args.family or ()) or None, args.results_dir.transcript_files())
    cases = [c for c in cases if (not args.source or c.source == args.source) and (not args.case or c.name in args.case)]
    projects = args.project or list(PROJECTS)
    whole_run = not (args.family or args.project or args.template or args.source or args.case)

    def progress(r):
        log(f"harness parser-agreement: {r.project} {r.parser} / {r.source} / {r.case}: {', '.join(r.labels)}")

    with Peers(python) as peers:
        versions = _versions(peers, projects)
        if whole_run:
            records, resumed = run_suite(peers, cases, projects, versions, args.results_dir, args.splits, args.seed,
                                         progress)
            # SGLang's template detection on every pinned template, beside ours, on the same page.
            write_detections(args.results_dir.template_detection_records("sglang"),
                             detect_all(peers, [resolve_template(t, sources) for t in sources.templates],
                                        versions["sglang"]))
        else:
            records = []
            for case in cases:
                for project in projects:
                    parser = parser_for(case, project)
                    if parser is not None:
                        records.append(run_case(peers, case, project, parser, versions[project], args.splits,
                                                args.seed))
                        progress(records[-1])
    if args.json:
        print(json.dumps([r.to_json() for r in records], ensure_ascii=False, indent=1))
    if whole_run:
        path = args.results_dir.parser_agreement_report
        path.write_text(markdown(records, unmapped(), args.results_dir.root), encoding="utf-8")
        print(f"{len(records)} case(s) ({resumed} already recorded), {sum(r.labels == ['agree'] for r in records)} "
              f"agree -> {args.results_dir.parser_agreement}/, {path}", file=sys.stderr if args.json else sys.stdout)
    elif not args.json:
        for r in records:
            print(f"{r.project} {r.parser} / {r.family} / {r.source} / {r.case}: "
                  f"{', '.join(r.labels)}" + (f" — {'; '.join(r.details)}" if r.details else ""))
    return EXIT_OK if all(r.labels == ["agree"] for r in records) else EXIT_FINDING


def _versions(peers, projects: list) -> dict:
    """Each project's version, from the worker's hello; a project that does not import stops the command."""
    from harness.core.errors import HarnessError

    hello = peers.hello()
    broken = {p: v["error"] for p, v in hello["projects"].items() if "error" in v and p in projects}
    if broken:
        raise HarnessError("the peers environment does not import " +
                           "; ".join(f"{p}: {why}" for p, why in broken.items()))
    return {p: hello["projects"][p]["version"] for p in projects}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "parser-agreement", help="vLLM's, SGLang's and transformers' tool parsers against the strict parser, streamed and not",
        description="Every family mapped by its peers: to a vLLM, SGLang or transformers parser: its canonical outputs and near "
                    "misses, every template's runtime-conformance corpus and the replies models wrote in "
                    "DIR/transcripts/, read by that parser one-shot and "
                    "streamed (whole, token by token, seeded random splits of 1-4 tokens) in the peers environment "
                    "(bash scripts/setup_peers.sh), labelled against the strict parse. Without a filter it records "
                    "each case in DIR/parser-agreement/PROJECT.jsonl (a killed run resumes; a case already read "
                    "by the same parser is not read again) and writes DIR/parser-agreement.md; with one it prints "
                    "the cases (--json: the records) and records nothing. Exit 1 when any case disagrees.")
    p.add_argument("--project", action="append", choices=("vllm", "sglang", "transformers"), help="only this project (repeatable)")
    p.add_argument("--family", action="append", metavar="NAME", help="only this family (repeatable)")
    p.add_argument("--template", action="append", metavar="ID", help="only these templates' corpora (repeatable)")
    p.add_argument("--source", metavar="SRC", help="only cases from canonical, near-miss, sglang-event (the replies SGLang's named "
                   "tolerances describe), this template's corpus, or "
                   "transcript:MODEL")
    p.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable)")
    p.add_argument("--splits", type=int, default=20, metavar="N", help="random 1-4 token splits per reply (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random splits (default 0)")
    p.add_argument("--json", action="store_true", help="print every case's record as JSON")
    p.add_argument("--detection", action="store_true",
                   help="only SGLang's template detection (--tool-call-parser auto) on every pinned template, "
                        "written to DIR/template-detection/sglang.jsonl (a whole run writes it too); "
                        "`harness report` puts it beside ours on DIR/parser-agreement.md")
    add_results_dir(p, "write parser-agreement/ and parser-agreement.md here")
    p.set_defaults(func=run)
