"""The call types every parser returns: a leaf, so the parsing engine's modules (payloads, shape, base) all read
them without importing one another in a circle."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolCall:
    name: str
    # As written by the model: JSON values for JSON families, strings for text families (XML, key/value).
    arguments: dict
    id: str | None = None
    # Argument paths a Python-call family read from JSON's true/false/null (LFM2): read, and named.
    json_literals: tuple = field(default=(), compare=False)

    def to_json(self) -> dict:
        out = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        if self.json_literals:
            out["json_literals"] = list(self.json_literals)
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
