"""A strict left-to-right reader for the custom families (formats a pattern cannot express: nested markup,
a call language of its own, channel headers). It raises the pattern engine's Mismatch with the same deviation
names, and MarkupParser gives custom families the pattern engine's handling of reasoning, replies without a
call and text after the calls, so YAML and Python families report alike."""

import re
from abc import ABC, abstractmethod

from harness.formats import deviations as dev
from harness.formats.calls import ParseResult
from harness.formats.payloads import Mismatch
from harness.formats.reasoning import DEFAULT_PAIRS, split_reasoning

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


class Cursor:
    def __init__(self, text: str, pos: int = 0):
        self.text = text
        self.pos = pos

    def skip_ws(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at(self, literal: str) -> bool:
        return self.text.startswith(literal, self.pos)

    def expect(self, literal: str):
        if not self.at(literal):
            rest = self.text[self.pos :].rstrip()
            # A reply cut off by max_tokens is an unclosed call, not a syntax error.
            if not rest or literal.startswith(rest):
                raise Mismatch(dev.UNCLOSED_CALL, f"the reply ended where {literal!r} was due")
            raise Mismatch(dev.MALFORMED_CALL, f"expected {literal!r} at offset {self.pos}, found {rest[:20]!r}")
        self.pos += len(literal)

    def read(self, pattern: re.Pattern, what: str, deviation: str = dev.MALFORMED_CALL) -> str:
        m = pattern.match(self.text, self.pos)
        if not m:
            if self.pos >= len(self.text.rstrip()):
                raise Mismatch(dev.UNCLOSED_CALL, f"the reply ended where {what} was due")
            raise Mismatch(deviation, f"expected {what} at offset {self.pos}, found {self.text[self.pos:self.pos + 20]!r}")
        self.pos = m.end()
        return m.group()

    def until(self, literal: str, opener: str | None = None) -> str:
        """The text up to (not including) the next `literal`; the cursor stops in front of it. A value holding
        `opener` (the markup that opens a parameter) swallowed the next one past a broken closing tag."""
        end = self.text.find(literal, self.pos)
        if end < 0:
            raise Mismatch(dev.UNCLOSED_CALL, f"no closing {literal!r}")
        value = self.text[self.pos : end]
        if opener and opener in value:
            raise Mismatch(dev.MARKUP_IN_VALUE, f"the value at offset {self.pos} holds {opener!r}: a closing tag "
                                                "before it is broken, and the value swallowed the next parameter")
        self.pos = end
        return value


def no_call(result: ParseResult, body: str, markers, foreign_markers, reasoning_deviation) -> ParseResult:
    """A reply with none of the family's markers: plain text, or a near miss named as the pattern engine names it."""
    result.deviation = dev.classify_unmarked(body, markers, foreign_markers)
    if result.deviation is None and result.reasoning and any(m in result.reasoning for m in markers if len(m) > 1):
        result.deviation = dev.CALL_IN_REASONING
    result.deviation = result.deviation or reasoning_deviation
    return result


class MarkupParser(ABC):
    """Reasoning apart, then text, then the calls from the first marker on, then nothing but whitespace.
    Subclasses set family/markers/reasoning and implement read_calls(cursor) and write(calls)."""

    family = ""
    markers: tuple = ()
    reasoning = DEFAULT_PAIRS

    def __init__(self, foreign_markers):
        # Callable returning every registered marker; resolved lazily because the registry is built after us.
        self.foreign_markers = foreign_markers

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        reasoning, body, reasoning_deviation = split_reasoning(text, prompt, self.reasoning)
        result = ParseResult(self.family, content=body.strip(), reasoning=reasoning)
        hits = [body.find(m) for m in self.markers if m in body]
        if not hits:
            return no_call(result, body, self.markers, self.foreign_markers(), reasoning_deviation)
        start = min(hits)
        cursor = Cursor(body, start)
        try:
            calls = self.read_calls(cursor)
        except Mismatch as miss:
            result.deviation, result.detail = miss.deviation, miss.detail
            return result
        rest = body[cursor.pos :].strip()
        if rest:
            result.deviation, result.detail = dev.TRAILING_TEXT, f"text after the call: {rest[:60]!r}"
            return result
        foreign = dev.foreign_marker(body[:start], self.markers, self.foreign_markers())
        if foreign:
            # Another family's call in the text: accepting ours would leave it in content, unexecuted.
            result.deviation, result.detail = dev.FOREIGN_MARKERS, f"{foreign!r} in the text before the call"
            return result
        result.calls, result.content = calls, body[:start].strip()
        return result

    @abstractmethod
    def read_calls(self, cursor: Cursor) -> list:
        """Read every call from the first marker on, leaving the cursor after the last one."""

    @abstractmethod
    def write(self, calls) -> str:
        """The calls as the family's model writes them."""

    def format(self, calls, content: str = "") -> str:
        text = self.write(calls)
        return f"{content}{text}" if content else text


def unique(params: dict, key: str, value):
    if key in params:
        raise Mismatch(dev.DUPLICATE_ARGUMENT, f"parameter {key!r} written twice")
    params[key] = value
