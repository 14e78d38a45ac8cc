"""`harness detect`: a template's tool-call family, from the template itself. Its --json output is a
contract other tools call; keep its keys stable."""

from __future__ import annotations

from harness.suites.command_line import EXIT_FINDING, EXIT_OK, detect_ref, emit_json
from harness.pins.sources import resolve_template


def cmd_detect(args) -> int:
    ref = resolve_template(args.template)
    found = detect_ref(ref)
    from harness.template.detect import nearest_families  # rendering machinery only this command needs

    near = nearest_families(found)
    if args.json:
        out = found.to_json()
        if near:
            out["nearest"] = [{"family": f, "deviation": d, "detail": detail} for f, d, detail in near]
        emit_json(out)
    else:
        print(f"{ref.id}: {found.family or 'none'} ({found.status}) — {found.reason}")
        if found.rendered_call:
            print(f"rendered call:\n{found.rendered_call}")
        print_nearest(found, near)
        for finding in found.findings:
            print(f"finding {finding['name']}: {finding['detail']}")
        if found.declared:
            print(f"declared by its pin: model card {found.declared['model_card']}; parsers: " +
                  ", ".join(f"{peer} {name}" for peer, name in found.declared["parsers"].items()))
    # A template without tools is an answer (chat without tools), not a failure; a wall is.
    return EXIT_FINDING if found.status == "wall" else EXIT_OK


def print_nearest(found, near=None) -> None:
    """For a wall: the family whose parser came nearest to reading its rendered call, and what deviates."""
    from harness.template.detect import nearest_families

    near = nearest_families(found) if near is None else near
    if not near:
        return
    family, deviation, detail = near[0]
    print(f"nearest family: {family}: {deviation}" + (f" ({detail})" if detail else ""))
    if len(near) > 1:
        print("also near: " + ", ".join(f"{f}: {d}" for f, d, _ in near[1:]))


def register(sub) -> None:
    p = sub.add_parser("detect", help="detect a template's tool-call family from the template itself",
                       description="Render a probe conversation with and without a tool call and report which "
                                   "family's parser reads the rendered call back.")
    p.add_argument("template", metavar="PATH_OR_ID",
                   help="a pinned template id, any .jinja file, or a GGUF that embeds a template")
    p.add_argument("--json", action="store_true",
                   help='print {"family", "status", "reason", "rendered_call", "findings"}, and "declared" '
                        '(the family and its evidence) when the status is declared, and "nearest" (the families '
                        'whose parsers read a wall\'s call as theirs, each with its deviation) when there are any')
    p.epilog = ("status: detected (a family's parser reads the rendered call back), declared (the family a pin "
                "declares, with its evidence under \"declared\", for a template that never renders a call), wall "
                "(the template renders a call no family reads; the reason says why, and the nearest family with "
                "its deviation) or no tools. findings are named facts beside it: tools-as-functions, "
                "list-methods-refused (with the family found that way), calls-through-content. "
                "exit status: 0 detected, declared (by the template's pin) or no tools (the template has no tool "
                "format), 1 wall, 2 error")
    p.set_defaults(func=cmd_detect)
