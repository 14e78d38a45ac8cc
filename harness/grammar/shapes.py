"""Call shapes: what a family's call looks like, in the terms a grammar needs.

A YAML (pattern) family's shape is read from its own CallSpec, so a new YAML family gets a grammar without
code. Custom Python families that a pattern plus a few switches can describe have a shape here (CUSTOM);
the rest fall back to the generic JSON shape (see harness.grammar)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from harness.families import Family
from harness.families.pattern import PatternParser
from harness.families.payloads import ObjectShape
from harness.families.reasoning import DEFAULT_PAIRS

# Placeholders of the custom-shape mini-patterns below: as in YAML patterns, plus {ws} (any whitespace, which
# the custom parsers skip there) and {kind} (a per-value-kind attribute). Outside placeholders every
# character, whitespace included, is literal: custom parsers match their markup exactly.
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_KNOWN = {"name", "arguments", "params", "key", "value", "kind", "id", "index", "ws", "object", "array", "pycalls"}


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


@dataclass
class Shape:
    family: str
    call: list  # tokens: ("lit", text) ("ws", _) ("nl", _) ("ph", placeholder)
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
    arguments: str = "json"  # syntax of {arguments}: json | gemma
    text: Callable | None = None  # (rules, stop, continuations, hint) -> free text of a markup value
    nested: str = "json"  # objects/arrays in markup values: json | minimax | cdata-json
    kinds: dict | None = None  # {kind} literal per value kind ("*" for the rest); None: no {kind}
    key_escape: Callable[[str], str] = lambda k: k
    lead: list | None = None  # tokens written before the calls (tool_choice "required" only)
    lazy_lead: list | None = None  # tokens a lazy grammar starts with, before the calls (the trigger's start)
    # Trigger words: anywhere in the reply / only at its start. Default: the family's markers the grammar
    # starts with (start_only families: at the start, after reasoning).
    triggers: Callable | None = None  # (tool names) -> words
    start_triggers: Callable | None = None
    note: str = ""


def pin_marker(tokens: list, markers) -> list:
    """The pattern's opening with its whitespace written as in the family's marker.

    The parser finds a reply's first call by its marker, an exact string, and only then reads the pattern
    (where whitespace is free): Gigachat's `<|message_sep|>\n\nfunction call` must be written just so."""
    for marker in markers:
        out, pos = [], 0
        for i, (kind, value) in enumerate(tokens):
            if pos >= len(marker):
                return out + tokens[i:]
            if kind == "lit":
                n = min(len(value), len(marker) - pos)
                if marker[pos : pos + n] != value[:n]:
                    break
                out.append((kind, value))
                pos += n
            elif kind in ("ws", "nl"):
                run = re.match(r"\s*", marker[pos:]).group()
                if run:
                    out.append(("lit", run))
                pos += len(run)
            else:
                break
        else:
            if pos >= len(marker):
                return out
    return tokens


def from_pattern(family: Family) -> Shape:
    """The shape of a YAML family, from its own pattern spec."""
    parser = family.parser
    spec = parser.spec
    between = [("ws", "")]
    if spec.separator:
        between = [("ws", ""), ("lit", spec.separator), ("ws", "")]
    section_open = list(spec.section_open) if spec.section_open else None
    call = list(spec.call)
    if section_open and not spec.section_optional:
        section_open = pin_marker(section_open, family.markers)
    else:
        call = pin_marker(call, family.markers)
    return Shape(
        family=family.name,
        call=call,
        param=list(spec.param) if spec.param else None,
        section_open=section_open,
        section_optional=spec.section_optional,
        section_close=list(spec.section_close) if spec.section_close else None,
        between=between,
        multiple=parser.multiple,
        object=spec.object,
        start_only=parser.start_only,
        reasoning=tuple(parser.reasoning),
        note="from the family's YAML pattern",
    )


def is_pattern_family(family: Family) -> bool:
    return isinstance(family.parser, PatternParser)


# -- custom families ------------------------------------------------------------------------------------

def _minicpm5_text(rules, stop, continuations, hint):
    from harness.grammar.gbnf import Alt, Lit, Raw, seq, text_without

    # Unwrapped text may not hold <, & or a newline; anything else goes in <![CDATA[...]]> (the template's rule).
    plain = Raw("[^<&\\n]*")
    cdata = seq(Lit("<![CDATA["), text_without(rules, "]]>", ["]]>"], "cdata-text"), Lit("]]>"))
    return rules.define("minicpm5-text", Alt((plain, cdata)))


def _minimax_text(rules, stop, continuations, hint):
    from harness.grammar.schema import MinimaxValues

    # The parser reads a leaf up to the namespace token itself, not up to the closing element.
    return MinimaxValues(rules).string()


def _kimi_escape(key: str) -> str:
    return key.replace("&", "&amp;").replace('"', "&quot;")


def _dsml(name: str, block: str) -> Shape:
    d = "｜DSML｜"
    return Shape(
        family=name,
        section_open=exact(f"<{d}{block}>{{ws}}"),
        call=exact(f'<{d}invoke name="{{name}}">{{ws}}{{params}}{{ws}}</{d}invoke>'),
        param=exact(f'<{d}parameter name="{{key}}" string="{{kind}}">{{value}}</{d}parameter>'),
        section_close=exact(f"{{ws}}</{d}{block}>"),
        kinds={"string": "true", "*": "false"},
        note="DSML invoke/parameter markup; string=\"true\" text or string=\"false\" JSON by the schema's type",
    )


