"""The generic JSON call-or-answer shape, for models whose template has no tool format (SmolLM2's ChatML, Gemma).

As llama.cpp's "generic" style (PR #9639: "no lazy grammars are used, just a normal JSON schema that can contain
schema-constrained tool calls or content"), the whole reply is one JSON object from the first token on: a call
{"name": NAME, "arguments": {...}} or an answer {"response": TEXT}. A lazy grammar would be pointless here: no
marker announces a call, and these models never open a reply with the brace a start trigger waits for (measured:
0 of 55 steps), so the grammar would never take over. The model is told both forms in the tool preamble
(harness.live.modes); with tool_choice "required" only the call is allowed.

The family, generic-json, is harness/families/generic-json.yaml: its parser reads an answer object only when it
is exactly {"response": STRING} (its `answer_key`), anything else as a call or that parser's named deviation."""

from __future__ import annotations

from harness.grammar.gbnf import Expr, RuleSet
from harness.grammar.schema import Values


def answer_grammar(rules: RuleSet, key: str) -> Expr:
    """{KEY: any JSON string}, JSON whitespace allowed where JSON allows it."""
    values = Values(rules)
    body = values.member(values.key(key), values.string())
    return rules.define("answer-object", values.enclose("{", body, "}"))
