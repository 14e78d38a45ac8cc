"""Kimi K3's tagged message: every section is `<|open|>TAG attrs<|sep|>` … `<|close|>TAG<|sep|>`, and an assistant
reply is, in this order:

    [<|open|>think<|sep|>reasoning<|close|>think<|sep|>]
    <|open|>response<|sep|>text<|close|>response<|sep|>
    [<|open|>tools<|sep|>
       <|open|>call tool="NAME" index="1"<|sep|>
         <|open|>argument key="K" type="string|number|boolean|null|object|array"<|sep|>V<|close|>argument<|sep|>…
       <|close|>call<|sep|>…
     <|close|>tools<|sep|>]
    <|close|>message<|sep|>  (then the end-of-message token)

The generation prompt already opens the think section (or, without thinking, the response section), so parsing
takes the prompt. Each argument's `type` attribute types its value: "string" is the text as written, any other
type must be JSON of that type. A call may instead carry one `<|open|>json type="object"<|sep|>{…}` block (the
template writes that for arguments given as a JSON string). Replies without a tools section are content, read
leniently; a tools section must be exactly where and how the template writes it."""

import json
import re

from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, NearMiss
from harness.formats.calls import ParseResult, ToolCall
from harness.formats.payloads import Mismatch, check_arguments, load_json
from harness.formats.scanner import NAME, Cursor, no_call, unique
from harness.formats.shape import Shape, exact


def _open(tag, attrs=""):
    return f"<|open|>{tag}{attrs}<|sep|>"


def _close(tag):
    return f"<|close|>{tag}<|sep|>"


MESSAGE_OPEN = _open("message", ' role="assistant"')
THINK_OPEN, THINK_CLOSE = _open("think"), _close("think")
RESPONSE_OPEN, RESPONSE_CLOSE = _open("response"), _close("response")
TOOLS_OPEN, TOOLS_CLOSE = _open("tools"), _close("tools")
CALL_OPEN, CALL_CLOSE = '<|open|>call tool="', _close("call")
ARG_OPEN, ARG_CLOSE = '<|open|>argument key="', _close("argument")
JSON_OPEN, JSON_CLOSE = _open("json", ' type="object"'), _close("json")
MESSAGE_CLOSE, END_OF_MESSAGE = _close("message"), "<|end_of_msg|>"

ATTR = re.compile(r'[^"<]+')
INDEX = re.compile(r"\d+")
TYPES = {"string": str, "number": (int, float), "boolean": bool, "null": type(None), "object": dict, "array": list}
TYPE = re.compile("|".join(TYPES))


