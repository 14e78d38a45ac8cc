"""A family's call shape: what a call looks like, in the terms a grammar needs. Pure data: harness/grammar
turns it into GBNF. A YAML family's shape is read from its own pattern (harness.grammar.shapes.from_pattern);
a Python family declares one in its module (`FAMILY = CustomFamily(..., shape=Shape(...))`) when a pattern
plus a few switches can describe its calls, else the grammar imposes the generic JSON shape on it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from harness.formats.payloads import ObjectShape
from harness.formats.reasoning import DEFAULT_PAIRS

# Placeholders of the shape mini-patterns: as in YAML patterns, plus {ws} (any whitespace, which the custom
# parsers skip there) and {kind} (a per-value-kind attribute). Outside placeholders every character,
# whitespace included, is literal: custom parsers match their markup exactly.
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_KNOWN = {"name", "arguments", "params", "key", "value", "kind", "id", "index", "ws", "object", "array", "pycalls"}

# The named strategies harness/grammar resolves (a family never builds grammar rules itself).
ARGUMENT_SYNTAXES = ("json", "gemma")  # {arguments}: a JSON object, or Gemma 4's call language
TEXT_RULES = ("plain", "cdata", "minimax")  # a markup value's free text: up to the value's closing markup;
#   also <![CDATA[...]]> for <, & or newlines (MiniCPM 5); up to MiniMax-M3's namespace token
NESTED_RULES = ("json", "minimax", "cdata-json")  # objects/arrays in markup values


def exact(pattern: str) -> list:
    tokens, pos = [], 0
    for m in _PLACEHOLDER.finditer(pattern):
        if m.group(1) not in _KNOWN:
            raise ValueError(f"unknown placeholder {m.group()} in {pattern!r}")
        if m.start() > pos:
            tokens.append(("lit", pattern[pos : m.start()]))
        tokens.append(("ws", "") if m.group(1) == "ws" else ("ph", m.group(1)))
        pos = m.end()
    if pos < len(pattern):
        tokens.append(("lit", pattern[pos:]))
    return tokens


@dataclass(frozen=True)
class Shape:
    call: list  # tokens: ("lit", text) ("ws", _) ("nl", _) ("ph", placeholder)
    # Filled in by the registry from the declaring family (a custom module need not repeat its name).
    family: str = ""
    param: list | None = None
    section_open: list | None = None
    section_optional: bool = False
    section_close: list | None = None
    between: list = field(default_factory=lambda: [("ws", "")])  # tokens between two calls
    param_between: list = field(default_factory=lambda: [("ws", "")])  # tokens between two {params} items
    multiple: bool = True
    object: ObjectShape | None = None
    start_only: bool = False
    reasoning: tuple = DEFAULT_PAIRS
    arguments: str = "json"  # one of ARGUMENT_SYNTAXES
    text: str = "plain"  # one of TEXT_RULES
    nested: str = "json"  # one of NESTED_RULES
    kinds: dict | None = None  # {kind} literal per value kind ("*" for the rest); None: no {kind}
    key_escape: Callable[[str], str] = lambda k: k  # how the family writes a {key} (its own writer's escape)
    lead: list | None = None  # tokens written before the calls (tool_choice "required" only)
    lazy_lead: list | None = None  # tokens a lazy grammar starts with, before the calls (the trigger's start)
    # Trigger words, anywhere in the reply / only at its start; "{name}" in a word stands for each offered
    # tool's name. None: the family's markers the grammar starts with (start_only families: at the start).
    triggers: tuple | None = None
    start_triggers: tuple | None = None
    # The key of an answer object {KEY: STRING} a reply may be instead of a call (generic-json's "response").
    answer_key: str | None = None
    note: str = ""

    def __post_init__(self):
        for value, known, what in ((self.arguments, ARGUMENT_SYNTAXES, "arguments"),
                                   (self.text, TEXT_RULES, "text"), (self.nested, NESTED_RULES, "nested")):
            if value not in known:
                raise ValueError(f"shape {what}={value!r} is not one of {', '.join(known)}")
