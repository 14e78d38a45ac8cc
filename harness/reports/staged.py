"""Every file of one `harness report` written under a temporary name beside its place, and put in place together
only once all are written: a report that fails halfway (a malformed record, a full disk) leaves the previous
reports whole, never some files new and some old."""

import os
from pathlib import Path


class StagedWrites:
    """Files written to `.<name>.staged` beside their place; commit() renames them all into place, discard()
    removes them. Each file goes to disk as it is written, so a report of many pages holds none in memory."""

    def __init__(self):
        self._staged: list = []   # (temporary path, final path), in the order written

    def _temporary(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.staged")
        self._staged.append((temporary, path))
        return temporary

    def text(self, path: Path, text: str) -> Path:
        """Stage `text` (UTF-8) for `path`; returns `path`."""
        temporary = self._temporary(path)
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        return Path(path)

    def file(self, path: Path) -> Path:
        """A temporary path for a writer that names its own file (a plot saved by matplotlib): write it there."""
        return self._temporary(path)

    def paths(self) -> list:
        return [final for _, final in self._staged]

    def commit(self) -> list:
        """Every staged file into its place (a rename each, atomic per file); the final paths."""
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
