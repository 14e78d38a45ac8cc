"""A pinned file is known by its size and SHA-256: both read here, in chunks (model files are up to a few GB)."""

import hashlib
from pathlib import Path


def file_digest(path: Path) -> tuple[int, str]:
    """(size, sha256) of a file, read in chunks: model files are up to a few GB."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def file_drift(path: Path, size, sha256) -> str | None:
    """Why `path` does not match its pin, or None if it does."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        return f"{path}: size {actual_size} bytes, pinned {size}"
    _, actual_sha = file_digest(path)
    if sha256 is not None and actual_sha != sha256:
        return f"{path}: sha256 {actual_sha}, pinned {sha256}"
    return None
