"""MiniMax-M3: every tag is preceded by the namespace token `]<]minimax[>[`, and an argument is an element named
after its key, `NS<location>Paris NS</location>` (written here without the space). Objects and arrays are
expanded into child elements (`NS<item>` for each array item), so a pattern cannot read them: this module does.

Leaves are returned as written (text; the template writes booleans as true/false and numbers as digits), nested
values as dicts and lists of those texts. The format has two ambiguities of its own, kept as written: children
all named `item` are read as a list (a one-key object {"item": ...} renders the same way), and an empty element
is the empty string (an empty list or object renders the same way). With thinking off the template opens the
reply with a bare `</mm:think>`, read as empty reasoning."""

import json

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ToolCall
from harness.formats.jsonscan import MAX_DEPTH
from harness.formats.payloads import Mismatch
from harness.formats.scanner import NAME, Cursor, MarkupParser, unique
from harness.formats.shape import Shape, exact

NS = "]<]minimax[>["
OPEN, CLOSE = f"{NS}<tool_call>", f"{NS}</tool_call>"
INVOKE, END_INVOKE = f'{NS}<invoke name="', f"{NS}</invoke>"
ITEM = "item"


class MiniMaxM3Parser(MarkupParser):
    family = "minimax-m3"
    markers = (OPEN,)
    reasoning = (("<mm:think>", "</mm:think>"),)

    def read_calls(self, cursor: Cursor):
        cursor.expect(OPEN)
        cursor.skip_ws()
        calls = []
        while True:
            cursor.expect(INVOKE)
            name = cursor.read(NAME, "a function name", dev.INVALID_NAME)
            cursor.expect('">')
            params = {}
            cursor.skip_ws()
            while cursor.at(NS + "<") and not cursor.at(END_INVOKE):
                key, value = self._element(cursor, 1)
                unique(params, key, value)
                cursor.skip_ws()
            cursor.expect(END_INVOKE)
            calls.append(ToolCall(name, params))
            cursor.skip_ws()
            if not cursor.at(INVOKE):
                break
        cursor.expect(CLOSE)
        return calls

    def _element(self, cursor: Cursor, depth):
        if depth > MAX_DEPTH:
            raise Mismatch(dev.NESTING_TOO_DEEP, f"elements nested deeper than {MAX_DEPTH} levels")
        cursor.expect(NS + "<")
        key = cursor.read(NAME, "an element name")
        cursor.expect(">")
        if cursor.at(NS + "<") and not cursor.at(NS + "</"):
            children = []
            while cursor.at(NS + "<") and not cursor.at(NS + "</"):
                children.append(self._element(cursor, depth + 1))
            value = _collect(children)
        else:
            value = cursor.until(NS)
        closing = f"{NS}</{key}>"
        if not cursor.at(closing) and cursor.at(NS + "</"):
            raise Mismatch(dev.MALFORMED_CALL, f"element <{key}> closed by {cursor.text[cursor.pos:cursor.pos + 40]!r}")
        cursor.expect(closing)
        return key, value

    def write(self, calls):
        parts = [OPEN, "\n"]
        for call in calls:
            parts.append(f'{INVOKE}{call.name}">')
            parts.extend(_write_element(k, v) for k, v in call.arguments.items() if v is not None)
            parts.append(f"{END_INVOKE}\n")
        parts.append(CLOSE)
        return "".join(parts)


def _collect(children):
    if all(key == ITEM for key, _ in children):
        return [value for _, value in children]
    out = {}
    for key, value in children:
        unique(out, key, value)
    return out


def _write_element(key, value):
    return f"{NS}<{key}>{_write_value(value)}{NS}</{key}>"


def _write_value(value):
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "".join(_write_element(k, v) for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "".join(_write_element(ITEM, v) for v in value)
    return json.dumps(value)


NEAR_MISSES = (
    NearMiss('<tool_call>\n<invoke name="get_weather"><location>Paris</location></invoke>\n</tool_call>',
             dev.FOREIGN_MARKERS, "the namespace tokens decoded away (special tokens invisible)"),
    NearMiss(f'{OPEN}\n{INVOKE}get_weather">{NS}<parameter name="location">Paris{NS}</parameter>{END_INVOKE}\n{CLOSE}',
             dev.MALFORMED_CALL, "MiniMax-M2's <parameter name=...> elements"),
    NearMiss(f'{OPEN}\n{INVOKE}get_weather">{NS}<location>Paris{NS}</days>{END_INVOKE}\n{CLOSE}',
             dev.MALFORMED_CALL, "an element closed under another name"),
    NearMiss(f'{OPEN}\n{INVOKE}get_weather">{NS}<location>Paris{NS}</location>{END_INVOKE}\n',
             dev.UNCLOSED_CALL),
)


FAMILY = CustomFamily(
    name="minimax-m3",
    label="MiniMax-M3 namespaced XML",
    detail=f'{OPEN} then per call {INVOKE}NAME"> with one {NS}<KEY>value{NS}</KEY> element per argument '
    "(objects and arrays expanded into child elements), then " + CLOSE + ". Written by MiniMax-M3.",
    parser=MiniMaxM3Parser,
    near_misses=NEAR_MISSES,
    peers={"vllm": "minimax_m3", "sglang": "minimax-m3", "llama.cpp": "peg-minimax-m3"},
    shape=Shape(
        param_between=[],
        section_open=exact("]<]minimax[>[<tool_call>{ws}"),
        call=exact(']<]minimax[>[<invoke name="{name}">{ws}{params}]<]minimax[>[</invoke>'),
        param=exact("]<]minimax[>[<{key}>{value}]<]minimax[>[</{key}>{ws}"),
        section_close=exact("{ws}]<]minimax[>[</tool_call>"),
        nested="minimax",
        # The parser reads a leaf up to the namespace token itself, not up to the closing element.
        text="minimax",
        reasoning=(("<mm:think>", "</mm:think>"),),
        note="namespaced elements, objects and arrays as child elements",
    ),
    tokens={"<mm:think>": "not-special", "</mm:think>": "not-special"},
    tokens_source="single tokens of MiniMax-M3's tokenizer, as vLLM's minimax_m3 reasoning parser looks them up (it "
                  "refuses to start without them); not special assumed, the real tokenizer file was not read",
)
