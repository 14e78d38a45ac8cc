"""YAML loading that remembers where every value came from, so that a bad family or scenario file is
reported as `file:line: field: problem` instead of a bare traceback."""

from dataclasses import dataclass
from pathlib import Path

import yaml


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


def _convert(node, at, lines):
    lines[at] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            key = key_node.value
            out[key] = _convert(value_node, at + (key,), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, at + (i,), lines) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node):
    # Let PyYAML resolve the scalar's type (int, bool, null, str) exactly as safe_load would.
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def load_located(path: Path, error_type) -> Located:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error_type(f"{path}: cannot read: {exc}") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        raise error_type(f"{path}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    lines: dict = {}
    data = _convert(node, (), lines) if node is not None else None
    return Located(path, data, lines)
