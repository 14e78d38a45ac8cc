"""Gemma 4's call language: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, one block per call.

Values are typed by the syntax itself, so this family returns them typed, as JSON families do: strings are
delimited by the `<|"|>` token, numbers, `true`/`false`, `{key:value}` objects with bare keys and `[...]` lists
are written as in Google's template (format_argument with escape_keys=False). The template writes no
whitespace inside a call, so none is read. A None argument falls through format_argument to `{{ argument }}`,
which prints Python's `None` (rendered: `call:set_nullable{value:None}`): that is null here. JSON's `null`,
which llama.cpp's and vLLM's parsers read, is a spelling the template never writes, refused as `json-null`. After
a call the model writes `<|tool_response>` and waits for the result; detection cuts the reply there."""

import json
import re

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ToolCall
from harness.formats.jsonscan import MAX_DEPTH
from harness.formats.payloads import Mismatch, load_json
from harness.formats.scanner import NAME, MarkupParser, unique
from harness.formats.shape import Shape, exact

OPEN, CLOSE, QUOTE = "<|tool_call>call:", "<tool_call|>", '<|"|>'
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


class Gemma4Parser(MarkupParser):
    family = "gemma4"
    markers = ("<|tool_call>",)
    reasoning = (("<|channel>thought", "<channel|>"),)

    def read_calls(self, cursor):
        calls = []
        while True:
            cursor.expect(OPEN)
            name = cursor.read(NAME, "a function name", dev.INVALID_NAME)
            calls.append(ToolCall(name, self._object(cursor, "the arguments", 1)))
            cursor.expect(CLOSE)
            after = cursor.pos
            cursor.skip_ws()
            if not cursor.at(self.markers[0]):
                cursor.pos = after
                return calls

    def _object(self, cursor, what, depth):
        cursor.expect("{")
        out = {}
        if cursor.at("}"):
            cursor.pos += 1
            return out
        while True:
            key = cursor.read(KEY, f"a bare key in {what}")
            cursor.expect(":")
            unique(out, key, self._value(cursor, depth + 1))
            if cursor.at(","):
                cursor.pos += 1
                continue
            cursor.expect("}")
            return out

    def _value(self, cursor, depth):
        if depth > MAX_DEPTH:
            raise Mismatch(dev.NESTING_TOO_DEEP, f"arguments nested deeper than {MAX_DEPTH} levels")
        if cursor.at(QUOTE):
            cursor.pos += len(QUOTE)
            text = cursor.until(QUOTE)
            cursor.pos += len(QUOTE)
            return text
        if cursor.at("{"):
            return self._object(cursor, "an object", depth)
        if cursor.at("["):
            cursor.pos += 1
            items = []
            while not cursor.at("]"):
                if items:
                    cursor.expect(",")
                items.append(self._value(cursor, depth + 1))
            cursor.pos += 1
            return items
        for word, value in (("true", True), ("false", False), ("None", None)):
            if cursor.at(word):
                cursor.pos += len(word)
                return value
        if cursor.at("null"):
            raise Mismatch(dev.JSON_NULL, f"null at offset {cursor.pos}: the template writes a null argument as None")
        number = cursor.read(NUMBER, 'a value (<|"|>text<|"|>, a number, true, false, None, {...} or [...])')
        return load_json(number)

    def write(self, calls):
        return "".join(f"{OPEN}{c.name}{_write_object(c.arguments)}{CLOSE}" for c in calls)


def _write_object(obj):
    return "{" + ",".join(f"{k}:{_write_value(obj[k])}" for k in sorted(obj)) + "}"


def _write_value(value):
    if isinstance(value, str):
        return f"{QUOTE}{value}{QUOTE}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "None"
    if isinstance(value, dict):
        return _write_object(value)
    if isinstance(value, list):
        return "[" + ",".join(_write_value(v) for v in value) + "]"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    raise ValueError(f"Gemma 4's call syntax cannot write {value!r}")


NEAR_MISSES = (
    NearMiss('<|tool_call>call:get_weather{"location": "Paris"}<tool_call|>', dev.MALFORMED_CALL,
             "JSON arguments where bare keys and <|\"|>-delimited strings are due"),
    NearMiss("<|tool_call>call:get_weather{location:Paris}<tool_call|>", dev.MALFORMED_CALL,
             'the <|"|> string delimiters left out (or decoded away as special tokens)'),
    NearMiss('<|tool_call>get_weather{location:<|"|>Paris<|"|>}<tool_call|>', dev.MALFORMED_CALL,
             "the call: prefix left out"),
    NearMiss('<|tool_call>call:get_weather{location:<|"|>Paris<|"|>,location:<|"|>Rome<|"|>}<tool_call|>',
             dev.DUPLICATE_ARGUMENT),
    NearMiss('<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}', dev.UNCLOSED_CALL),
    NearMiss('<|tool_call>call:get_weather{days:null,location:<|"|>Paris<|"|>}<tool_call|>', dev.JSON_NULL,
             "JSON's null where the template prints None (llama.cpp reads null)"),
)


FAMILY = CustomFamily(
    name="gemma4",
    label="Gemma 4 call syntax",
    detail='<|tool_call>call:NAME{key:value,...}<tool_call|>, strings delimited by <|"|>, then <|tool_response>. '
    "Written by Google's Gemma 4.",
    parser=Gemma4Parser,
    near_misses=NEAR_MISSES,
    peers={"vllm": "gemma4", "sglang": "gemma4", "llama.cpp": "peg-gemma4", "transformers": "gemma4"},
    shape=Shape(
        call=exact("<|tool_call>call:{name}{arguments}<tool_call|>"),
        arguments="gemma",
        reasoning=(("<|channel>thought", "<channel|>"),),
        note="Gemma 4's call language: bare sorted keys, <|\"|> strings",
    ),
    tokens={"<|tool_call>": "special", "<tool_call|>": "special", QUOTE: "piece"},
    tokens_source="<|tool_call> and <tool_call|> special, as tokenizer fixtures copy Gemma 4's and as llama.cpp's "
                  "gemma4 parser keeps them (its preserved_tokens); <|\"|> a piece of the vocabulary decoded as "
                  "text, inferred from that parser reading strings between <|\"|> without preserving it; the real "
                  "tokenizer file was not read",
)
