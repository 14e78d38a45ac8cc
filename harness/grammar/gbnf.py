"""A small expression language for GBNF grammars, and the two things made from it: the GBNF text llama.cpp
parses, and regular expressions for lazy-grammar triggers.

Both come from the same expressions so they cannot disagree. That matters: when a lazy grammar's trigger
fires, llama.cpp replays the text from the trigger to the end of the current token into the grammar, and if
the grammar rejects that text llama.cpp throws a C++ exception through the C API, which aborts the Python
process. A trigger regex built here matches only texts the grammar accepts as a prefix (`prefix_regex`)."""

from __future__ import annotations

import re
from dataclasses import dataclass


class Expr:
    """Base of the expression nodes."""


@dataclass(frozen=True)
class Lit(Expr):
    text: str


@dataclass(frozen=True)
class Raw(Expr):
    """A GBNF fragment (character class, bounded repetition). `regex` is its exact language as an ECMAScript
    regex, or None when a trigger may not look past it; `closed` says every prefix of a match is a match."""

    gbnf: str
    regex: str | None = None
    closed: bool = False


@dataclass(frozen=True)
class Ref(Expr):
    name: str


@dataclass(frozen=True)
class Seq(Expr):
    items: tuple


@dataclass(frozen=True)
class Alt(Expr):
    options: tuple


@dataclass(frozen=True)
class Opt(Expr):
    item: Expr


EMPTY = Seq(())


def seq(*items) -> Expr:
    flat = []
    for item in items:
        if isinstance(item, Seq):
            flat.extend(item.items)
        elif item is not None:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*options) -> Expr:
    unique = list(dict.fromkeys(o for o in options if o is not None))
    return unique[0] if len(unique) == 1 else Alt(tuple(unique))


# Whitespace kinds, each with its grammar and the same language as a regex.
# JSON: what json.dumps and Jinja's tojson write (", ", ": "), or one newline plus indentation (indent=N).
JSON_SPACE = Raw('( " " | "\\n" [ \\t]{0,20} )?', r"(?: |\n[ \t]{0,20})?", closed=True)
# Whitespace in a family's pattern: the parsers skip any; a bound keeps a sampled reply from looping on it.
PATTERN_SPACE = Raw("[ \\t\\r\\n]{0,8}", r"[ \t\r\n]{0,8}", closed=True)


def gbnf_literal(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def char_class_escape(ch: str) -> str:
    """One character inside a GBNF [...] class."""
    if ch in "\\]^-[":
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"\\x{ord(ch):02X}"
    return ch


_REGEX_SPECIAL = set("\\^$.|?*+()[]{}/")


def regex_escape(text: str) -> str:
    """ECMAScript regex for a literal text (std::regex works on UTF-8 bytes; literal bytes match as is)."""
    out = []
    for ch in text:
        if ch in _REGEX_SPECIAL:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch)
    return "".join(out)


