"""`harness verify`: every pinned file on disk checked against its size and SHA-256 in sources.json."""

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import DriftError
from harness.pins.archives import archive_dir, is_unpacked, tree_drift
from harness.pins.digest import file_drift
from harness.pins.sources import Sources, load_sources, model_cache_path


@dataclass(frozen=True)
class FileCheck:
    kind: str        # "template", "model" or "archive"
    id: str
    path: Path
    status: str      # "ok", "drift", "missing", "absent" (model or archive not fetched), "unpinned" (model without sha256)
    detail: str | None = None

    def as_json(self) -> dict:
        return {"kind": self.kind, "id": self.id, "path": str(self.path), "status": self.status, "detail": self.detail}


def check_all(sources: Sources | None = None, cache_dir: Path | None = None) -> list:
    """One FileCheck per pinned file: templates always, models and unpacked archives only when they are in the
    cache (an archive's unpacked files each against the SHA-256 listed when it was unpacked)."""
    sources = sources or load_sources()
    checks = []
    for t in sources.templates.values():
        if not t.path.is_file():
            checks.append(FileCheck("template", t.id, t.path, "missing", f"{t.path} does not exist"))
            continue
        problem = file_drift(t.path, t.size, t.sha256)
        checks.append(FileCheck("template", t.id, t.path, "drift" if problem else "ok", problem))
    for m in sources.models.values():
        path = model_cache_path(m, cache_dir)
        if not path.is_file():
            checks.append(FileCheck("model", m.id, path, "absent"))
        elif m.sha256 is None:
            checks.append(FileCheck("model", m.id, path, "unpinned", "no sha256 pin; cannot verify"))
        else:
            problem = file_drift(path, m.size, m.sha256)
            checks.append(FileCheck("model", m.id, path, "drift" if problem else "ok", problem))
    for a in sources.archives.values():
        path = archive_dir(a, cache_dir)
        if not is_unpacked(a, cache_dir):
            checks.append(FileCheck("archive", a.id, path, "absent"))
            continue
        problems = tree_drift(a, cache_dir)
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        checks.append(FileCheck("archive", a.id, path, "drift" if problems else "ok",
                                f"changed since unpacking: {shown}; unpack it again with `harness fetch --archives "
                                f"{a.id}`" if problems else None))
    return checks


BAD_STATUSES = {"drift", "missing", "unpinned"}


def verify_all(sources: Sources | None = None, cache_dir: Path | None = None) -> list:
    """check_all, raising DriftError that lists every bad file when any pinned file on disk is off."""
    checks = check_all(sources, cache_dir)
    bad = [c for c in checks if c.status in BAD_STATUSES]
    if bad:
        lines = "\n".join(f"  {c.kind} {c.id}: {c.status}: {c.detail}" for c in bad)
        raise DriftError(f"{len(bad)} pinned file(s) do not match sources.json:\n{lines}")
    return checks