class KimiK3Parser:
    family = "kimi-k3"
    markers = (TOOLS_OPEN,)

    def __init__(self, foreign_markers):
        self.foreign_markers = foreign_markers

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        opened = next((tag for tag in (THINK_OPEN, RESPONSE_OPEN) if prompt.endswith(tag)), "")
        full = opened + (text if opened else text.lstrip())
        cursor = Cursor(full)
        if cursor.at(MESSAGE_OPEN):
            cursor.pos += len(MESSAGE_OPEN)
        result = ParseResult(self.family, content=text.strip())
        # Where the reply's own text starts (the tag the prompt opened is not the reply's), then past its closed
        # think section: a reply rejected past its response section keeps the text from there as content, so a
        # near miss is reported whole, never emptied.
        kept = len(opened)
        if cursor.at(THINK_OPEN):
            start = cursor.pos + len(THINK_OPEN)
            end = full.find(THINK_CLOSE, start)
            if end < 0:
                result.reasoning, result.content = full[start:].strip() or None, ""
                result.deviation = dev.CALL_IN_REASONING if TOOLS_OPEN in full[start:] else dev.UNCLOSED_REASONING
                return result
            result.reasoning = full[start:end].strip() or None
            cursor.pos = kept = end + len(THINK_CLOSE)
        if not cursor.at(RESPONSE_OPEN):
            body = full[cursor.pos :]
            result.content = body.strip()
            if TOOLS_OPEN in body:
                result.deviation, result.detail = dev.MALFORMED_CALL, "a tools section outside the response structure"
                return result
            return no_call(result, body, self.markers, self.foreign_markers(), None)
        cursor.pos += len(RESPONSE_OPEN)
        end = full.find(RESPONSE_CLOSE, cursor.pos)
        content = full[cursor.pos :] if end < 0 else full[cursor.pos : end]
        result.content = content.strip()
        if TOOLS_OPEN in content:
            # The response section's text, the tools section in it, is the content (as a runtime returns it).
            result.deviation, result.detail = dev.MALFORMED_CALL, "the tools section is inside the response section"
            return result
        if end < 0:
            return no_call(result, content, self.markers, self.foreign_markers(), None)
        cursor.pos = end + len(RESPONSE_CLOSE)
        rest = full[cursor.pos :]
        if TOOLS_OPEN not in rest:
            return no_call(result, content, self.markers, self.foreign_markers(), None)
        try:
            cursor.skip_ws()
            calls = self._read_tools(cursor)
        except Mismatch as miss:
            return _rejected(result, full[kept:], miss.deviation, miss.detail)
        trailing = full[cursor.pos :].strip()
        if trailing:
            return _rejected(result, full[kept:], dev.TRAILING_TEXT, f"text after the message: {trailing[:60]!r}")
        result.calls = calls
        return result

    def _read_tools(self, cursor):
        cursor.expect(TOOLS_OPEN)
        calls = []
        while not calls or cursor.at(CALL_OPEN):
            cursor.expect(CALL_OPEN)
            name = cursor.read(NAME, "a function name", dev.INVALID_NAME)
            cursor.expect('" index="')
            cursor.read(INDEX, "a call index")
            cursor.expect('"<|sep|>')
            calls.append(ToolCall(name, self._arguments(cursor)))
            cursor.expect(CALL_CLOSE)
            cursor.skip_ws()
        cursor.expect(TOOLS_CLOSE)
        cursor.skip_ws()
        cursor.expect(MESSAGE_CLOSE)
        if cursor.at(END_OF_MESSAGE):
            cursor.pos += len(END_OF_MESSAGE)
        return calls

    def _arguments(self, cursor):
        cursor.skip_ws()
        if cursor.at(JSON_OPEN):
            cursor.pos += len(JSON_OPEN)
            raw = cursor.until(JSON_CLOSE)
            cursor.expect(JSON_CLOSE)
            cursor.skip_ws()
            return check_arguments(_json(raw, "the arguments"))
        args = {}
        while cursor.at(ARG_OPEN):
            cursor.pos += len(ARG_OPEN)
            key = _unescape(cursor.read(ATTR, "an argument key"))
            cursor.expect('" type="')
            kind = cursor.read(TYPE, "an argument type")
            cursor.expect('"<|sep|>')
            raw = cursor.until(ARG_CLOSE, ARG_OPEN)
            cursor.expect(ARG_CLOSE)
            cursor.skip_ws()
            unique(args, key, _typed(key, kind, raw))
        return args

    def write(self, calls) -> str:
        parts = [TOOLS_OPEN]
        for i, call in enumerate(calls, 1):
            parts.append(f'{CALL_OPEN}{call.name}" index="{i}"<|sep|>')
            for key, value in call.arguments.items():
                kind = next(k for k, t in TYPES.items() if isinstance(value, t) and not (k == "number" and isinstance(value, bool)))
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                parts.append(f'{ARG_OPEN}{_escape(key)}" type="{kind}"<|sep|>{text}{ARG_CLOSE}')
            parts.append(CALL_CLOSE)
        parts += [TOOLS_CLOSE, MESSAGE_CLOSE]
        return "".join(parts)

    def format(self, calls, content: str = "") -> str:
        return f"{RESPONSE_OPEN}{content}{RESPONSE_CLOSE}{self.write(calls)}"


def _rejected(result: ParseResult, text: str, deviation: str, detail: str) -> ParseResult:
    """A reply the parser refuses: no calls, its text (past the reasoning) as content, the deviation named."""
    result.calls, result.content = [], text.strip()
    result.deviation, result.detail = deviation, detail
    return result


