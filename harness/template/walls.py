"""Walls: templates whose tool-call format the harness deliberately does not support, each with its reason.
Kept in walls.yaml beside this module so that a wall is a reviewed statement, not a silent gap."""

from functools import lru_cache
from pathlib import Path

from harness.core.errors import FamilySpecError
from harness.core.yaml_source import load_located

WALLS_PATH = Path(__file__).resolve().parent / "walls.yaml"


@lru_cache(maxsize=1)
def walls() -> dict:
    doc = load_located(WALLS_PATH, FamilySpecError)
    data = doc.data or {}
    if not isinstance(data, dict):
        raise FamilySpecError(f"{doc.where()}: walls.yaml maps a template id to the reason it is a wall")
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip():
            raise FamilySpecError(f"{doc.where(key)}: the reason must be a non-empty string")
    return {k: " ".join(v.split()) for k, v in data.items()}


def wall_for(template_id: str) -> str | None:
    return walls().get(template_id)
