"""Text from transcripts and pins put into markdown safely: a model id, a scenario name or a reply holds whatever
its writer put there (a newline, a pipe, HTML, a raw ESC from a terminal-minded model), and one such character
would end a table row early, split a cell, or render as markup. Every cell is written so it stays one cell of
one row and reads as the text it holds; control characters are shown as escapes (\\x1b), never sent raw."""

import re

import pandas as pd

# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what follows them on screen.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKUP = {"|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;"}


def visible_controls(text: str, keep: str = "") -> str:
    """Control characters as escapes: \\n, \\r, \\t, else \\xNN or \\uNNNN; those in `keep` as they are (a page
    that wraps lines keeps its newlines)."""
    def shown(match) -> str:
        char = match.group()
        if char in keep:
            return char
        return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
    return _CONTROL.sub(shown, text)


def cell(value) -> str:
    """A value as the text of one markdown table cell: controls visible, pipes escaped, HTML as text."""
    text = visible_controls(str(value))
    return re.sub(r"[|<>&]", lambda m: _MARKUP[m.group()], text)


def line(text: str) -> str:
    """Text on one markdown line outside a table (a heading, a list item): controls visible, HTML as text."""
    return re.sub(r"[<>&]", lambda m: _MARKUP[m.group()], visible_controls(str(text)))


def table(frame: pd.DataFrame, index: bool = False, verbatim=()) -> str:
    """frame.to_markdown with every cell, column title and index label escaped by cell(); the columns in
    `verbatim` already hold markdown made safe where it was written (code spans of replies)."""
    out = frame.copy()
    for column in out.columns:
        if column not in verbatim:
            out[column] = [v if v is None or (isinstance(v, float) and v != v) else cell(v) for v in out[column]]
    out.columns = [c if c in verbatim else cell(c) for c in out.columns]
    if index:
        name = frame.index.name
        out.index = pd.Index([cell(i) for i in out.index], name=None if name is None else cell(name))
    return out.to_markdown(index=index)
