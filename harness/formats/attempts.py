"""A call attempt recognised by its structure, not by its spelling.

A family's parser names the near misses it knows by their spelling (harness.formats.deviations): JSON with a
`"name"` key, doubled braces, a Python dict. A small model pushed off one spelling samples the next one nobody
listed: `{"name ": "math.hypot", ...}` (a blank inside the key), `{"name': ...}` (quotes mixed), a fence of two
backticks. What they share is the structure: an object (`{`) holding a key that reads as a call's name key once
its quotes (typographic ones too), blanks and case are set aside, whose value is the name of a tool the reply
was offered. A list written with keys (`[ "name": "x", ...]`, what a model writes once braces are refused) counts
as such an object. That is the
test here, and it needs the offered tools: the parser alone does not know them, the judge and the tool loop do
(an app always knows which tools it offered, so deciding from them reads no answer key).

`call_attempt(text, tools)` names the near miss (the most specific spelling first), or None. Linear in the text:
one regex pass whose every quantifier is bounded or possessive."""

from __future__ import annotations

import re

from harness.formats import deviations as dev

# Keys a call object names its function by, in any family's JSON dialect (OpenAI's nested "function", Command
# R's "tool_name", the generic "name"), and the looser ones small models write.
NAME_KEYS = ("name", "function", "tool_name", "tool", "function_name", "tool_call", "call")
# A quote of any kind, JSON-escaped or not: ASCII quotes and backticks, and the typographic quotes a model
# writes once the ASCII spellings are refused (Qwen2.5-Coder 0.5B: {"name”: “math.hypot”, ...}).
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb\u201e\uff02"
_Q = rf"""\\?[{_QUOTES}]"""
# `{`, `[` or `,` (a key's place in an object, or in a list written like one), a quoted key, a colon, a quoted
# value. The value is read up to its closing quote: a tool name holds no quote, blank-led runs are trimmed below.
_KEY_VALUE = re.compile(
    rf"""(?P<open>[{{\[,])[ \t\r\n]{{0,40}}(?P<q1>{_Q})(?P<key>[^{_QUOTES}\\\n]{{1,40}})(?P<q2>{_Q})"""
    rf"""[ \t\r\n]{{0,40}}:[ \t\r\n]{{0,40}}(?P<q3>{_Q})(?P<value>[^{_QUOTES}\\\n]{{1,200}})(?P<q4>{_Q})""")
_FENCE = re.compile(r"`{2,}")


def call_attempt(text: str, tools) -> str | None:
    """The near miss `text` is when it holds a call to one of `tools` (names) written as an object in any
    dialect, wherever in the text; None when it holds none. The name: double-braces, fenced-json (a fence of
    two or more backticks before it), python-literals (a quote other than JSON's), call-key-spelling (the key
    reads as a name key only with its blanks or case set aside), else bare-json."""
    names = {t for t in tools if isinstance(t, str) and t}
    if not names or ("{" not in text and "[" not in text):
        return None
    for m in _KEY_VALUE.finditer(text):
        key = m["key"].strip().casefold()
        if key not in NAME_KEYS or m["value"].strip() not in names:
            continue
        before = text[:m.start()]
        if m["open"] == "," and "{" not in before and "[" not in before:
            continue      # a key after a comma belongs to an object (or a list) only when one opened before it
        start = m.start() if m["open"] != "," else max(before.rfind("{"), before.rfind("["))
        return _spelling(text, start, m)
    return None


def _spelling(text: str, start: int, m) -> str:
    if text[max(0, start - 1):start + 1] == "{{" or text[start:start + 2] == "{{":
        return dev.DOUBLE_BRACES
    if len(_FENCE.findall(text, 0, start)) % 2:     # inside a fence that opened before the object
        return dev.FENCED_JSON
    quotes = {m[q].lstrip("\\") for q in ("q1", "q2", "q3", "q4")}
    if quotes != {'"'}:
        return dev.PYTHON_LITERALS     # quotes other than JSON's: Python's, mixed, backticks, typographic
    if m["key"] not in NAME_KEYS or m["value"] != m["value"].strip():
        return dev.CALL_KEY_SPELLING
    return dev.BARE_JSON
