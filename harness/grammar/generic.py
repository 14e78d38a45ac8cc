"""The generic JSON call-or-answer shape, for models whose template has no tool format (SmolLM2's ChatML, Gemma).

As llama.cpp's "generic" style (PR #9639: "no lazy grammars are used, just a normal JSON schema that can contain
schema-constrained tool calls or content"), the whole reply is one JSON object from the first token on: a call
{"name": NAME, "arguments": {...}} or an answer {"response": TEXT}. A lazy grammar would be pointless here: no
marker announces a call, and these models never open a reply with the brace a start trigger waits for (measured:
0 of 55 steps), so the grammar would never take over. The model is told both forms in the tool preamble
(harness.live.modes); with tool_choice "required" only the call is allowed.

The parser reads an answer object only when it is exactly {"response": STRING} (one key, no duplicate, nothing
around it but whitespace); anything else goes to the strict call parser of generic-json.yaml and, if it is not a
call either, comes back with that parser's named deviation."""

from __future__ import annotations

import json

from harness.families.base import ParseResult
from harness.families.payloads import Mismatch, load_json
from harness.grammar.gbnf import Expr, RuleSet
from harness.grammar.schema import Values

ANSWER_KEY = "response"


def read_answer(text: str) -> str | None:
    """The answer of a reply that is exactly one {"response": STRING} object, else None."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None

    try:
        # The families' JSON reader: depth-limited, and duplicate keys or NaN are refused, not read.
        value = load_json(stripped)
    except (ValueError, Mismatch):
        return None
    if isinstance(value, dict) and list(value) == [ANSWER_KEY] and isinstance(value[ANSWER_KEY], str):
        return value[ANSWER_KEY]
    return None


class CallOrAnswer:
    """generic-json's parser: an answer object is an answer (its text is the content), anything else is read
    by the strict call parser."""

    def __init__(self, calls):
        self.calls = calls
        self.family = calls.family
        self.markers = calls.markers

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        answer = read_answer(text)
        if answer is not None:
            return ParseResult(self.family, content=answer)
        return self.calls.parse(text, prompt)

    def format(self, calls: list, content: str = "") -> str:
        if calls:
            return self.calls.format(calls, content)
        return json.dumps({ANSWER_KEY: content}, ensure_ascii=False)


def answer_grammar(rules: RuleSet) -> Expr:
    """{"response": any JSON string}, JSON whitespace allowed where JSON allows it."""
    values = Values(rules)
    body = values.member(values.key(ANSWER_KEY), values.string())
    return rules.define("answer-object", values.enclose("{", body, "}"))
