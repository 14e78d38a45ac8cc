"""Call shapes for grammars: a YAML (pattern) family's shape is read from its own CallSpec, so a new YAML family
gets a grammar without code; a Python family declares its shape in its own module (harness.formats.shape);
a family with neither gets the generic JSON shape (see harness.grammar)."""

from __future__ import annotations

import re

from harness.families import Family
from harness.formats.pattern import PatternParser
from harness.formats.shape import Shape


def pin_marker(tokens: list, markers) -> list:
    """The pattern's opening with its whitespace written as in the family's marker.

    The parser finds a reply's first call by its marker, an exact string, and only then reads the pattern
    (where whitespace is free): Gigachat's `<|message_sep|>\n\nfunction call` must be written just so."""
    for marker in markers:
        out, pos = [], 0
        for i, (kind, value) in enumerate(tokens):
            if pos >= len(marker):
                return out + tokens[i:]
            if kind == "lit":
                n = min(len(value), len(marker) - pos)
                if marker[pos : pos + n] != value[:n]:
                    break
                out.append((kind, value))
                pos += n
            elif kind in ("ws", "nl"):
                run = re.match(r"\s*", marker[pos:]).group()
                if run:
                    out.append(("lit", run))
                pos += len(run)
            else:
                break
        else:
            if pos >= len(marker):
                return out
    return tokens


def from_pattern(family: Family) -> Shape:
    """The shape of a YAML family, from its own pattern spec."""
    parser = family.parser
    spec = parser.spec
    between = [("ws", "")]
    if spec.separator:
        between = [("ws", ""), ("lit", spec.separator), ("ws", "")]
    section_open = list(spec.section_open) if spec.section_open else None
    call = list(spec.call)
    if section_open and not spec.section_optional:
        section_open = pin_marker(section_open, family.markers)
    else:
        call = pin_marker(call, family.markers)
    return Shape(
        family=family.name,
        call=call,
        param=list(spec.param) if spec.param else None,
        section_open=section_open,
        section_optional=spec.section_optional,
        section_close=list(spec.section_close) if spec.section_close else None,
        between=between,
        multiple=parser.multiple,
        object=spec.object,
        start_only=parser.start_only,
        reasoning=tuple(parser.reasoning),
        answer_key=spec.answer_key,
        note="from the family's YAML pattern",
    )


def is_pattern_family(family: Family) -> bool:
    return isinstance(family.parser, PatternParser)


def shape_for(family: Family) -> Shape | None:
    """The family's shape, or None when only the generic JSON shape can be imposed on it."""
    if family.shape is not None:
        return family.shape
    if is_pattern_family(family):
        return from_pattern(family)
    return None
