"""`harness detect`, `harness parse` and `harness conformance`: the offline core. Their --json output is a
contract other tools call; keep its keys stable."""

import sys
from pathlib import Path

from harness import conformance, conformance_report, constants
from harness import families as registry
from harness.cli import emit_json
from harness.detect import detect
from harness.sources import list_templates, resolve_template


def _detect_for(ref):
    return detect(ref.text, ref.bos_token or "", ref.eos_token or "")


def cmd_detect(args) -> int:
    ref = resolve_template(args.template)
    found = _detect_for(ref)
    if args.json:
        emit_json(found.to_json())
    else:
        print(f"{ref.id}: {found.family or 'none'} — {found.reason}")
        if found.rendered_call:
            print(f"rendered call:\n{found.rendered_call}")
    return 0


def cmd_parse(args) -> int:
    ref = resolve_template(args.template)
    found = _detect_for(ref)
    name = args.family or found.family
    reply = sys.stdin.read()
    if name is None:
        out = {"family": None, "calls": [], "content": reply, "reasoning": None, "deviation": None,
               "detail": f"no family: {found.reason}; pass --family to choose one"}
    else:
        out = registry.get(name).parse(reply, found.generation_prompt or "").to_json()
    if args.json:
        emit_json(out)
    else:
        print(f"family: {out['family'] or 'none'}")
        for call in out["calls"]:
            print(f"call: {call['name']} {call['arguments']}")
        if out["deviation"]:
            print(f"deviation: {out['deviation']} ({out['detail']})")
        if out["reasoning"]:
            print(f"reasoning: {out['reasoning']}")
        print(f"content: {out['content']}")
    return 0


def cmd_conformance(args) -> int:
    refs = [resolve_template(pin.id) for pin in list_templates()]
    report = conformance.run(refs)
    md, js = conformance_report.write(report, args.out)
    if args.json:
        emit_json(report["summary"])
    else:
        s = report["summary"]
        print(f"{s['templates']} templates: {s['detected']} detected, {s['walls']} walls, {s['no_tools']} without tools; "
              f"{s['families']} families; matrix violations: {s['matrix_violations']}")
        print(f"wrote {md} and {js}")
    return 1 if report["matrix"]["violations"] else 0


def register(sub) -> None:
    p = sub.add_parser("detect", help="detect a template's tool-call family from the template itself",
                       description="Render a probe conversation with and without a tool call and report which "
                                   "family's parser reads the rendered call back.")
    p.add_argument("template", metavar="PATH_OR_ID", help="a pinned template id or any .jinja file")
    p.add_argument("--json", action="store_true", help='print {"family", "reason", "rendered_call"}')
    p.set_defaults(func=cmd_detect)

    p = sub.add_parser("parse", help="parse one raw model reply (stdin) with a family's strict parser",
                       description="Read a raw reply (special tokens as text) on stdin and parse it strictly.")
    p.add_argument("--template", required=True, metavar="PATH_OR_ID", help="the template the reply follows")
    p.add_argument("--family", choices=registry.names(), help="the family to parse with (default: detected)")
    p.add_argument("--json", action="store_true",
                   help='print {"family", "calls", "content", "reasoning", "deviation", "detail"}')
    p.set_defaults(func=cmd_parse)

    p = sub.add_parser("conformance", help="offline conformance report over every pinned template",
                       description="Detect, round-trip and render every pinned template; run the rejection matrix; "
                                   "write conformance.md and conformance.json.")
    p.add_argument("--out", type=Path, default=constants.RESULTS_DIR,
                   help="directory for the reports (default: results/)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_conformance)
