"""The lenient reading of a named near miss: the calls a forgiving parser would take from a reply the strict
parser refused, so a report can say how much of a score is format and how much is semantics.

Never used to run, score or type a call: the strict parse is the verdict everywhere. This reading exists beside
it, for one question ("had the format been forgiven, were the calls right?"), and only for the deviations named
in READABLE, whose near miss still holds a whole call object: JSON without the family's markers, in a fence,
with doubled braces, written with Python literals, with stringified arguments, in the tool-list shape, with text
around it, or left unclosed after a complete object. Any other deviation (invalid JSON, broken markup, another
family's markers...) has no lenient reading: the reply stays without calls."""

from __future__ import annotations

import ast
import json
import re

from harness.formats import deviations as dev
from harness.formats.jsonscan import balanced_regions

READABLE = frozenset({dev.BARE_JSON, dev.FENCED_JSON, dev.DOUBLE_BRACES, dev.PYTHON_LITERALS,
                      dev.STRINGIFIED_ARGUMENTS, dev.NESTED_FUNCTION_SHAPE, dev.TRAILING_TEXT,
                      dev.TEXT_BEFORE_CALL, dev.UNCLOSED_CALL, dev.CALL_KEY_SPELLING})
_ARGUMENT_KEYS = ("arguments", "parameters")
_DOUBLED = re.compile(r"\{\{|\}\}")


def lenient_calls(deviation: str | None, text: str) -> list | None:
    """[(name, arguments)] a lenient reading takes from `text`, or None when the deviation has no lenient
    reading or the text holds no whole call object."""
    if deviation not in READABLE:
        return None
    if deviation == dev.DOUBLE_BRACES:
        text = _DOUBLED.sub(lambda m: m.group()[0], text)
    calls = []
    for region in balanced_regions(text):
        value = _value(text[region.start:region.end])
        calls += _calls(value)
    return calls or None


def _value(span: str):
    try:
        return json.loads(span)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(span)    # Python's literals: single quotes, True, None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _calls(value) -> list:
    if isinstance(value, list):
        return [call for item in value for call in _calls(item)]
    if not isinstance(value, dict):
        return []
    # A key spelled with blanks or capitals ("name ", "Arguments") is read as the key it stands for.
    value = {k.strip().casefold() if isinstance(k, str) else k: v for k, v in value.items()}
    if value.get("type") == "function" and isinstance(value.get("function"), dict):
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return []
    arguments = next((value[k] for k in _ARGUMENT_KEYS if k in value), {})
    if isinstance(arguments, str):
        arguments = _value(arguments)
    return [(name, arguments)] if isinstance(arguments, dict) else []