class RuleSet:
    """Named rules, deduplicated by body, in definition order; `root` is written first."""

    def __init__(self):
        self.rules: dict[str, Expr] = {}
        self._bodies: dict[str, str] = {}
        # Rules made by a builder function, by its key (text_without's automata are recursive, so they are not
        # deduplicated by body).
        self.made: dict[tuple, Ref] = {}

    def define(self, hint: str, expr: Expr) -> Ref:
        body = self.render(expr)
        if body in self._bodies:
            return Ref(self._bodies[body])
        name = _rule_name(hint)
        base, n = name, 2
        while name in self.rules:
            name, n = f"{base}-{n}", n + 1
        self.rules[name] = expr
        self._bodies[body] = name
        return Ref(name)

    def reserve(self, hint: str) -> str:
        """A name for a rule defined later (recursive rules refer to themselves)."""
        name = _rule_name(hint)
        base, n = name, 2
        while name in self.rules:
            name, n = f"{base}-{n}", n + 1
        self.rules[name] = EMPTY
        return name

    def fill(self, name: str, expr: Expr) -> Ref:
        self.rules[name] = expr
        return Ref(name)

    def render(self, expr: Expr, inner: bool = False) -> str:
        if isinstance(expr, Lit):
            return gbnf_literal(expr.text)
        if isinstance(expr, Raw):
            return f"({expr.gbnf})" if inner and (" " in expr.gbnf.strip() or "|" in expr.gbnf) else expr.gbnf
        if isinstance(expr, Ref):
            return expr.name
        if isinstance(expr, Opt):
            return f"({self.render(expr.item)})?"
        if isinstance(expr, Seq):
            if not expr.items:
                return '""'
            text = " ".join(self.render(i, inner=True) for i in expr.items)
            return f"({text})" if inner and len(expr.items) > 1 else text
        if isinstance(expr, Alt):
            text = " | ".join(self.render(o) for o in expr.options)
            return f"({text})" if inner else text
        raise TypeError(f"not a grammar expression: {expr!r}")

    def text(self, root: Expr) -> str:
        lines = [f"root ::= {self.render(root)}"]
        lines += [f"{name} ::= {self.render(expr)}" for name, expr in self.rules.items()]
        return "\n".join(lines) + "\n"

    # -- trigger regexes --------------------------------------------------------------------------------

    def prefix_regex(self, items, budget: int = 40) -> str:
        """A regex matching only prefixes (empty included) of the sequence `items`; it looks at most `budget`
        literal characters ahead and stops at any part whose language it cannot write as a regex."""
        return self._prefix(list(items), budget, 0)

    def _prefix(self, items, budget, depth) -> str:
        if not items or budget <= 0 or depth > 12:
            return ""
        head, rest = items[0], items[1:]
        partial = self._partial(head, budget, depth)
        whole = self._whole(head, budget, depth)
        if whole is None:
            return partial
        cost = max(1, self._cost(head))
        tail = self._prefix(rest, budget - cost, depth)
        if partial == whole:  # whitespace: every prefix is whole
            return whole + _alternation(["", tail]) if tail else whole
        return _alternation([partial, whole + tail])

    def _partial(self, e, budget, depth) -> str:
        """Proper prefixes of e (the empty one included)."""
        if isinstance(e, Lit):
            text = e.text[: max(budget, 0)]
            out = ""
            for ch in reversed(text[:-1] if len(text) == len(e.text) else text):
                out = f"(?:{regex_escape(ch)}{out})?"
            return out
        if isinstance(e, Raw):
            return e.regex if e.closed and e.regex is not None else ""
        if isinstance(e, Ref):
            return self._prefix([self.rules[e.name]], budget, depth + 1)
        if isinstance(e, Seq):
            return self._prefix(list(e.items), budget, depth + 1)
        if isinstance(e, Alt):
            return _alternation([self._prefix([o], budget, depth + 1) for o in e.options])
        if isinstance(e, Opt):
            return self._prefix([e.item], budget, depth + 1)
        return ""

    def _whole(self, e, budget, depth) -> str | None:
        """All of e, or None when e is not a bounded regex within the budget."""
        if depth > 12:
            return None
        if isinstance(e, Lit):
            return regex_escape(e.text) if len(e.text) <= budget else None
        if isinstance(e, Raw):
            return e.regex
        if isinstance(e, Ref):
            return self._whole(self.rules[e.name], budget, depth + 1)
        if isinstance(e, Seq):
            parts = []
            for item in e.items:
                part = self._whole(item, budget, depth + 1)
                if part is None:
                    return None
                parts.append(part)
                budget -= self._cost(item)
            return "".join(parts)
        if isinstance(e, Alt):
            parts = [self._whole(o, budget, depth + 1) for o in e.options]
            known = [p for p in parts if p is not None]
            # Any known subset of the alternatives is still sound (the regex may match less, never more).
            return _group(known) if known else None
        if isinstance(e, Opt):
            inner = self._whole(e.item, budget, depth + 1)
            return f"(?:{inner})?" if inner is not None else ""
        return None

    def _cost(self, e, depth=0) -> int:
        """Characters e writes at least (a lower bound; recursion counts as one)."""
        if depth > 12:
            return 1
        if isinstance(e, Lit):
            return len(e.text)
        if isinstance(e, Raw):
            return 1
        if isinstance(e, Ref):
            return self._cost(self.rules[e.name], depth + 1)
        if isinstance(e, Seq):
            return sum(self._cost(i, depth + 1) for i in e.items)
        if isinstance(e, Alt):
            return min((self._cost(o, depth + 1) for o in e.options), default=0)
        return 0


def _group(parts) -> str:
    return "(?:" + "|".join(dict.fromkeys(parts)) + ")"


def _alternation(parts) -> str:
    parts = [p for p in dict.fromkeys(parts)]
    nonempty = [p for p in parts if p]
    if not nonempty:
        return ""
    if len(nonempty) == len(parts) and len(nonempty) == 1:
        return nonempty[0]
    return "(?:" + "|".join(parts) + ")"


def _rule_name(hint: str) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "-", hint).strip("-").lower() or "rule"
    return "r-" + name if name == "root" or name[0].isdigit() else name


def text_without(rules: RuleSet, stop: str, continuations, hint: str, also=()) -> Ref:
    """Any text that holds neither `stop` nor any of `also`, where the parser reads up to the first `stop` (and
    refuses a value holding one of `also`: a family's parameter opener, the sign of a broken closing tag).

    A right-linear grammar of the automaton whose state is the longest end of the text that begins one of the
    strings (Aho-Corasick; with `stop` alone, KMP). The text may end in a state only if none of the literal
    `continuations` that follow it in the grammar completes `stop` early."""
    key = ("text_without", stop, tuple(continuations), tuple(also))
    if key in rules.made:
        return rules.made[key]
    words = (stop, *also)
    # States in a fixed order: stop's proper prefixes by length, then the others' (their names are stable).
    states = list(dict.fromkeys([stop[:i] for i in range(len(stop))]
                                + [w[:i] for w in also for i in range(len(w))]))
    index = {state: i for i, state in enumerate(states)}

    def step(state, ch):
        """The next state, or None where the text would hold one of the words."""
        text = state + ch
        if any(text.endswith(w) for w in words):
            return None
        return next(index[text[i:]] for i in range(len(text) + 1) if text[i:] in index)

    def may_end(state):
        for cont in continuations:
            joined = states[state] + cont
            found = joined.find(stop)
            if 0 <= found and found + len(stop) < len(joined):
                return False
        return True

    chars = sorted(set("".join(words)))
    names = [rules.reserve(f"{hint}-{i}") for i in range(len(states))]
    for state in range(len(states)):
        # llama.cpp keeps one stack per alternative, for every candidate token: the characters that lead
        # back to the start state share one negated class, so a state has few alternatives.
        moves = {ch: step(states[state], ch) for ch in chars}
        special = sorted(ch for ch, nxt in moves.items() if nxt != 0)
        other = Raw("[^" + "".join(char_class_escape(c) for c in special) + "]")
        options = [Seq((other, Ref(names[0])))]
        for ch in special:
            if moves[ch] is not None:
                options.append(Seq((Lit(ch), Ref(names[moves[ch]]))))
        if may_end(state):
            options.append(EMPTY)
        rules.fill(names[state], Alt(tuple(options)))
    rules.made[key] = Ref(names[0])
    return rules.made[key]
