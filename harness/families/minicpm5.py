"""MiniCPM 5: `<function name="NAME"><param name="K">V</param>...</function>`, one element per call and no
wrapper. A value that contains `<`, `&` or a newline is wrapped in `<![CDATA[...]]>`, as the template writes it
and its instructions require; the wrapper is markup, so the value is returned without it. An unwrapped value with
one of those characters is a near miss (the template never trains it). Values are returned as written, as text;
the template writes a non-string value with Python's str() (`['Ana', 'Bo']`, `{'room': 12, 'online': False}`,
`None`), so typing by the tool's schema reads that notation (value_notation)."""

import json
import re

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ToolCall
from harness.formats.payloads import Mismatch
from harness.formats.scanner import NAME, Cursor, MarkupParser, unique
from harness.formats.shape import Shape, exact

OPEN, END = '<function name="', "</function>"
PARAM, END_PARAM = '<param name="', "</param>"
CDATA, END_CDATA = "<![CDATA[", "]]>"
NEEDS_CDATA = re.compile(r"[<&\n]")


class MiniCPM5Parser(MarkupParser):
    family = "minicpm5"
    markers = (OPEN,)
    # `{{- param_value }}` of a list, dict, bool or None is its Python str(); vLLM's and SGLang's minicpm5
    # parsers read it back with ast.literal_eval where the schema has no string.
    value_notation = "python"

    def read_calls(self, cursor: Cursor):
        calls = []
        while True:
            cursor.expect(OPEN)
            name = cursor.read(NAME, "a function name", dev.INVALID_NAME)
            cursor.expect('">')
            params = {}
            while cursor.at(PARAM):
                cursor.pos += len(PARAM)
                key = cursor.read(NAME, "a parameter name")
                cursor.expect('">')
                unique(params, key, self._value(cursor, key))
                cursor.expect(END_PARAM)
            cursor.expect(END)
            calls.append(ToolCall(name, params))
            after = cursor.pos
            cursor.skip_ws()
            if not cursor.at(OPEN):
                cursor.pos = after
                return calls

    def _value(self, cursor: Cursor, key):
        if cursor.at(CDATA):
            cursor.pos += len(CDATA)
            value = cursor.until(END_CDATA)
            cursor.pos += len(END_CDATA)
            return value
        value = cursor.until(END_PARAM, PARAM)
        if NEEDS_CDATA.search(value):
            raise Mismatch(dev.MALFORMED_CALL, f"parameter {key!r} has <, & or a newline outside <![CDATA[...]]>")
        return value

    def write(self, calls):
        return "\n".join(
            OPEN + c.name + '">' + "".join(f'{PARAM}{k}">{_write_value(v)}{END_PARAM}' for k, v in c.arguments.items()) + END
            for c in calls
        )


def _write_value(value):
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{CDATA}{text}{END_CDATA}" if NEEDS_CDATA.search(text) else text


NEAR_MISSES = (
    NearMiss('<function name="get_weather"><param name="location">Paris <b>centre</b></param></function>',
             dev.MALFORMED_CALL, "markup in a value without the CDATA wrapper"),
    NearMiss('<function name="get_weather">{"location": "Paris"}</function>', dev.MALFORMED_CALL,
             "JSON arguments where <param> elements are due"),
    NearMiss('<function name="get_weather"><param name="location">Paris</param><param name="location">Rome</param></function>',
             dev.DUPLICATE_ARGUMENT),
    NearMiss('<function name="get_weather"><param name="location">Paris</param>', dev.UNCLOSED_CALL),
)


FAMILY = CustomFamily(
    name="minicpm5",
    label="MiniCPM 5 XML function",
    detail='<function name="NAME"><param name="K">V</param>...</function> per call, values with <, & or a '
    "newline in <![CDATA[...]]>. Written by OpenBMB's MiniCPM 5.",
    parser=MiniCPM5Parser,
    near_misses=NEAR_MISSES,
    peers={"vllm": "minicpm5", "sglang": "minicpm5"},
    shape=Shape(
        param_between=[],
        call=exact('<function name="{name}">{params}</function>'),
        param=exact('<param name="{key}">{value}</param>'),
        between=exact("{ws}"),
        text="cdata",
        nested="cdata-json",
        note="XML function elements; text with <, & or newlines only inside CDATA",
    ),
)
