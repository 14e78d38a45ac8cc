"""Every file of one `harness report` written under a temporary name beside its place, and put in place together
only once all are written: a report that fails halfway (a malformed record, a full disk) leaves the previous
reports whole, never some files new and some old."""

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class StagedWrites:
    """Files written to `.<name>.<random>.staged` beside their place; commit() renames them all into place,
    discard() removes them. Each file goes to disk as it is written, so a report of many pages holds none in
    memory."""

    def __init__(self):
        self._staged: list = []   # (temporary path, final path), in the order written

    def _temporary(self, path: Path):
        """A new file of a name no one else holds (created exclusively, so a link planted at a predictable name
        is never written through), with the permissions a plain write would give it; (its descriptor, path)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".staged")
        os.fchmod(fd, 0o666 & ~_umask())
        self._staged.append((Path(name), path))
        return fd, Path(name)

    def text(self, path: Path, text: str) -> Path:
        """Stage `text` (UTF-8) for `path`; returns `path`."""
        fd, _ = self._temporary(path)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return Path(path)

    def file(self, path: Path) -> Path:
        """A temporary path for a writer that names its own file (a plot saved by matplotlib): write it there."""
        fd, temporary = self._temporary(path)
        os.close(fd)
        return temporary

    def paths(self) -> list:
        return [final for _, final in self._staged]

    def commit(self) -> list:
        """Every staged file into its place (a rename each, atomic per file; a link in the place is replaced,
        never written through); the final paths."""
        for temporary, final in self._staged:
            os.replace(temporary, final)
        done, self._staged = self.paths(), []
        return done

    def discard(self) -> None:
        for temporary, _ in self._staged:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
        self._staged = []

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if kind is not None:
            self.discard()
