"""DeepSeek's DSML call markup, shared by the deepseek-v3.2 and deepseek-v4 families (they differ only in the name
of the block: `function_calls` in V3.2, `tool_calls` in V4):

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="KEY" string="true">text as is</｜DSML｜parameter>
    <｜DSML｜parameter name="KEY" string="false">JSON</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

The `string` attribute types each value, so arguments come back typed: string="true" is the text exactly as
written, string="false" must be JSON. A pattern cannot express that choice, hence a module."""

import json
import re
from functools import partial

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ToolCall
from harness.formats.payloads import Mismatch, load_json
from harness.formats.scanner import NAME, MarkupParser, unique
from harness.formats.shape import Shape, exact

DSML = "｜DSML｜"
INVOKE_OPEN, INVOKE_CLOSE = f'<{DSML}invoke name="', f"</{DSML}invoke>"
PARAM_OPEN, PARAM_CLOSE = f'<{DSML}parameter name="', f"</{DSML}parameter>"
STRING_FLAG = re.compile(r"true|false")
KEY = re.compile(r"[^\"<>\s]+")


class DsmlParser(MarkupParser):
    def __init__(self, family: str, block: str, foreign_markers):
        super().__init__(foreign_markers)
        self.family = family
        self.block_open, self.block_close = f"<{DSML}{block}>", f"</{DSML}{block}>"
        # An invoke without its block is found too, so that it is named (malformed-call) rather than ignored.
        self.markers = (self.block_open, f"<{DSML}invoke")

    def read_calls(self, cursor):
        cursor.expect(self.block_open)
        calls = []
        while True:
            cursor.skip_ws()
            if calls and not cursor.at(INVOKE_OPEN):
                break
            cursor.expect(INVOKE_OPEN)
            name = cursor.read(NAME, "a function name", dev.INVALID_NAME)
            cursor.expect('">')
            calls.append(ToolCall(name, self._parameters(cursor)))
            cursor.skip_ws()
            cursor.expect(INVOKE_CLOSE)
        cursor.expect(self.block_close)
        return calls

    def _parameters(self, cursor):
        params = {}
        while True:
            cursor.skip_ws()
            if not cursor.at(PARAM_OPEN):
                return params
            cursor.expect(PARAM_OPEN)
            key = cursor.read(KEY, "a parameter name")
            cursor.expect('" string="')
            is_string = cursor.read(STRING_FLAG, 'string="true" or string="false"') == "true"
            cursor.expect('">')
            raw = cursor.until(PARAM_CLOSE, PARAM_OPEN)
            cursor.expect(PARAM_CLOSE)
            unique(params, key, raw if is_string else _json_value(key, raw))

    def write(self, calls):
        lines = [self.block_open]
        for call in calls:
            lines.append(f'{INVOKE_OPEN}{call.name}">')
            for key, value in call.arguments.items():
                if isinstance(value, str):
                    lines.append(f'{PARAM_OPEN}{key}" string="true">{value}{PARAM_CLOSE}')
                else:
                    lines.append(f'{PARAM_OPEN}{key}" string="false">{json.dumps(value, ensure_ascii=False)}{PARAM_CLOSE}')
            lines.append(INVOKE_CLOSE)
        lines.append(self.block_close)
        return "\n".join(lines)


def _json_value(key, raw):
    try:
        return load_json(raw)
    except json.JSONDecodeError:
        raise Mismatch(dev.json_failure(raw), f'parameter {key!r} is string="false" but {raw[:30]!r} is not JSON') from None


def near_misses(block: str) -> tuple:
    open_, close = f"<{DSML}{block}>", f"</{DSML}{block}>"
    invoke = f'{INVOKE_OPEN}get_weather">'
    return (
        NearMiss(f'{open_}\n{invoke}\n{{"location": "Paris"}}\n{INVOKE_CLOSE}\n{close}', dev.MALFORMED_CALL,
                 "JSON arguments where parameter elements are due"),
        NearMiss(f'{open_}\n{invoke}\n{PARAM_OPEN}location">Paris{PARAM_CLOSE}\n{INVOKE_CLOSE}\n{close}',
                 dev.MALFORMED_CALL, "the string attribute left out"),
        NearMiss(f'{open_}\n{invoke}\n{PARAM_OPEN}days" string="false">three{PARAM_CLOSE}\n{INVOKE_CLOSE}\n{close}',
                 dev.INVALID_JSON, 'string="false" on a value that is not JSON'),
        NearMiss(f'{open_}\n{invoke}\n{PARAM_OPEN}location" string="true">Paris{PARAM_CLOSE}\n'
                 f'{PARAM_OPEN}location" string="true">Rome{PARAM_CLOSE}\n{INVOKE_CLOSE}\n{close}',
                 dev.DUPLICATE_ARGUMENT),
        NearMiss(f'{open_}\n{invoke}\n{PARAM_OPEN}location" string="true">Paris{PARAM_CLOSE}\n{INVOKE_CLOSE}',
                 dev.UNCLOSED_CALL),
    )


def declare(name: str, block: str, written_by: str, peers: dict) -> CustomFamily:
    """The DSML family whose calls sit in a <｜DSML｜BLOCK> block (V3.2 and V4 differ only there)."""
    return CustomFamily(
        name=name,
        label=f"DeepSeek DSML <{block}>",
        detail=f"<｜DSML｜{block}> around one <｜DSML｜invoke name=\"NAME\"> per call, each argument a "
        '<｜DSML｜parameter name="K" string="true|false"> element (text as is, or JSON); reasoning in <think>. '
        f"Written by {written_by}.",
        parser=partial(DsmlParser, name, block),
        near_misses=near_misses(block),
        peers=peers,
        # Only ｜DSML｜ itself is a token: <｜DSML｜function_calls> is "<" + ｜DSML｜ + text.
        tokens={DSML: "not-special", "<think>": "not-special", "</think>": "not-special"},
        tokens_source="DeepSeek V3.2's tokenizer: ｜DSML｜ an added token not marked special (vLLM's deepseek_v32 "
                      "parser says so, and looks it up as one id); <think> and </think> not special; the real "
                      "tokenizer file was not read",
        shape=Shape(
            section_open=exact(f"<{DSML}{block}>{{ws}}"),
            call=exact(f'<{DSML}invoke name="{{name}}">{{ws}}{{params}}{{ws}}</{DSML}invoke>'),
            param=exact(f'<{DSML}parameter name="{{key}}" string="{{kind}}">{{value}}</{DSML}parameter>'),
            section_close=exact(f"{{ws}}</{DSML}{block}>"),
            kinds={"string": "true", "*": "false"},
            note="DSML invoke/parameter markup; string=\"true\" text or string=\"false\" JSON by the schema's type",
        ),
    )
