"""The family registry: one table from public family name to its strict parser.

Families come from `harness/families/*.yaml` (pattern families, no code) and from the Python modules in
CUSTOM_MODULES (formats a pattern cannot express); each custom module declares `FAMILY`, a CustomFamily."""

import importlib
from functools import lru_cache
from pathlib import Path

from harness.core.errors import FamilySpecError
from harness.families.base import Family, NearMiss, ParseResult, ToolCall
from harness.families.spec import load_family

HERE = Path(__file__).resolve().parent
CUSTOM_MODULES = [
    "harness.families.gemma4",
    "harness.families.minimax_m3",
    "harness.families.minicpm5",
    "harness.families.atem",
    "harness.families.deepseek_v32",
    "harness.families.deepseek_v4",
    "harness.families.kimi_k3",
    "harness.families.functionary_v32",
    "harness.families.harmony",
]

__all__ = ["Family", "NearMiss", "ParseResult", "ToolCall", "families", "get", "all_markers", "names"]


def all_markers() -> tuple:
    """Markers that name a foreign family when they turn up in a reply. Punctuation-only markers (`>>>`,
    `{`) occur in ordinary answers (a Python prompt, a JSON example), so they never count as foreign."""
    return tuple(dict.fromkeys(m for f in families().values() for m in f.markers if any(c.isalpha() for c in m)))


@lru_cache(maxsize=1)
def families() -> dict:
    table = {}
    for path in sorted(HERE.glob("*.yaml")):
        family = load_family(path, all_markers)
        table[family.name] = family
    for module in CUSTOM_MODULES:
        declared = importlib.import_module(module)
        family = declared.FAMILY.build(all_markers, declared.__file__)
        if family.name in table:
            raise FamilySpecError(f"{module}: family {family.name!r} is already defined in {table[family.name].source}")
        table[family.name] = family
    return dict(sorted(table.items()))


def names() -> list:
    return list(families())


def get(name: str) -> Family:
    table = families()
    if name not in table:
        raise FamilySpecError(f"unknown family {name!r} (known: {', '.join(table)})")
    return table[name]