_KIMI_OPEN_RESPONSE, _KIMI_CLOSE_RESPONSE = "<|open|>response<|sep|>", "<|close|>response<|sep|>"

CUSTOM: dict[str, Callable[[], Shape]] = {
    "functionary-v3.2": lambda: Shape(
        family="functionary-v3.2",
        # The generation prompt ends with `>>>`, so the first recipient's `>>>` is optional.
        section_open=exact(">>>"),
        section_optional=True,
        call=exact("{name}\n{arguments}"),
        between=exact("{ws}>>>"),
        reasoning=(),
        # `>>>` alone also opens the text channel (`>>>all`), so a trigger names the function.
        triggers=lambda names: [f">>>{n}\n" for n in names],
        start_triggers=lambda names: [f"{n}\n" for n in names],
        note=">>>NAME\\n{json} recipients; triggers name the function, since >>>all is text",
    ),
    "harmony": lambda: Shape(
        family="harmony",
        call=exact("<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}"),
        multiple=False,
        reasoning=(),
        # <|channel|> alone also opens analysis and final messages.
        triggers=lambda names: ["<|channel|>commentary to=functions."],
        note="a commentary message to functions.NAME (the channel form of the recipient)",
    ),
    "deepseek-v3.2": lambda: _dsml("deepseek-v3.2", "function_calls"),
    "deepseek-v4": lambda: _dsml("deepseek-v4", "tool_calls"),
    "minicpm5": lambda: Shape(
        family="minicpm5",
        param_between=[],
        call=exact('<function name="{name}">{params}</function>'),
        param=exact('<param name="{key}">{value}</param>'),
        between=exact("{ws}"),
        text=_minicpm5_text,
        nested="cdata-json",
        note="XML function elements; text with <, & or newlines only inside CDATA",
    ),
    "gemma4": lambda: Shape(
        family="gemma4",
        call=exact("<|tool_call>call:{name}{arguments}<tool_call|>"),
        arguments="gemma",
        reasoning=(("<|channel>thought", "<channel|>"),),
        note="Gemma 4's call language: bare sorted keys, <|\"|> strings",
    ),
    "kimi-k3": lambda: Shape(
        family="kimi-k3",
        param_between=[],
        section_open=exact("<|open|>tools<|sep|>"),
        call=exact('<|open|>call tool="{name}" index="{index}"<|sep|>{ws}{params}<|close|>call<|sep|>'),
        param=exact('<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>{ws}'),
        section_close=exact("<|close|>tools<|sep|>{ws}<|close|>message<|sep|>"),
        kinds={"string": "string", "integer": "number", "number": "number", "boolean": "boolean",
               "null": "null", "object": "object", "array": "array"},
        key_escape=_kimi_escape,
        # The response section comes first (the prompt may have opened it); its text holds no tags. The trigger
        # is its close followed by the tools section, so a tools section opened inside it stays unconstrained.
        lead=[("opt", exact(_KIMI_OPEN_RESPONSE)), ("text", "<|"), ("lit", _KIMI_CLOSE_RESPONSE)],
        lazy_lead=exact(_KIMI_CLOSE_RESPONSE),
        triggers=lambda names: [_KIMI_CLOSE_RESPONSE + "<|open|>tools<|sep|>"],
        note="tagged tools section after the response section; argument type attributes by the schema",
    ),
    "atem": lambda: Shape(
        family="atem",
        param_between=[],
        call=exact('to={name}<|message|><atem:function_calls>{ws}<atem:invoke name="{name}">{ws}{params}'
                   "</atem:invoke>{ws}</atem:function_calls>"),
        param=exact('<atem:parameter name="{key}">{value}</atem:parameter>{ws}'),
        between=exact("<|eom|><|start|>assistant {ws}"),
        reasoning=(),
        lead=[("opt", exact(" "))],
        triggers=lambda names: [f"to={n}<|message|>" for n in names],
        note="one to=FUNCTION message per call holding its invoke",
    ),
    "minimax-m3": lambda: Shape(
        family="minimax-m3",
        param_between=[],
        section_open=exact("]<]minimax[>[<tool_call>{ws}"),
        call=exact(']<]minimax[>[<invoke name="{name}">{ws}{params}]<]minimax[>[</invoke>'),
        param=exact("]<]minimax[>[<{key}>{value}]<]minimax[>[</{key}>{ws}"),
        section_close=exact("{ws}]<]minimax[>[</tool_call>"),
        nested="minimax",
        text=_minimax_text,
        reasoning=(("<mm:think>", "</mm:think>"),),
        note="namespaced elements, objects and arrays as child elements",
    ),
}


def shape_for(family: Family) -> Shape | None:
    """The family's shape, or None when only the generic JSON shape can be imposed on it."""
    if family.name in CUSTOM:
        return CUSTOM[family.name]()
    if is_pattern_family(family):
        return from_pattern(family)
    return None
