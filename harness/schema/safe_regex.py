"""JSON Schema `pattern`s matched without backtracking, so a tool's schema cannot hang a parse.

Python's `re` backtracks: `^(a+)+$` against 28 a's and "!" takes seconds, and every added "a" doubles it. Here a
pattern is parsed by Python's own regex parser and run as a Thompson NFA: all threads advance together, one
character at a time, so the work is at most (text length + 1) x (NFA states), and both are bounded. What an NFA
cannot run (backreferences, lookarounds, atomic groups, possessive repeats, inline flags) is refused by name
when the tool file is read, not guessed at."""

from __future__ import annotations

import re
import re._constants as C  # the parser's opcodes; the same module re.compile reads
import re._parser as sre_parse
from functools import lru_cache

MAX_PATTERN_CHARS = 1_000
MAX_STATES = 10_000  # counted repeats are unrolled: a{1000}{1000} would be a million states
MAX_TEXT_CHARS = 100_000

# ECMA-262's classes, which JSON Schema names: ASCII digits and word characters.
_CATEGORIES = {
    C.CATEGORY_DIGIT: lambda c: "0" <= c <= "9",
    C.CATEGORY_SPACE: str.isspace,
    C.CATEGORY_WORD: lambda c: c.isascii() and (c.isalnum() or c == "_"),
}
_NEGATED = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE,
            C.CATEGORY_NOT_WORD: C.CATEGORY_WORD}


class UnsafePattern(ValueError):
    """A pattern this matcher will not run, with the reason."""


def _category(code):
    if code in _NEGATED:
        test = _CATEGORIES[_NEGATED[code]]
        return lambda c: not test(c)
    if code in _CATEGORIES:
        return _CATEGORIES[code]
    raise UnsafePattern(f"character category {code} is not supported")


def _char_test(op, av):
    if op is C.LITERAL:
        return lambda c: c == chr(av)
    if op is C.NOT_LITERAL:
        return lambda c: c != chr(av)
    if op is C.ANY:
        return lambda c: c not in "\n\r\u2028\u2029"  # ECMA-262's `.`: any but a line terminator
    if op is C.IN:
        negate = bool(av) and av[0][0] is C.NEGATE
        tests = []
        for item_op, item_av in av[1:] if negate else av:
            if item_op is C.LITERAL:
                tests.append(lambda c, ch=chr(item_av): c == ch)
            elif item_op is C.RANGE:
                tests.append(lambda c, lo=chr(item_av[0]), hi=chr(item_av[1]): lo <= c <= hi)
            elif item_op is C.CATEGORY:
                tests.append(_category(item_av))
            else:
                raise UnsafePattern(f"{item_op} inside a character class is not supported")
        return lambda c: any(t(c) for t in tests) != negate
    return None


def _word_at(text, i):
    return 0 <= i < len(text) and _CATEGORIES[C.CATEGORY_WORD](text[i])


_ASSERTS = {
    C.AT_BEGINNING: lambda text, i: i == 0,
    C.AT_BEGINNING_STRING: lambda text, i: i == 0,
    C.AT_END: lambda text, i: i == len(text),  # ECMA-262's `$` without the m flag: the end only
    C.AT_END_STRING: lambda text, i: i == len(text),
    C.AT_BOUNDARY: lambda text, i: _word_at(text, i - 1) != _word_at(text, i),
    C.AT_NON_BOUNDARY: lambda text, i: _word_at(text, i - 1) == _word_at(text, i),
}


