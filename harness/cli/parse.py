"""`harness parse`: one raw reply on stdin, read by a family's strict parser. Its --json output is a contract
other tools call; keep its keys stable."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import families as registry
from harness.suites.command_line import EXIT_FINDING, EXIT_OK, detect_ref, emit_json
from harness.core.errors import HarnessError, ToolSchemaError
from harness.core.input_files import read_bounded, read_regular_text
from harness.evaluation.scoring import (
    INVALID_ARGUMENTS, JSON_NOTATION, PYTHON_NOTATION, STRING_COERCED, UNKNOWN_TOOL, writes_values_as_text,
)
from harness.schema.arguments import tool_parameters, type_arguments
from harness.schema.schemas import check_tools
from harness.pins.sources import resolve_template


def template_kwarg(text: str) -> tuple:
    """KEY=VALUE; VALUE is read as JSON when it is JSON (false, 3, {"a": 1}), else kept as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def _boolean(text: str) -> bool:
    # Exactly the two JSON words the template sees: `no` or `0` would be a guess at what the user meant.
    if text in ("true", "false"):
        return text == "true"
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _load_tools(path: Path) -> dict:
    text = read_regular_text(path, what="--tools")     # a FIFO or a link to /dev/zero is refused by name
    try:
        tools = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise HarnessError(f"--tools {path}: not a readable JSON file ({exc!r})") from None
    try:
        return check_tools(tools)
    except ToolSchemaError as exc:
        raise HarnessError(f"--tools {path}: {exc}") from None


def _read_reply() -> str:
    """The reply on stdin, read as before (text, newlines as Python reads them), but bounded: stdin may be
    /dev/zero."""
    try:
        return read_bounded(sys.stdin, "the reply on stdin")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"the reply on stdin is not text in {sys.stdin.encoding}: {exc.reason} at byte "
                           f"{exc.start}") from None


def _type_calls(out: dict, tools: dict) -> tuple:
    """Arguments typed by each tool's schema, in place; what the schema refuses, and a string read as JSON in a
    family that writes typed values, are named findings; the union branches that typed a value are listed."""
    findings, branches = [], []
    as_text = writes_values_as_text(out["family"])
    for index, call in enumerate(out["calls"]):
        if call.get("json_literals"):
            findings.append({"name": JSON_NOTATION, "call": index, "detail": "JSON's true/false/null where the "
                             f"template writes Python's True/False/None: {', '.join(call['json_literals'])}"})
        tool = tools.get(call["name"])
        if tool is None:
            findings.append({"name": UNKNOWN_TOOL, "call": index,
                             "detail": f"{call['name']!r} is not in --tools ({', '.join(tools) or 'none'})"})
            continue
        typed = type_arguments(call["arguments"] if isinstance(call["arguments"], dict) else {},
                               tool_parameters(tool), registry.value_notation(out["family"]))
        branches += [{"call": index, **branch} for branch in typed.branches]
        if typed.json_notation:
            findings.append({"name": JSON_NOTATION, "call": index,
                             "detail": "JSON where the template writes Python's str(): "
                                       f"{', '.join(typed.json_notation)}"})
        if typed.coerced and not as_text:
            findings.append({"name": STRING_COERCED, "call": index,
                             "detail": f"written as strings and read as JSON: {', '.join(typed.coerced)}"})
        if typed.ok:
            call["arguments"] = typed.arguments
        else:
            name = PYTHON_NOTATION if typed.python_notation else INVALID_ARGUMENTS
            findings.append({"name": name, "call": index, "detail": typed.error_message()})
    return findings, branches


# How the family was chosen, as `family_from` says it (human and --json).
_FAMILY_FROM = {
    "--family": "given with --family",
    "detected": "detected from the template",
    "declared": "declared by the template's pin in sources.json; the template never renders a call",
    "list-methods-refused": "the family of the call the template renders once list methods are allowed "
                            "(detect's `list-methods-refused` finding); Hugging Face's sandbox refuses it",
}


def _family(args, found) -> tuple:
    """(family, generation prompt, family_from). A template with no family to read with is an input error,
    unless it has no tool format at all: then the reply is text."""
    name, prompt, source = found.reading_family()
    if args.family:
        # A wall's own render fails: its list-methods render still says what the template opened for the reply.
        return args.family, found.generation_prompt or prompt, "--family"
    if name is None and found.status == "wall":
        raise HarnessError(f"{args.template}: no family to read the reply with ({found.reason}); "
                           "pass --family NAME (`harness list families`)")
    return name, prompt, source


