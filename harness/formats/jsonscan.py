"""The bracket structure of JSON in a reply, read in linear time and to a bounded depth.

Python's JSON decoder recurses once per level (a reply of 5000 `[` raises RecursionError), and trying it at every
bracket of a long reply is quadratic. These scans find how deep a value nests before decoding it, and which
bracketed regions of free text are worth decoding at all, touching each character a bounded number of times."""

import re

# Deeper than any tool call's arguments; far below Python's recursion limit, so everything downstream that
# recurses over a value (the decoder, json.dumps, reports) stays safe.
MAX_DEPTH = 100

_STRUCTURE = re.compile(r'[\[\]{}"]')
_OPEN = re.compile(r"[\[{]")
# The rest of a JSON string after its opening quote. Possessive, so an unterminated string costs one pass.
_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"', re.DOTALL)
_PAIR = {"]": "[", "}": "{"}
# Inside brackets: a bracket, a whole string (_STRING_REST after its quote), or a quote that opens a string
# never closed. One search per token, where a quote otherwise took a second match for the rest of its string.
_INSIDE = re.compile(r'[\[\]{}]|"(?:[^"\\]++|\\.)*+"|"', re.DOTALL)


def too_deep(text: str, pos: int, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON value at `pos` opens more than `limit` levels before it closes."""
    if pos >= len(text) or text[pos] not in "[{":
        return False
    # Each level opens with a bracket: with no more than `limit` of them left, counted in C, none can be too deep.
    if text.count("[", pos) + text.count("{", pos) <= limit:
        return False
    depth = 0
    while (m := _STRUCTURE.search(text, pos)) is not None:
        pos = m.end()
        char = m.group()
        if char == '"':
            string = _STRING_REST.match(text, pos)
            if string is None:
                return False
            pos = string.end()
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
            if depth == 0:
                return False
    return False


class Region:
    """A bracketed span [start, end) of the text whose brackets balance, with the balanced spans inside it."""

    __slots__ = ("start", "end", "children")

    def __init__(self, start):
        self.start, self.end, self.children = start, None, []


def balanced_regions(text: str, limit: int = MAX_DEPTH) -> list:
    """The outermost balanced bracketed spans of free text, each with its nested spans, none deeper than `limit`.

    Quotes count only inside brackets (prose has its own). A span that never closes, closes with the wrong
    bracket or nests too deep cannot be one JSON value, and neither can any open span around it: they are
    dropped, and the spans that did close inside them stand on their own."""
    roots, stack, pos = [], [], 0
    while True:
        m = (_INSIDE if stack else _OPEN).search(text, pos)
        if m is None:
            break
        pos, char = m.end(), text[m.start()]
        if char == '"':
            if pos - m.start() == 1:    # the lone quote: the string never closes
                break
        elif char in "[{":
            if len(stack) == limit:
                _drop(stack, roots)
                continue
            stack.append((char, Region(m.start())))
        elif _PAIR[char] != stack[-1][0]:
            _drop(stack, roots)
        else:
            region = stack.pop()[1]
            region.end = pos
            (stack[-1][1].children if stack else roots).append(region)
    _drop(stack, roots)
    return roots


def _drop(stack, roots):
    for _, region in stack:
        roots.extend(region.children)
    stack.clear()
