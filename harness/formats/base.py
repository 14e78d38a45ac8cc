"""What every family is and returns. A family is a name plus a strict parser (and its inverse, a
formatter, used for canonical outputs and grammars). Parsers never repair: a near miss comes back with no
calls, a named deviation and the reply's text kept as content (what an unclosed reasoning block holds stays its
reasoning), never emptied; tests/families/test_near_miss_content.py holds it for every registered near miss."""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Protocol

from harness.formats.calls import ParseResult, ToolCall  # noqa: F401 -- what a Parser returns
from harness.formats.shape import Shape

# The projects whose name for a family it may declare (`peers:`): runtimes and libraries with tool-call
# parsers of their own.
PEER_KEYS = ("vllm", "sglang", "llama.cpp", "transformers")


def _names_problem(names, where: str, nullable: bool) -> str | None:
    if not isinstance(names, dict) or not names:
        return f"{where} is a mapping of {', '.join(PEER_KEYS)} to the name that project uses for the family"
    for key, name in names.items():
        if key not in PEER_KEYS:
            return f"unknown peer {key!r} in {where} (known: {', '.join(PEER_KEYS)})"
        if not (nullable and name is None) and (not isinstance(name, str) or not name.strip()):
            return f"{where}.{key} must be a non-empty string" + (" or null" if nullable else "")
    return None


def peers_problem(peers, family: bool = False) -> str | None:
    """What is wrong with a `peers` declaration, or None: a mapping of PEER_KEYS to non-empty names. A family's
    may also hold `templates` (per-template names, see Family.peer) and `tokenizer_config` (what the real model's
    tokenizer_config.json holds that a peer's parser reads)."""
    if not isinstance(peers, dict):
        return f"peers is a mapping of {', '.join(PEER_KEYS)} to the name that project uses for the family"
    plain = {k: v for k, v in peers.items() if not (family and k in ("templates", "tokenizer_config"))}
    problem = _names_problem(plain, "peers", False) if plain else None
    if problem or not family:
        return problem
    templates = peers.get("templates")
    if "templates" in peers and (not isinstance(templates, dict) or not templates):
        return "peers.templates is a mapping of template ids (or fnmatch patterns) to {PEER: NAME or null}"
    for pattern, names in (templates or {}).items():
        if not isinstance(pattern, str) or not pattern.strip():
            return f"peers.templates has a key that is not a template id: {pattern!r}"
        problem = _names_problem(names, f"peers.templates.{pattern}", True)
        if problem:
            return problem
    config = peers.get("tokenizer_config")
    if "tokenizer_config" in peers and (not isinstance(config, dict) or not config or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in config.items())):
        return "peers.tokenizer_config is a non-empty mapping of tokenizer_config.json keys to strings"
    return None


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
    # False for a family no template writes (generic-json, the grammar's fallback): detection never picks it
    # and the rejection matrix and conformance report leave it out; it parses like any other.
    detectable: bool = True
    # The names other projects give this family's parser, e.g. {"vllm": "hermes"} (PEER_KEYS).
    peers: dict = field(default_factory=dict, compare=False)
    # The call shape a Python family declares for grammars; None for YAML families (read from their
    # pattern) and for Python families without one (the generic JSON shape is imposed on them).
    shape: Shape | None = field(default=None, compare=False)
    # The family's markers that the real model's tokenizer holds as single added tokens: text -> TOKEN_KINDS key
    # (scripted models add them, so a runtime meets them as the real model's tokens), and where that comes from.
    tokens: dict = field(default_factory=dict, compare=False)
    tokens_source: str = field(default="", compare=False)

    def parse(self, text: str, prompt: str = "") -> ParseResult:
        return self.parser.parse(text, prompt)

    def peer(self, project: str, template: str | None = None) -> str | None:
        """The parser `project` reads this family with: on `template`, the first `peers.templates` entry whose id
        or pattern matches it and that names the project (null: no parser of that project reads it); else the
        family-wide name. None when unmapped."""
        if template is not None:
            for pattern, names in (self.peers.get("templates") or {}).items():
                if fnmatch.fnmatchcase(template, pattern) and project in names:
                    return names[project]
        return self.peers.get(project)

    def peer_projects(self) -> set:
        """Every project some template of the family is read by."""
        named = {k for k in self.peers if k in PEER_KEYS}
        for names in (self.peers.get("templates") or {}).values():
            named.update(k for k, v in names.items() if v is not None)
        return named

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
    shape: Shape | None = None
    detectable: bool = True
    peers: dict = field(default_factory=dict)
    tokens: dict = field(default_factory=dict)
    tokens_source: str = ""

    def build(self, foreign_markers, source: str) -> Family:
        parser = self.parser(foreign_markers)
        shape = dataclasses.replace(self.shape, family=self.name) if self.shape else None
        return Family(name=self.name, label=self.label, detail=self.detail, markers=parser.markers,
                      start_only=False, parser=parser, multiple_calls=self.multiple_calls,
                      near_misses=self.near_misses, source=source, detectable=self.detectable,
                      peers=dict(self.peers), shape=shape, tokens=dict(self.tokens),
                      tokens_source=self.tokens_source)


# How the real model's tokenizer holds a marker: an added token with "special": true (decoders skip it unless
# asked not to; llama.cpp's converter makes it a control token) or with "special": false (decoded as its text).
TOKEN_KINDS = {"special": "an added token marked special (hidden by a decoder that skips special tokens)",
               "not-special": "an added token not marked special (decoded as its text)",
               "piece": "a token of the base vocabulary, not an added one (decoded as its text; llama.cpp's "
                        "converter keeps it user-defined whatever it looks like)"}


def tokens_problem(tokens, source) -> str | None:
    """What is wrong with a family's `tokens` (and its `tokens_source`), or None."""
    if not isinstance(tokens, dict) or not all(isinstance(t, str) and t.strip() == t and t for t in tokens):
        return f"a mapping of token texts (no surrounding blanks) to {', '.join(TOKEN_KINDS)}"
    bad = [t for t, kind in tokens.items() if kind not in TOKEN_KINDS]
    if bad:
        return f"{bad[0]!r}: the kind is one of {', '.join(TOKEN_KINDS)}"
    if tokens and not (isinstance(source, str) and source.strip()):
        return "tokens_source must say where the kinds come from (the tokenizer file read, or what stands in for it)"
    return None
