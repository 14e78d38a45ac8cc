"""A call attempt recognised by its structure, not by its spelling.

A family's parser names the near misses it knows by their spelling (harness.formats.deviations): JSON with a
`"name"` key, doubled braces, a Python dict. A small model pushed off one spelling samples the next one nobody
listed: `{"name ": "math.hypot", ...}` (a blank inside the key), `{"name': ...}` (quotes mixed), a fence of two
backticks. What they share is the structure: an object (`{`) holding a key that reads as a call's name key once
its quotes (typographic ones too), blanks and case are set aside, whose value is the name of a tool the reply
was offered. A list written with keys (`[ "name": "x", ...]`, what a model writes once braces are refused) counts
as such an object. An object that also holds a `description` key is no call but the tool's definition copied back
(a model echoing the tool list it was shown: `[ "name": "search", "description": "Search the user's memory…",
"parameters": …`); a call carries its arguments, never its tool's description. That is the test here, and it
needs the offered tools: the parser alone does not know them, the judge and the tool loop do
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
# A description key: what a tool's definition holds and a call never does.
_DESCRIPTION_KEY = re.compile(rf"""[{{\[,][ \t\r\n]{{0,40}}{_Q}[ \t]{{0,4}}description[ \t]{{0,4}}{_Q}[ \t\r\n]{{0,40}}:""",
                              re.IGNORECASE)
# How far an object is followed to its end when looking for its keys: a definition's keys come within a few lines.
_OBJECT_SPAN = 4000


def call_attempt(text: str, tools) -> str | None:
    """The near miss `text` is when it holds a call to one of `tools` (names) written as an object in any
    dialect, wherever in the text; None when it holds none. The name: double-braces, fenced-json (a fence of
    two or more backticks before it), python-literals (a quote other than JSON's), call-key-spelling (the key
    reads as a name key only with its blanks or case set aside), else bare-json."""
    names = {t for t in tools if isinstance(t, str) and t}
    if not names or ("{" not in text and "[" not in text):
        return None
    opened, scanned = [], 0       # the brackets still open before `scanned`, innermost last
    for m in _KEY_VALUE.finditer(text):
        key = m["key"].strip().casefold()
        if key not in NAME_KEYS or m["value"].strip() not in names:
            continue
        if m["open"] == ",":
            # A key after a comma belongs to the object (or list) open around it, if one is: the brackets before
            # it are counted once, forward, however many keys are looked at.
            for c_at in range(scanned, m.start()):
                if text[c_at] in "{[":
                    opened.append(c_at)
                elif text[c_at] in "}]" and opened:
                    opened.pop()
            scanned = m.start()
            if not opened:
                continue
        start = m.start() if m["open"] != "," else opened[-1]
        if _DESCRIPTION_KEY.search(_object_at(text, start)):
            continue      # a tool's definition copied back, not a call
        return _spelling(text, start, m)
    return None


def _object_at(text: str, start: int) -> str:
    """The object (or keyed list) opening at `start`, its nested objects blanked out, so that only its own keys
    remain; up to its closing bracket, or _OBJECT_SPAN characters when it does not close (a reply cut short).
    Brackets inside strings are counted too: a definition's keys come before any text long enough to hold one."""
    out, depth = [], 0
    for i in range(start, min(len(text), start + _OBJECT_SPAN)):
        c = text[i]
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                break
        out.append(c if depth == 1 or c in "{[" and depth == 2 else " ")
    return "".join(out)


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
