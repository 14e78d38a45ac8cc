"""YAML loading that remembers where every value came from, so that a bad family or scenario file is
reported as `file:line: field: problem` instead of a bare traceback."""

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.core.input_files import read_regular

# Project files nest a few levels; composing and converting recurse once per level.
MAX_DEPTH = 100
# A double-quoted "\ud800" is a lone UTF-16 surrogate: a str Python holds, but no UTF-8 writer (a transcript, a
# hash of the scenario) can encode it.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Located:
    """A loaded YAML document plus the line (1-based) of every value, keyed by its path of keys/indices."""

    path: Path
    data: object
    lines: dict

    def line(self, *keys) -> int:
        # Fall back to the nearest enclosing value that has a line.
        while keys and keys not in self.lines:
            keys = keys[:-1]
        return self.lines.get(keys, 1)

    def where(self, *keys) -> str:
        field = ".".join(str(k) for k in keys) or "(document)"
        return f"{self.path}:{self.line(*keys)}: {field}"


def _reject(problem: str, mark) -> None:
    raise yaml.composer.ComposerError(None, None, problem, mark)


class _Loader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases: no project file uses them, and an alias is how a few lines expand
    into exponential data (billion laughs) or into a value that contains itself."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            _reject(f"aliases (*{event.anchor}) are not allowed; write the value out", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            _reject(f"anchors (&{event.anchor}) are not allowed; write the value out", event.start_mark)
        self.depth = getattr(self, "depth", 0) + 1
        if self.depth > MAX_DEPTH:
            _reject(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _convert(node, at, lines, fail):
    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                fail(key_node, "a key must be a plain scalar, not a list or mapping")
            key = key_node.value
            if _SURROGATE.search(key):
                fail(key_node, f"the key {key!r} holds a lone surrogate escape (\\ud800-\\udfff), which is not text")
            if key in out:
                fail(key_node, f"duplicate key {key!r} (first at line {lines[at + (key,)]})")
            out[key] = _convert(value_node, at + (key,), lines, fail)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, at + (i,), lines, fail) for i, item in enumerate(node.value)]
    try:
        value = _scalar(node)
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        fail(node, f"cannot read this value: {getattr(exc, 'problem', None) or exc}")
    if isinstance(value, str) and _SURROGATE.search(value):
        fail(node, f"{value[:40]!r} holds a lone surrogate escape (\\ud800-\\udfff), which is not text")
    return value


def _scalar(node):
    # Let PyYAML resolve the scalar's type (int, bool, null, str) exactly as safe_load would.
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def load_located(path: Path, error_type) -> Located:
    path = Path(path)
    raw = read_regular(path, error_type)        # a FIFO or a link to /dev/zero is refused, not waited on
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error_type(f"{path}:{line}: not UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start})") from None

    def fail(node, problem):
        raise error_type(f"{path}:{node.start_mark.line + 1}: {problem}")

    try:
        node = yaml.compose(text, Loader=_Loader)
        lines: dict = {}
        data = _convert(node, (), lines, fail) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise error_type(f"{path}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    return Located(path, data, lines)