def _print_human(out: dict) -> None:
    source = _FAMILY_FROM.get(out["family_from"])
    print(f"family: {out['family'] or 'none'}" + (f" — {source}" if source else ""))
    for call in out["calls"]:
        print(f"call: {call['name']} {json.dumps(call['arguments'], ensure_ascii=False)}")
    if out["deviation"]:
        print(f"deviation: {out['deviation']}" + (f" ({out['detail']})" if out["detail"] else ""))
    elif out["detail"]:
        print(f"note: {out['detail']}")
    for finding in out.get("findings", []):
        print(f"finding: {finding['name']} in call {finding['call']} ({finding['detail']})")
    for branch in out.get("branches", []):
        print(f"typed by {branch['keyword']} branch {branch['branch']} ({branch['type']}): "
              f"{branch['path']} in call {branch['call']}")
    if out["reasoning"]:
        print(f"reasoning: {out['reasoning']}")
    print(f"content: {out['content']}")


def cmd_parse(args) -> int:
    if args.family:
        registry.get(args.family)  # an unknown name fails before the template is rendered
    ref = resolve_template(args.template)
    tools = _load_tools(args.tools) if args.tools else None
    kwargs = dict(args.template_kwarg or [])
    if args.enable_thinking is not None:
        kwargs["enable_thinking"] = args.enable_thinking
    # The generation prompt tells the parser what the template opened (a <think> block, Functionary's >>>):
    # it must be the one the reply was generated after, so the template gets the same variables.
    found = detect_ref(ref, **kwargs)
    name, prompt, source = _family(args, found)
    reply = _read_reply()
    if name is None:
        out = {"family": None, "calls": [], "content": reply, "reasoning": None, "deviation": None,
               "detail": f"no family: {found.reason}; the reply is read as text (pass --family to choose one)"}
    else:
        out = registry.parse(name, reply, prompt or "").to_json()
    out["family_from"] = source
    if tools is not None:
        out["findings"], out["branches"] = _type_calls(out, tools)
    if args.json:
        emit_json(out)
    else:
        _print_human(out)
    return EXIT_FINDING if out["deviation"] or out.get("findings") else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("parse", help="parse one raw model reply (stdin) with a family's strict parser",
                       description="Read a raw reply (special tokens as text) on stdin and parse it strictly. Pass the "
                                   "template variables the reply was generated with: the parser is handed that "
                                   "generation prompt, so a reply written with thinking off is not read as a call "
                                   "inside an opened <think>. A parser never repairs: a near miss comes back with "
                                   "no calls, the text kept as content, and a deviation name.")
    p.add_argument("--template", required=True, metavar="PATH_OR_ID", help="the template the reply follows")
    # No `choices`: listing them would load every family file to build the parser, so one bad file would break
    # every command, --help included. registry.get names the known families when the name is wrong.
    p.add_argument("--family", help="the family to parse with (default: detected, else declared by the template's "
                                    "pin, else the family a list-methods wall renders; `harness list families`)")
    p.add_argument("--template-kwarg", action="append", type=template_kwarg, metavar="KEY=VALUE",
                   help="a template variable the reply was generated with (VALUE read as JSON when it is JSON); "
                        "repeatable")
    p.add_argument("--enable-thinking", type=_boolean, metavar="true|false",
                   help="shorthand for --template-kwarg enable_thinking=true|false")
    p.add_argument("--tools", type=Path, metavar="FILE",
                   help='a JSON list of OpenAI-style tool definitions: arguments are typed by their schemas, and '
                        'what a schema refuses is listed under "findings"')
    p.add_argument("--json", action="store_true",
                   help='print {"family", "calls", "content", "reasoning", "deviation", "detail", "family_from"} '
                        '(and "findings" and "branches" with --tools); family_from: --family, detected, declared, '
                        'list-methods-refused, or null')
    p.epilog = ("With --tools, each call's arguments are typed by its schema, every nested leaf included, and the "
                "output adds \"findings\": [{\"name\": invalid-arguments | python-notation-arguments | "
                "unknown-tool | string-coerced-arguments (a JSON family's string read as the number or object its "
                "schema asks for), \"call\", \"detail\"}] and \"branches\": [{\"call\", \"path\", "
                "\"keyword\", \"branch\", \"type\"}], the anyOf/oneOf branch that typed each union value. The "
                "tool file is checked first: duplicate names, a remote $ref (schemas are never fetched), $ref loops, "
                "nesting past 64 levels, wrong-typed keywords and patterns that need backtracking are refused with "
                "the tool and the place; patterns run without backtracking. "
                "exit status: 0 the reply parses without a deviation (a call, or text), 1 a deviation or (with "
                "--tools) an argument finding, 2 error (a wall with no family to read with, without --family)")
    p.set_defaults(func=cmd_parse)
