"""Writing sources.json: its canonical text (fields in a fixed order, templates sorted by id), an atomic rewrite,
and the lock a read-modify-write holds (harness pin-template, harness fetch recording a size). Reading and
checking it is harness.pins.sources."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from harness.core import constants
from harness.core.errors import SourcesError
from harness.core.safe_writes import default_file_mode
from harness.pins.entries import ARCHIVE_OPTIONAL, OPTIONAL_FIELDS, ARCHIVE_FIELDS, MODEL_FIELDS, TEMPLATE_FIELDS


def dump_sources(raw: dict) -> str:
    """The canonical text of sources.json: fields in a fixed order, templates sorted by id, models as listed."""
    def ordered(entry, fields, optional=OPTIONAL_FIELDS):
        return {k: entry.get(k) for k in fields if k in entry or k not in optional}
    doc = {
        "version": raw["version"],
        "templates": [ordered(t, TEMPLATE_FIELDS) for t in sorted(raw["templates"], key=lambda t: t["id"])],
        "models": [ordered(m, MODEL_FIELDS) for m in raw["models"]],
    }
    if raw.get("archives"):
        doc["archives"] = [ordered(a, ARCHIVE_FIELDS, ARCHIVE_OPTIONAL) for a in raw["archives"]]
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_sources(raw: dict, path: Path | str | None = None) -> None:
    """Rewrite sources.json atomically (a crash leaves the old file, never half of the new one)."""
    path = Path(path) if path is not None else constants.SOURCES_PATH
    text = dump_sources(raw)
    fd, tmp = tempfile.mkstemp(prefix=".sources.", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), default_file_mode())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def sources_locked(path: Path | str | None = None):
    """Hold sources.json for a read-modify-write: two `harness pin-template` runs at once would otherwise both
    read the old file and the second write would drop the first one's entry. The lock is a file beside
    sources.json, removed before it is released; a waiter that then holds a lock on the removed file tries again."""
    path = Path(path) if path is not None else constants.SOURCES_PATH
    lock = path.parent / f".{path.name}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SourcesError(f"cannot lock {path} for writing ({lock}: {exc.strerror})") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield path
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
