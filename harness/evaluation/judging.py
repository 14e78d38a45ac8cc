"""What the runtime suites share to judge an answer against the strict parse: where two texts fork, a call's
arguments as an object, one answer judged as a runtime or a peer parser read the reply, whether two answers
are the same, an answer in one line, and a text quoted safely in one markdown cell. Each suite (runtime_agreement,
runtime_conformance, parser_agreement) names its own labels; these functions name what they found."""

from __future__ import annotations

import json

from harness.families import value_notation
from harness.schema.arguments import tool_parameters, type_arguments


def label_head(label: str) -> str:
    """The label a matrix counts: `runtime-forgave:bare-json` and `stream-differs 3/22` under their first word."""
    return label.split(":", 1)[0].split(" ", 1)[0]


def fork(strict_text, runtime_text, context: int = 24, after: int = 48, sides=("strict", "runtime"),
         strip: bool = True) -> str:
    """Where two texts part: the character they fork at, the text both share just before it, and each side's
    text from there (cropping both to the same first characters would hide the difference). Texts are compared
    without their outer whitespace unless strip is False; sides name them."""
    a, b = strict_text or "", runtime_text or ""
    if strip:
        a, b = a.strip(), b.strip()
    first, second = sides
    if not a or not b:
        empty, other, text = (first, second, b) if not a else (second, first, a)
        return f"the {empty} text is empty; {other} text {_crop(text, 0, after)}"
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    shared = ("…" if at > context else "") + a[max(0, at - context):at]
    return (f"they fork at character {at} (of {len(a)} {first}, {len(b)} {second}), after "
            f"{json.dumps(shared, ensure_ascii=False)}: {first} {_crop(a, at, after)}; {second} {_crop(b, at, after)}")


def _crop(text: str, start: int, width: int) -> str:
    part = text[start:start + width]
    return json.dumps(part + ("…" if len(text) > start + width else ""), ensure_ascii=False) if part else "(ends)"


def arguments_object(text):
    """A call's arguments as a runtime returned them (a JSON string, or an object), as a dict; None when they are
    not a JSON object (or nest too deep to read)."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _typed(name, arguments, tools, notation="json") -> dict:
    for tool in tools:
        if tool.get("function", {}).get("name") == name:
            return type_arguments(arguments, tool_parameters(tool), notation).arguments
    return arguments


def _changed(name, want: dict, got: dict, tools, notation="json") -> bool:
    """Text families (XML, key/value) write every value as text: both sides are typed by the tool's schema before
    they are compared (MiniCPM 5's in the Python notation its template writes). A value the strict parse holds
    typed (3) that the runtime returns as text ("3") changed."""
    if want == got:
        return False
    if _typed(name, want, tools, notation) != _typed(name, got, tools, notation):
        return True
    return any(not isinstance(v, str) and isinstance(got.get(k), str) for k, v in want.items())


def text(value) -> str:
    return (value or "").strip()


def judge(expect: dict, answer: dict, tools: list, variant: str, marker: str | None, named: str | None = None) -> tuple:
    """(labels, details) of one answer against the strict parse: how the runtime read the reply. `named`: the
    function tool_choice named, for the named-other variant (the reply calls another one). The labels are
    runtime conformance's; parser agreement renames the two that say "runtime"."""
    strict = ([(c["name"], c["arguments"]) for c in expect["calls"]]
              if expect["calls"] and not expect["deviation"] else [])
    theirs = answer.get("tool_calls") or []
    content = text(answer.get("content"))
    if variant == "none":
        if theirs:
            return ["calls-differ"], [f"tool_choice none, yet the runtime returned {[c['name'] for c in theirs]}"]
        return [], []
    if variant == "named-other" and named and theirs:
        if any(c["name"] != named for c in theirs):
            return ["calls-differ"], [f"tool_choice named {named}, yet the runtime returned "
                                      f"{[c['name'] for c in theirs]}"]
        return [], []       # the runtime held the model to the named function (reply-rewritten says how)
    if variant == "no-parallel" and len(theirs) > 1:
        return ["parallel-ignored"], [f"parallel_tool_calls false, yet the runtime returned {len(theirs)} calls "
                                      f"{[c['name'] for c in theirs]}"]
    if variant == "no-parallel" and len(strict) > 1 and len(theirs) == 1:
        strict = strict[:1]         # held to one call, the first the reply writes (reply-rewritten says how)
    if variant == "required" and not strict:
        if theirs:
            return [], []           # held to a call where the reply has none (reply-rewritten says how)
        return ["required-ignored"], [f"tool_choice required, yet the runtime returned no call: content "
                                      f"{json.dumps(content[:60], ensure_ascii=False)}"]
    if strict and not theirs:
        names = [n for n, _ in strict]
        if any(n in content for n in names) or (marker and marker.strip() in content):
            return ["call-left-in-content"], [f"strict reads {names}; the runtime returned them as content"]
        return ["runtime-dropped-call"], [f"strict reads {names}; the runtime returned no call and "
                                          f"content {json.dumps(content[:60], ensure_ascii=False)}"]
    if not strict and theirs:
        return [f"runtime-forgave:{expect['deviation'] or 'text'}"], [
            f"strict: {expect['detail'] or 'no call'}; the runtime returned {[c['name'] for c in theirs]}"]
    if strict:
        if [n for n, _ in strict] != [c["name"] for c in theirs]:
            return ["calls-differ"], [f"strict {[n for n, _ in strict]}; runtime {[c['name'] for c in theirs]}"]
        changed = []
        for (name, want), call in zip(strict, theirs):
            got = arguments_object(call.get("arguments"))
            if got is None:
                changed.append(f"{name}: arguments {str(call.get('arguments'))[:80]!r} are not a JSON object")
            elif want and not got:
                changed.append(f"{name}: arguments emptied")
            elif _changed(name, want, got, tools, value_notation(expect.get("family"))):
                changed.append(f"{name}: {json.dumps(got, ensure_ascii=False)[:120]} where strict reads "
                               f"{json.dumps(want, ensure_ascii=False)[:120]}")
        return (["arguments-changed"], changed) if changed else ([], [])
    for field, want, got in (("content", text(expect["content"]), content),
                             ("reasoning", text(expect["reasoning"]), text(answer.get("reasoning")))):
        if want != got:
            return ["content-differs"], [f"{field}: strict {_around(want, got)}, runtime {_around(got, want)}"]
    return [], []


def _around(value: str, other: str) -> str:
    """`value` from a little before where it first differs from `other`, quoted."""
    at = next((i for i, (a, b) in enumerate(zip(value, other)) if a != b), min(len(value), len(other)))
    start = max(0, at - 20)
    piece = ("…" if start else "") + value[start:start + 60] + ("…" if len(value) > start + 60 else "")
    return json.dumps(piece, ensure_ascii=False)


def answer_summary(answer: dict, calls: str = "tool_calls") -> str:
    """An answer in one line: its content's start and its calls (under the key `calls`), at most 200 characters."""
    found = [(c.get("name"), c.get("arguments")) for c in answer.get(calls) or []]
    return json.dumps({"content": text(answer.get("content"))[:60], "calls": found}, ensure_ascii=False)[:200]


def cell(value: str, limit: int = 160) -> str:
    """A text in one markdown table cell or list line: cropped, quoted as JSON, pipes and backticks made safe."""
    value = value if len(value) <= limit else value[:limit] + "…"
    return json.dumps(value, ensure_ascii=False).replace("|", "\\|").replace("`", "'")
