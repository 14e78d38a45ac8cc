"""The pattern engine behind YAML families: a call written as a template such as
`<tool_call>\n{object}\n</tool_call>` or `[TOOL_CALLS]{name}[ARGS]{arguments}`, read strictly and written back.

Whitespace in a pattern means "optional whitespace" (models differ in newlines, never in markup); next to
{value} it means one optional newline, since a text value keeps its own spaces. Everything else must match
exactly, or the reply is rejected with a named deviation."""

import json
import re
from dataclasses import dataclass

from harness.formats import deviations as dev
from harness.formats.calls import ParseResult, ToolCall
from harness.formats.payloads import (
    Mismatch, ObjectShape, PythonCalls, check_arguments, decode_json, read_answer,
)
from harness.formats.reasoning import split_reasoning

PLACEHOLDERS = {"object", "array", "name", "arguments", "id", "index", "params", "key", "value", "pycalls"}
# Placeholders that carry every call of a reply in one match.
ALL_CALLS = {"array", "pycalls"}
_TOKEN = re.compile(r"\{(\w+)\}")
_WS = re.compile(r"\s+")
_READERS = {
    "name": re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*"),
    "key": re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*"),
    "id": re.compile(r"[A-Za-z0-9_\-]+"),
    "index": re.compile(r"\d+"),
}


def compile_pattern(source: str) -> list:
    """Split a pattern into ('lit', text), ('ws', original), ('nl', original) and ('ph', name) tokens."""
    tokens = []
    pos = 0
    for m in _TOKEN.finditer(source):
        _literal_tokens(source[pos : m.start()], tokens)
        if m.group(1) not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{m.group(1)}}} (known: {', '.join(sorted(PLACEHOLDERS))})")
        tokens.append(("ph", m.group(1)))
        pos = m.end()
    _literal_tokens(source[pos:], tokens)
    for i, tok in enumerate(tokens):
        if tok[0] == "ws" and ("ph", "value") in tokens[max(i - 1, 0) : i + 2]:
            tokens[i] = ("nl", tok[1])
    return tokens


def _literal_tokens(text, tokens):
    pos = 0
    for m in _WS.finditer(text):
        if m.start() > pos:
            tokens.append(("lit", text[pos : m.start()]))
        tokens.append(("ws", m.group()))
        pos = m.end()
    if pos < len(text):
        tokens.append(("lit", text[pos:]))


def opening_literal(tokens):
    """The literal a pattern starts with, or None if it starts with a placeholder."""
    for kind, value in tokens:
        if kind == "lit":
            return value
        if kind == "ph":
            return None
    return None


def _param_regex(tokens):
    """One regex that takes exactly the steps _match takes on a parameter pattern of one {key} and one {value}
    (literals, whitespace, optional newlines), and whether an optional newline follows the value; (None, False)
    for any other pattern. Every step is possessive, as _match never steps back: whitespace and a key are read
    whole, and the value runs to the first occurrence of the literal after it, as str.find finds it."""
    if sorted(v for k, v in tokens if k == "ph") != ["key", "value"]:
        return None, False
    parts, newline_next = [], False
    for i, (kind, value) in enumerate(tokens):
        if kind == "lit":
            parts.append(re.escape(value))
        elif kind == "ws":
            parts.append(r"\s*+")
        elif kind == "nl":
            parts.append(r"\n?+")
        elif value == "key":
            parts.append(r"(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*+)")     # _READERS["key"], possessive
        else:
            stop = opening_literal([t for t in tokens[i + 1 :] if t[0] != "nl"])
            if stop is None:
                return None, False
            parts.append(f"(?P<value>(?:(?!{re.escape(stop)}).)*+)")
            newline_next = i + 1 < len(tokens) and tokens[i + 1][0] == "nl"
    return re.compile("".join(parts), re.DOTALL), newline_next


def _earliest(body, markers):
    """The lowest offset at which one of `markers` occurs in `body`, or None."""
    start = None
    for marker in markers:
        at = body.find(marker)
        if at >= 0 and (start is None or at < start):
            start = at
    return start