class _Builder:
    """Thompson construction. A state is [kind, data, next, alt]: kind "char" (data tests one character),
    "assert" (data tests a position), "split" (two epsilon edges) or "match"."""

    def __init__(self):
        self.states = []

    def new(self, kind, data=None):
        if len(self.states) >= MAX_STATES:
            raise UnsafePattern(f"the pattern unrolls to more than {MAX_STATES} states")
        self.states.append([kind, data, None, None])
        return len(self.states) - 1

    def sequence(self, items):
        """(start, ends) of a fragment; `ends` are states whose `next` is still open."""
        start, ends = None, None
        for op, av in items:
            frag = self.item(op, av)
            if start is None:
                start, ends = frag
            else:
                self.patch(ends, frag[0])
                ends = frag[1]
        if start is None:
            state = self.new("split")
            return state, [state]
        return start, ends

    def patch(self, ends, target):
        for state in ends:
            self.states[state][2] = target

    def item(self, op, av):
        test = _char_test(op, av)
        if test is not None:
            state = self.new("char", test)
            return state, [state]
        if op is C.AT:
            if av not in _ASSERTS:
                raise UnsafePattern(f"the anchor {av} is not supported")
            state = self.new("assert", _ASSERTS[av])
            return state, [state]
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise UnsafePattern("inline flags such as (?i:...) are not supported")
            return self.sequence(sub)
        if op is C.BRANCH:
            split_starts, ends = [], []
            for option in av[1]:
                start, option_ends = self.sequence(option)
                split_starts.append(start)
                ends += option_ends
            head = split_starts[-1]
            for start in reversed(split_starts[:-1]):
                split = self.new("split")
                self.states[split][2], self.states[split][3] = start, head
                head = split
            return head, ends
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):  # lazy or greedy: the same strings match
            return self.repeat(*av)
        raise UnsafePattern(f"{str(op).lower()} needs backtracking (backreferences, lookarounds, atomic or "
                            "possessive groups are not supported)")

    def repeat(self, low, high, sub):
        ends, start = [], None
        for _ in range(low):
            frag = self.sequence(sub)
            if start is None:
                start = frag[0]
            else:
                self.patch(ends, frag[0])
            ends = frag[1]
        if high == C.MAXREPEAT:
            split = self.new("split")
            body_start, body_ends = self.sequence(sub)
            self.states[split][3] = body_start
            self.patch(body_ends, split)
            if start is None:
                return split, [split]
            self.patch(ends, split)
            return start, [split]
        for _ in range(high - low):
            split = self.new("split")
            body_start, body_ends = self.sequence(sub)
            self.states[split][3] = body_start
            if start is None:
                start = split
            else:
                self.patch(ends, split)
            ends = [split] + body_ends
        if start is None:
            state = self.new("split")
            return state, [state]
        return start, ends


def compile_pattern(pattern: str) -> tuple:
    """The NFA of `pattern` (states, start) or UnsafePattern naming why it will not be run."""
    if not isinstance(pattern, str):
        raise UnsafePattern(f"a pattern is a string, not {type(pattern).__name__}")
    return _compile(pattern)


@lru_cache(maxsize=256)
def _compile(pattern: str) -> tuple:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafePattern(f"a pattern of {len(pattern)} characters (at most {MAX_PATTERN_CHARS})")
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UnsafePattern(f"not a regular expression: {exc}") from None
    if parsed.state.flags & ~C.SRE_FLAG_UNICODE:
        raise UnsafePattern("inline flags such as (?i) are not supported")
    builder = _Builder()
    try:
        start, ends = builder.sequence(list(parsed))
    except RecursionError:
        raise UnsafePattern("the pattern nests too deeply") from None
    builder.patch(ends, builder.new("match"))
    return tuple(tuple(s) for s in builder.states), start


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text` (JSON Schema's unanchored `pattern`), in linear time."""
    states, start = compile_pattern(pattern)
    if len(text) > MAX_TEXT_CHARS:
        raise UnsafePattern(f"a string of {len(text)} characters is longer than a pattern is checked on "
                            f"({MAX_TEXT_CHARS})")
    current: set = set()
    for i in range(len(text) + 1):
        _close(states, start, text, i, current)  # a match may start at any position
        if any(states[s][0] == "match" for s in current):
            return True
        if i == len(text):
            return False
        nxt: set = set()
        for s in current:
            kind, test, follow, _ = states[s]
            if kind == "char" and test(text[i]):
                _close(states, follow, text, i + 1, nxt)
        current = nxt
    return False


def _close(states, state, text, i, into):
    """Add `state` and every state reachable from it without reading a character at position `i`."""
    todo = [state]
    while todo:
        s = todo.pop()
        if s is None or s in into:
            continue
        into.add(s)
        kind, data, follow, other = states[s]
        if kind == "split":
            todo += [follow, other]
        elif kind == "assert" and data(text, i):
            todo.append(follow)
