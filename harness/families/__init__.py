"""The family registry: one table from public family name to its strict parser, and `parse`, the one way a
reply is read with a named family.

Families come from `harness/families/*.yaml` (pattern families, no code) and from every Python module here that
declares `FAMILY`, a CustomFamily (formats a pattern cannot express). Nothing lists them: a new file is a new
family. generic-json, the grammar's fallback shape, is registered like any other but not detectable."""

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path

from harness.core.errors import FamilySpecError
from harness.formats import deviations as dev
from harness.formats.base import CustomFamily, Family, NearMiss, peers_problem, tokens_problem
from harness.formats.calls import ParseResult, ToolCall
from harness.formats.reasoning import DEFAULT_PAIRS, split_reasoning
from harness.formats.spec import load_family

HERE = Path(__file__).resolve().parent

__all__ = ["Family", "NearMiss", "ParseResult", "ToolCall", "families", "detectable", "get", "parse",
           "all_markers", "names"]


_markers_of: list = [None, ()]      # (the family table, its markers): every parse asks, the table rarely changes


def all_markers() -> tuple:
    """Markers that name a foreign family when they turn up in a reply. Punctuation-only markers (`>>>`,
    `{`) occur in ordinary answers (a Python prompt, a JSON example), so they never count as foreign."""
    table = families()
    if _markers_of[0] is not table:
        _markers_of[:] = [table, tuple(dict.fromkeys(m for f in table.values() for m in f.markers
                                                     if any(c.isalpha() for c in m)))]
    return _markers_of[1]


def load_table(directory: Path, package: str) -> dict:
    """Every family of `directory` (the folder of `package`): its YAML files, then its modules that declare
    FAMILY. A module that cannot be imported, or declares a name already taken, is refused by name."""
    table = {}
    for path in sorted(directory.glob("*.yaml")):
        family = load_family(path, all_markers)
        table[family.name] = family
    for info in sorted(pkgutil.iter_modules([str(directory)]), key=lambda m: m.name):
        module = f"{package}.{info.name}"
        try:
            declared = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 -- any failure of a family module is that module's to fix
            raise FamilySpecError(f"{module}: the family module cannot be imported: {exc!r}") from exc
        if not hasattr(declared, "FAMILY"):
            continue
        if not isinstance(declared.FAMILY, CustomFamily):
            raise FamilySpecError(f"{module}: FAMILY must be a CustomFamily (harness.formats.base)")
        problem = peers_problem(declared.FAMILY.peers, family=True) or tokens_problem(declared.FAMILY.tokens,
                                                                                  declared.FAMILY.tokens_source)
        if problem:
            raise FamilySpecError(f"{module}: {problem}")
        family = declared.FAMILY.build(all_markers, declared.__file__)
        if family.name in table:
            raise FamilySpecError(f"{module}: family {family.name!r} is already defined in {table[family.name].source}")
        table[family.name] = family
    return dict(sorted(table.items()))


@lru_cache(maxsize=1)
def families() -> dict:
    """Every registered family, generic-json included, by name."""
    return load_table(HERE, __name__)


def detectable() -> dict:
    """The families a template can write: those detection, the rejection matrix and the conformance report
    read with."""
    return {name: f for name, f in families().items() if f.detectable}


def names() -> list:
    return list(families())


def get(name: str) -> Family:
    table = families()
    if name not in table:
        raise FamilySpecError(f"unknown family {name!r} (known: {', '.join(table)})")
    return table[name]


def value_notation(name: str | None) -> str:
    """How the family's template writes a non-string argument value as text: "json", or "python" (str())."""
    return getattr(get(name).parser, "value_notation", "json") if name else "json"


def parse(family: str | None, text: str, prompt: str = "") -> ParseResult:
    """`text`, a model's reply to `prompt`, read by the strict parser of `family`. Without a family the chat
    had no tools: the reply is text, and call-shaped text in it is still named, so a report can say what the
    model tried. The prompt says what the template opened (a <think> block, Functionary's `>>>`)."""
    if family:
        return get(family).parse(text, prompt)
    # Thinking text never counts as a call: a think block is kept apart before call-shaped text is looked for.
    reasoning, rest, _ = split_reasoning(text, prompt, DEFAULT_PAIRS)
    result = ParseResult(None, content=rest.strip(), reasoning=reasoning)
    result.deviation = dev.classify_unmarked(rest, (), all_markers())
    return result