# re's \s is str.isspace(), character for character; one match in C, not a loop in Python.
_WS_RUN = re.compile(r"\s*")


def _skip_ws(text, pos):
    return pos if pos >= len(text) else _WS_RUN.match(text, pos).end()


@dataclass
class CallSpec:
    call: list
    param: list | None = None
    section_open: list | None = None
    section_close: list | None = None
    section_optional: bool = False
    separator: str = ""
    object: ObjectShape | None = None
    # A reply may instead be exactly {answer_key: STRING}, an answer whose string is the content (generic-json).
    answer_key: str | None = None
    # The marker that closes the turn's last message but also separates messages inside the turn (GigaChat's
    # <|message_sep|> ends the text message before the call message, then the call message): no stop token can
    # be set on it, so it may reach the parser or not. At the end of a reply it is markup, not content, and a
    # call whose closing marker it is may end where it is due (the model's authors' vLLM, SGLang and llama.cpp
    # parsers all read a call that ends at its JSON).
    end_of_turn: str | None = None


class PatternParser:
    def __init__(self, family: str, spec: CallSpec, markers, start_only, multiple, reasoning, foreign_markers):
        self.family = family
        self.spec = spec
        self.markers = tuple(markers)
        self.start_only = start_only
        self.multiple = multiple
        self.reasoning = reasoning
        # Callable returning every registered marker; resolved lazily because the registry is built after us.
        self.foreign_markers = foreign_markers
        self.all_in_one = any(t == ("ph", p) for t in spec.call for p in ALL_CALLS)
        # Per-family constants every reply would otherwise rebuild: the multi-character markers, the literal a
        # call and a parameter open with, and the key a bare call object is named by.
        self._strong = tuple(m for m in self.markers if len(m) > 1)
        self._call_opener = opening_literal(spec.call)
        self._param_opener = opening_literal(spec.param) if spec.param else None
        shape = spec.object
        self._keys = (shape.name_key,) if shape and shape.shape == "name-and-arguments" else ()
        self._ends: dict = {}
        self._param_rx, self._param_nl = _param_regex(spec.param) if spec.param else (None, False)

    # -- reading ---------------------------------------------------------------------------------------

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        answer = read_answer(text, self.spec.answer_key) if self.spec.answer_key else None
        if answer is not None:
            return ParseResult(self.family, content=answer)
        reasoning, body, reasoning_deviation = split_reasoning(text, prompt, self.reasoning)
        eot = self.spec.end_of_turn
        if eot and body.rstrip().endswith(eot):
            body = body.rstrip()[: -len(eot)]
        result = ParseResult(self.family, content=body.strip(), reasoning=reasoning)
        start = self._find_start(body)
        if start is None:
            result.deviation = dev.classify_unmarked(body, self.markers, self.foreign_markers(), self._keys)
            if result.deviation is None and reasoning and any(m in reasoning for m in self._strong):
                result.deviation = dev.CALL_IN_REASONING
            result.deviation = result.deviation or reasoning_deviation
            return result
        foreign = dev.foreign_marker(body[:start], self.markers, self.foreign_markers())
        if foreign:
            # Another family's call in the text: accepting ours would leave it in content, unexecuted.
            result.deviation, result.detail = dev.FOREIGN_MARKERS, f"{foreign!r} in the text before the call"
            return result
        if self.start_only and body[:start].strip():
            result.deviation, result.detail = dev.TEXT_BEFORE_CALL, "the call must be the whole reply"
            return result
        try:
            calls, end = self._read_calls(body, start)
        except Mismatch as miss:
            result.deviation, result.detail = miss.deviation, miss.detail
            return result
        if body[end:].strip():
            result.deviation = dev.TRAILING_TEXT
            result.detail = f"text after the call: {body[end:].strip()[:60]!r}"
            return result
        result.calls = calls
        result.content = body[:start].strip()
        return result

    def _find_start(self, body):
        """Where the first call opens: the earliest of the markers (the strong ones past a whole-reply call's
        start), or None."""
        if self.start_only:
            first = _skip_ws(body, 0)
            if body.startswith(self.markers, first):
                return first
            return _earliest(body, self._strong)
        return _earliest(body, self.markers)

    def _read_calls(self, text, pos):
        spec = self.spec
        if spec.section_open:
            if spec.section_optional:
                try:
                    pos = self._match(spec.section_open, text, pos, {})
                except Mismatch:
                    pass
            else:
                pos = self._match(spec.section_open, text, pos, {})
        calls = []
        while True:
            found = {}
            pos = self._match(spec.call, text, pos, found)
            calls.extend(self._calls_from(found))
            if self.all_in_one or not self.multiple:
                break
            nxt = _skip_ws(text, pos)
            if spec.separator:
                if not text.startswith(spec.separator, nxt):
                    break
                nxt = _skip_ws(text, nxt + len(spec.separator))
            elif not self._opens_call(text, nxt):
                break
            pos = nxt
        if spec.section_close:
            pos = self._match(spec.section_close, text, pos, {})
        return calls, pos

    def _opens_call(self, text, pos):
        lit = self._call_opener
        if lit is not None:
            return text.startswith(lit, pos)
        return pos < len(text) and text[pos] in "{["

    def _calls_from(self, found):
        if "calls" in found:
            return found["calls"]
        if "call" in found:
            return [found["call"]]
        args = found.get("arguments", found.get("params"))
        if "name" not in found or args is None:
            raise Mismatch(dev.MALFORMED_CALL, "the pattern captured no name or arguments")
        return [ToolCall(found["name"], args, found.get("id"))]

    def _match(self, tokens, text, pos, found):
        # pos never passes the end of the text here, so the whitespace regex needs no bound check.
        for i, (kind, value) in enumerate(tokens):
            if kind == "ws":
                pos = _WS_RUN.match(text, pos).end()
            elif kind == "nl":
                if text.startswith("\n", pos):
                    pos += 1
            elif kind == "lit":
                if not text.startswith(value, pos):
                    rest = text[pos:].rstrip()
                    if not rest and value == self.spec.end_of_turn:
                        continue        # the turn ended there: the marker was the runtime's stop
                    if not rest or value.startswith(rest):
                        raise Mismatch(dev.UNCLOSED_CALL, f"the reply ended where {value!r} was due")
                    raise Mismatch(dev.MALFORMED_CALL, f"expected {value!r} at offset {pos}, found {rest[:20]!r}")
                pos += len(value)
            else:
                pos = self._placeholder(value, tokens, i + 1, text, pos, found)
        return pos

    def _placeholder(self, name, tokens, after, text, pos, found):
        """Read placeholder `name` at `pos`; tokens[after:] is the rest of the pattern (where a text ends)."""
        if name in _READERS:
            m = _READERS[name].match(text, pos)
            if not m:
                deviation = dev.INVALID_NAME if name == "name" else dev.MALFORMED_CALL
                raise Mismatch(deviation, f"expected a {name} at offset {pos}, found {text[pos:pos + 20]!r}")
            found[name] = m.group()
            return m.end()
        if name == "object":
            value, end = decode_json(text, pos)
            found["call"] = self.spec.object.read(value)
            return end
        if name == "array":
            value, end = decode_json(text, pos)
            if not isinstance(value, list):
                raise Mismatch(dev.MALFORMED_CALL, "expected a JSON array of calls")
            if not value:
                raise Mismatch(dev.EMPTY_CALL, "the array of calls is empty")
            found["calls"] = [self.spec.object.read(item) for item in value]
            return end
        if name == "arguments":
            value, end = decode_json(text, pos)
            found["arguments"] = check_arguments(value)
            return end
        if name == "params":
            return self._read_params(text, pos, found)
        # {value} and {pycalls} are text up to the next literal of the pattern.
        stop, newline_next = self._text_end(tokens, after)
        end = len(text) if stop is None else text.find(stop, pos)
        if end < 0:
            raise Mismatch(dev.UNCLOSED_CALL, f"no closing {stop!r}")
        raw = text[pos:end]
        if name == "pycalls":
            found["calls"] = PythonCalls.read(raw)
            return end
        opener = self._param_opener
        if opener and opener in raw:
            raise Mismatch(dev.MARKUP_IN_VALUE, f"the value at offset {pos} holds {opener!r}: a closing tag "
                                                f"before it is broken, and the value swallowed the next parameter")
        found["value"] = raw[:-1] if raw.endswith("\n") and newline_next else raw
        return end

    def _text_end(self, tokens, after):
        """(the literal a text placeholder ends at, whether an optional newline comes first) for the
        placeholder before tokens[after]: the same for every reply, so worked out once per place in a pattern."""
        key = (id(tokens), after)
        hit = self._ends.get(key)
        if hit is None or hit[0] is not tokens:
            following = tokens[after:]
            stop = opening_literal([t for t in following if t[0] != "nl"])
            hit = self._ends[key] = (tokens, stop, bool(following) and following[0][0] == "nl")
        return hit[1], hit[2]

    def _match_param(self, text, pos, one):
        """_match of the parameter pattern, through its one regex when that matches (a parameter read without a
        step per token), else token by token, which also names what is wrong."""
        m = self._param_rx.match(text, pos) if self._param_rx else None
        if m is not None and self._param_opener not in m["value"]:
            raw = m["value"]
            one["key"], one["value"] = m["key"], raw[:-1] if raw.endswith("\n") and self._param_nl else raw
            return m.end()
        return self._match(self.spec.param, text, pos, one)

    def _read_params(self, text, pos, found):
        params = {}
        opener = self._param_opener
        while True:
            nxt = _skip_ws(text, pos)
            if not text.startswith(opener, nxt):
                break
            one = {}
            pos = self._match_param(text, nxt, one)
            if one["key"] in params:
                raise Mismatch(dev.DUPLICATE_ARGUMENT, f"parameter {one['key']!r} written twice")
            params[one["key"]] = one["value"]
        found["params"] = params
        return pos

    # -- writing ---------------------------------------------------------------------------------------

    def format(self, calls, content: str = "") -> str:
        spec = self.spec
        if spec.answer_key and not calls:
            return json.dumps({spec.answer_key: content}, ensure_ascii=False)
        if self.all_in_one:
            body = self._write(spec.call, calls, None)
        else:
            sep = spec.separator or "\n"
            body = sep.join(self._write(spec.call, calls, call) for call in calls)
        parts = [self._write(spec.section_open, calls, None) if spec.section_open else "", body]
        if spec.section_close:
            parts.append(self._write(spec.section_close, calls, None))
        text = "".join(parts)
        return f"{content}{text}" if content else text

    def _write(self, tokens, calls, call):
        out = []
        for kind, value in tokens:
            if kind != "ph":
                out.append(value)
            elif value == "object":
                out.append(json.dumps(self.spec.object.write(call), ensure_ascii=False))
            elif value == "array":
                out.append(json.dumps([self.spec.object.write(c) for c in calls], ensure_ascii=False))
            elif value == "pycalls":
                out.append(PythonCalls.write(calls))
            elif value == "name":
                out.append(call.name)
            elif value == "arguments":
                out.append(json.dumps(call.arguments, ensure_ascii=False))
            elif value == "id":
                out.append(call.id or "call00001")
            elif value == "index":
                out.append(str(calls.index(call)))
            elif value == "params":
                out.append("\n".join(self._write_param(k, v) for k, v in call.arguments.items()))
        return "".join(out)

    def _write_param(self, key, value):
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out = []
        for kind, tok in self.spec.param:
            out.append(key if tok == "key" and kind == "ph" else text if tok == "value" and kind == "ph" else tok)
        return "".join(out)

