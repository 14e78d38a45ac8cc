"""Muse Glimmer's ATEM protocol: every assistant message has a recipient header after the generation prompt's
`<|start|>assistant`, and messages of one reply are joined by `<|eom|><|start|>assistant`:

    to=self<|message|>REASONING<|eom|><|start|>assistant to=get_weather<|message|><atem:function_calls>
    <atem:invoke name="get_weather">
    <atem:parameter name="location">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls>

A call is a message addressed to the function itself, holding exactly one invoke of that same function (the
template renders one message per call). The recipient `self` carries reasoning, `user` the answer; a reply that
ends its turn (`<|eot|>`) is cut there by detection. Values are returned as written, as text (the template
writes strings as is, true/false/null, and objects and lists as JSON)."""

import json

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ParseResult, ToolCall
from harness.formats.payloads import Mismatch
from harness.formats.scanner import NAME, Cursor, MarkupParser, no_call, unique
from harness.formats.shape import Shape, exact

HEADER, BODY = "to=", "<|message|>"
# The space is part of the header: `<|start|>assistant to=NAME`.
NEXT = "<|eom|><|start|>assistant "
BLOCK, END_BLOCK = "<atem:function_calls>", "</atem:function_calls>"
INVOKE, END_INVOKE = '<atem:invoke name="', "</atem:invoke>"
PARAM, END_PARAM = '<atem:parameter name="', "</atem:parameter>"
SELF, USER = f"{HEADER}self{BODY}", f"{HEADER}user{BODY}"


class AtemParser(MarkupParser):
    family = "atem"
    markers = (BLOCK,)
    reasoning = ()

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        cursor = Cursor(text)
        cursor.skip_ws()
        reasoning = None
        if cursor.at(SELF):
            cursor.pos += len(SELF)
            end = text.find(NEXT, cursor.pos)
            if end < 0:
                return ParseResult(self.family, reasoning=text[cursor.pos :].strip() or None,
                                   deviation=dev.UNCLOSED_REASONING)
            reasoning = text[cursor.pos : end].strip() or None
            cursor.pos = end + len(NEXT)
            cursor.skip_ws()
        body = text[cursor.pos :]
        answer = body.strip()
        answer = answer[len(USER) :].strip() if answer.startswith(USER) else answer
        result = ParseResult(self.family, content=answer, reasoning=reasoning)
        if BLOCK not in body:
            return no_call(result, body, self.markers, self.foreign_markers(), None)
        try:
            result.content, result.calls = self._messages(cursor)
        except Mismatch as miss:
            result.content, result.calls = answer, []
            result.deviation, result.detail = miss.deviation, miss.detail
            return result
        rest = text[cursor.pos :].strip()
        if rest:
            result.calls, result.content = [], answer
            result.deviation, result.detail = dev.TRAILING_TEXT, f"text after the call: {rest[:60]!r}"
        return result

    def _messages(self, cursor: Cursor):
        """An optional answer message, then one message per call, each after NEXT."""
        content = ""
        if cursor.at(USER):
            cursor.pos += len(USER)
            end = cursor.text.find(NEXT, cursor.pos)
            if end < 0 or cursor.text.find(BLOCK, cursor.pos) < end:
                raise Mismatch(dev.MALFORMED_CALL, "a call inside the message to the user; calls are messages of their own")
            content = cursor.text[cursor.pos : end]
            cursor.pos = end + len(NEXT)
            cursor.skip_ws()
        calls = self.read_calls(cursor)
        return content.strip(), calls

    def read_calls(self, cursor: Cursor):
        calls = []
        while True:
            if not cursor.at(HEADER):
                raise Mismatch(dev.MALFORMED_CALL, "a call must be its own message, headed to=FUNCTION<|message|>")
            cursor.pos += len(HEADER)
            recipient = cursor.read(NAME, "a recipient", dev.INVALID_NAME)
            cursor.expect(BODY)
            cursor.expect(BLOCK)
            cursor.skip_ws()
            cursor.expect(INVOKE)
            name = cursor.read(NAME, "a function name", dev.INVALID_NAME)
            if name != recipient:
                raise Mismatch(dev.MALFORMED_CALL, f"message to {recipient!r} invokes {name!r}")
            cursor.expect('">')
            params = {}
            cursor.skip_ws()
            while cursor.at(PARAM):
                cursor.pos += len(PARAM)
                key = cursor.read(NAME, "a parameter name")
                cursor.expect('">')
                unique(params, key, cursor.until(END_PARAM, PARAM))
                cursor.pos += len(END_PARAM)
                cursor.skip_ws()
            cursor.expect(END_INVOKE)
            cursor.skip_ws()
            cursor.expect(END_BLOCK)
            calls.append(ToolCall(name, params))
            if not cursor.at(NEXT):
                return calls
            cursor.pos += len(NEXT)
            cursor.skip_ws()

    def write(self, calls):
        return NEXT.join(_write_call(c) for c in calls)

    def format(self, calls, content: str = "") -> str:
        text = self.write(calls)
        return f" {USER}{content}{NEXT}{text}" if content else f" {text}"


def _write_call(call):
    params = "".join(f'{PARAM}{k}">{_write_value(v)}{END_PARAM}\n' for k, v in call.arguments.items())
    return f"{HEADER}{call.name}{BODY}{BLOCK}\n{INVOKE}{call.name}\">\n{params}{END_INVOKE}\n{END_BLOCK}"


def _write_value(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_PARIS = f'{INVOKE}get_weather">\n{PARAM}location">Paris{END_PARAM}\n{END_INVOKE}\n{END_BLOCK}'
NEAR_MISSES = (
    NearMiss(f"{BLOCK}\n{_PARIS}", dev.MALFORMED_CALL, "the call written without its to=FUNCTION<|message|> header"),
    NearMiss(f" to=get_time{BODY}{BLOCK}\n{_PARIS}", dev.MALFORMED_CALL,
             "a message addressed to one function invoking another"),
    NearMiss(f" {USER}{BLOCK}\n{_PARIS}", dev.MALFORMED_CALL, "the call written into the message to the user"),
    NearMiss(f' to=get_weather{BODY}{BLOCK}\n{INVOKE}get_weather">\n{PARAM}location">Paris{END_PARAM}\n',
             dev.UNCLOSED_CALL),
)


FAMILY = CustomFamily(
    name="atem",
    label="ATEM recipient messages",
    detail=f"Each call is a message to=FUNCTION{BODY}{BLOCK} holding one {INVOKE}FUNCTION\"> with "
    f"{PARAM}K\">V{END_PARAM} elements; messages are joined by {NEXT}, reasoning goes to=self. "
    "Written by Muse Glimmer.",
    parser=AtemParser,
    near_misses=NEAR_MISSES,
    peers={"sglang": "muse"},
    shape=Shape(
        param_between=[],
        call=exact('to={name}<|message|><atem:function_calls>{ws}<atem:invoke name="{name}">{ws}{params}'
                   "</atem:invoke>{ws}</atem:function_calls>"),
        param=exact('<atem:parameter name="{key}">{value}</atem:parameter>{ws}'),
        between=exact("<|eom|><|start|>assistant {ws}"),
        reasoning=(),
        lead=[("opt", exact(" "))],
        triggers=("to={name}<|message|>",),
        note="one to=FUNCTION message per call holding its invoke",
    ),
)
