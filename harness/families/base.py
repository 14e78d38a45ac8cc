"""What every family is and returns. A family is a name plus a strict parser (and its inverse, a
formatter, used for canonical outputs and grammars). Parsers never repair: a near miss comes back with no
calls and a named deviation."""

from dataclasses import dataclass, field
from typing import Callable, Protocol


@dataclass(frozen=True)
class ToolCall:
    name: str
    # As written by the model: JSON values for JSON families, strings for text families (XML, key/value).
    arguments: dict
    id: str | None = None

    def to_json(self) -> dict:
        out = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass
class ParseResult:
    family: str
    calls: list = field(default_factory=list)
    content: str = ""
    reasoning: str | None = None
    deviation: str | None = None
    # Human-readable explanation of the deviation (where in the text, what was expected).
    detail: str | None = None

    @property
    def accepted(self) -> bool:
        """True when the text is, in the family's exact shape, one or more tool calls."""
        return bool(self.calls) and self.deviation is None

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "calls": [c.to_json() for c in self.calls],
            "content": self.content,
            "reasoning": self.reasoning,
            "deviation": self.deviation,
            "detail": self.detail,
        }


class Parser(Protocol):
    def parse(self, text: str, prompt: str = "") -> ParseResult: ...

    def format(self, calls: list, content: str = "") -> str: ...


@dataclass(frozen=True)
class NearMiss:
    """A text that looks like a call of this family but is not; the family must reject it by this name."""

    text: str
    deviation: str
    note: str = ""


@dataclass(frozen=True)
class Family:
    name: str
    label: str
    detail: str
    # Strings whose appearance opens a call (used by parsing, stream holdback and lazy grammar triggers).
    markers: tuple
    # True when a call can only open at the start of the reply (the call is the whole reply).
    start_only: bool
    parser: Parser
    # Whether one reply may carry several calls in this family's syntax.
    multiple_calls: bool = True
    near_misses: tuple = ()
    source: str = ""

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        return self.parser.parse(text, prompt)

    def format(self, calls: list, content: str = "") -> str:
        return self.parser.format(calls, content)


@dataclass(frozen=True)
class CustomFamily:
    """What a Python family module declares as FAMILY. The registry builds the Family from it, because a
    parser needs every family's markers (to name a foreign one in a reply), known only once all are loaded."""

    name: str
    label: str
    detail: str
    parser: Callable  # foreign_markers -> Parser
    near_misses: tuple
    multiple_calls: bool = True

    def build(self, foreign_markers, source: str) -> Family:
        parser = self.parser(foreign_markers)
        return Family(name=self.name, label=self.label, detail=self.detail, markers=parser.markers,
                      start_only=False, parser=parser, multiple_calls=self.multiple_calls,
                      near_misses=self.near_misses, source=source)
