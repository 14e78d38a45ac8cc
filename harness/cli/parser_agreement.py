"""`harness parser-agreement`: vLLM's and SGLang's tool parsers on the strict parser's corpus, one-shot and
streamed, in the peers environment (scripts/setup_peers.sh); writes DIR/parser-agreement.md."""

from __future__ import annotations

import json
import sys

from harness.cli.common import EXIT_FINDING, EXIT_OK, add_results_dir, log


def run(args) -> int:
    from harness.backends.peers import PROJECTS, SETUP_COMMAND, Peers, peers_python
    from harness.core.errors import HarnessError
    from harness.evaluation.parser_agreement import agreement_markdown
    from harness.live.parser_agreement import build_cases, parser_for, run_case
    from harness.pins.sources import load_sources, resolve_template

    python = peers_python()
    if python is None:
        raise HarnessError(f"the peers environment is not built; build it with: {SETUP_COMMAND}")
    sources = load_sources()
    ids = args.template or list(sources.templates)
    if args.source and args.source not in ("canonical", "near-miss"):
        ids = [args.source]
    templates = [resolve_template(t, sources) for t in ids]
    cases, unmapped = build_cases(templates, set(args.family or ()) or None)
    cases = [c for c in cases if (not args.source or c.source == args.source) and (not args.case or c.name in args.case)]
    projects = args.project or list(PROJECTS)
    records = []
    with Peers(python) as peers:
        hello = peers.hello()
        broken = {p: v["error"] for p, v in hello["projects"].items() if "error" in v and p in projects}
        if broken:
            raise HarnessError("the peers environment does not import " +
                               "; ".join(f"{p}: {why}" for p, why in broken.items()))
        for case in cases:
            for project in projects:
                parser = parser_for(case, project)
                if parser is None:
                    continue
                record = run_case(peers, case, project, parser, args.splits, args.seed)
                records.append(record)
                log(f"harness parser-agreement: {project} {parser} / {case.source} / {case.name}: "
                    f"{', '.join(record['labels'])}")
    whole_run = not (args.family or args.project or args.template or args.source or args.case)
    if args.json:
        print(json.dumps(records, ensure_ascii=False, indent=1))
    environment = {"projects": {p: hello["projects"][p]["version"] for p in projects},
                   "splits": args.splits, "seed": args.seed}
    if whole_run:
        path = args.results_dir.root / "parser-agreement.md"
        path.write_text(agreement_markdown(records, environment, unmapped), encoding="utf-8")
        print(f"{len(records)} case(s), {sum(r['labels'] == ['agree'] for r in records)} agree -> {path}",
              file=sys.stderr if args.json else sys.stdout)
    elif not args.json:
        for r in records:
            print(f"{r['project']} {r['parser']} / {r['family']} / {r['source']} / {r['case']}: "
                  f"{', '.join(r['labels'])}" + (f" — {'; '.join(r['details'])}" if r["details"] else ""))
    return EXIT_OK if all(r["labels"] == ["agree"] for r in records) else EXIT_FINDING


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "parser-agreement", help="vLLM's and SGLang's tool parsers against the strict parser, streamed and not",
        description="Every family mapped by its peers: to a vLLM or SGLang parser: its canonical outputs and near "
                    "misses and every template's runtime-conformance corpus, read by that parser one-shot and "
                    "streamed (whole, token by token, seeded random splits of 1-4 tokens) in the peers environment "
                    "(bash scripts/setup_peers.sh), labelled against the strict parse. Without a filter it writes "
                    "DIR/parser-agreement.md; with one it prints the cases (--json: the records). Exit 1 when any "
                    "case disagrees.")
    p.add_argument("--project", action="append", choices=("vllm", "sglang"), help="only this project (repeatable)")
    p.add_argument("--family", action="append", metavar="NAME", help="only this family (repeatable)")
    p.add_argument("--template", action="append", metavar="ID", help="only these templates' corpora (repeatable)")
    p.add_argument("--source", metavar="SRC", help="only cases from canonical, near-miss, or this template's corpus")
    p.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable)")
    p.add_argument("--splits", type=int, default=20, metavar="N", help="random 1-4 token splits per reply (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random splits (default 0)")
    p.add_argument("--json", action="store_true", help="print every case's record as JSON")
    add_results_dir(p, "write parser-agreement.md here")
    p.set_defaults(func=run)