def _escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def _unescape(value: str) -> str:
    return value.replace("&quot;", '"').replace("&amp;", "&")


def _json(raw, what):
    try:
        return load_json(raw)
    except json.JSONDecodeError:
        raise Mismatch(dev.json_failure(raw), f"{what} {raw[:30]!r} are not JSON") from None


def _typed(key, kind, raw):
    if kind == "string":
        return raw
    value = _json(raw, f"argument {key!r} of type {kind}:")
    if not isinstance(value, TYPES[kind]) or (kind == "number" and isinstance(value, bool)):
        raise Mismatch(dev.UNEXPECTED_VALUE, f"argument {key!r} is declared {kind} but holds {value!r}")
    return value


_CALL = f'{CALL_OPEN}get_weather" index="1"<|sep|>'
_ARG = f'{ARG_OPEN}location" type="string"<|sep|>Paris{ARG_CLOSE}'
_HEAD = f"{RESPONSE_OPEN}{RESPONSE_CLOSE}{TOOLS_OPEN}"
_TAIL = f"{CALL_CLOSE}{TOOLS_CLOSE}{MESSAGE_CLOSE}"
NEAR_MISSES = (
    NearMiss(f'{_HEAD}{_CALL}{{"location": "Paris"}}{_TAIL}', dev.MALFORMED_CALL,
             "JSON arguments where argument sections are due"),
    NearMiss(f'{_HEAD}{_CALL}{ARG_OPEN}days" type="number"<|sep|>three{ARG_CLOSE}{_TAIL}', dev.INVALID_JSON,
             "a number argument that is not JSON"),
    NearMiss(f'{_HEAD}{_CALL}{ARG_OPEN}days" type="number"<|sep|>"3"{ARG_CLOSE}{_TAIL}', dev.UNEXPECTED_VALUE,
             "a quoted number under type=\"number\""),
    NearMiss(f"{RESPONSE_OPEN}Checking.{TOOLS_OPEN}{_CALL}{_ARG}{_TAIL}", dev.MALFORMED_CALL,
             "the tools section opened before the response section was closed"),
    NearMiss(f"{_HEAD}{_CALL}{_ARG}{CALL_CLOSE}{TOOLS_CLOSE}", dev.UNCLOSED_CALL, "the message never closed"),
    NearMiss(f"{THINK_OPEN}I need the forecast.{_HEAD}{_CALL}{_ARG}{_TAIL}", dev.CALL_IN_REASONING,
             "the call written inside the unclosed think section"),
)


FAMILY = CustomFamily(
    name="kimi-k3",
    label="Kimi K3 tagged tools section",
    detail='<|open|>tools<|sep|> after the closed response section, one <|open|>call tool="NAME" index="N"<|sep|> '
    'per call with <|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|> sections (typed by T), then '
    "<|close|>tools<|sep|><|close|>message<|sep|>; reasoning in the think section. Written by Kimi K3.",
    parser=KimiK3Parser,
    near_misses=NEAR_MISSES,
    peers={"vllm": "kimi_k3", "sglang": "kimi_k3"},
    shape=Shape(
        param_between=[],
        section_open=exact("<|open|>tools<|sep|>"),
        call=exact('<|open|>call tool="{name}" index="{index}"<|sep|>{ws}{params}<|close|>call<|sep|>'),
        param=exact('<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>{ws}'),
        section_close=exact("<|close|>tools<|sep|>{ws}<|close|>message<|sep|>"),
        kinds={"string": "string", "integer": "number", "number": "number", "boolean": "boolean",
               "null": "null", "object": "object", "array": "array"},
        key_escape=_escape,
        # The response section comes first (the prompt may have opened it); its text holds no tags. The trigger
        # is its close followed by the tools section, so a tools section opened inside it stays unconstrained.
        lead=[("opt", exact(RESPONSE_OPEN)), ("text", "<|"), ("lit", RESPONSE_CLOSE)],
        lazy_lead=exact(RESPONSE_CLOSE),
        triggers=(RESPONSE_CLOSE + TOOLS_OPEN,),
        note="tagged tools section after the response section; argument type attributes by the schema",
    ),
)
