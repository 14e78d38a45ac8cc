"""Every file of one `harness report` written under a temporary name beside its place, and put in place together
only once all are written: a report that fails halfway (a malformed record, a full disk) leaves the previous
reports whole, never some files new and some old.

A report killed before it commits or discards (kill -9, a lost machine) leaves its staged files behind. Every
report holds a lock on its results folder (report_lock) while it writes; the next report takes it and removes
the staged files under the folder, which can then only be leftovers of reports that are dead."""

import fcntl
import os
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.safe_writes import default_file_mode, lock_holder

# mkstemp's names: the prefix (".<name>."), 8 characters from [a-z0-9_], the suffix. Anchored, so that no file
# of another writer (a transcript, a download's ".partial") is ever taken for a report's.
STAGED_NAME = re.compile(r"\..+\.[a-z0-9_]{8}\.staged")
LOCK_NAME = ".report.lock"


@contextmanager
def report_lock(root: Path):
    """An exclusive lock on `root` for one report, or HarnessError naming the report that holds it; once held,
    the staged files a killed report left under `root` are removed. The lock file is removed on release."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_NAME
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(fd)
            os.close(fd)
            raise HarnessError(f"{root}: another report is being written into this folder by {holder}; run "
                               "this one once it has finished") from None
        # The holder before us unlinks the file before it unlocks: a lock on an unlinked file guards nothing.
        try:
            if os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        remove_stale_staged(root)
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)


def remove_stale_staged(root: Path) -> list:
    """Remove the staged files (STAGED_NAME, regular files only) under `root`; called under report_lock, where
    no live report has any. The paths removed."""
    removed = []
    for folder, _, files in os.walk(root):        # links to folders are not followed
        for name in files:
            path = Path(folder) / name
            if STAGED_NAME.fullmatch(name) and path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


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
        os.fchmod(fd, default_file_mode())
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


@dataclass
class Pages:
    """What one `harness report` hands the page writer of each suite above this floor (harness.suites): the
    results folder (a harness.storage.results.ResultsDir), the warnings list it adds to, where to stage its
    files, two lists of report.html fragments it may add to: first_screen (report.html opens with them) and
    sections (after the tables, in the order the suites are registered), bottom_line: sentences (markdown)
    that summary.md's and report.html's bottom line give after the scenario questions (BFCL's), and models: the
    models whose rows the first screen shows (report.html's model selector offers them beside the samples')."""
    results: object
    warnings: list
    staged: StagedWrites
    first_screen: list = field(default_factory=list)
    sections: list = field(default_factory=list)
    bottom_line: list = field(default_factory=list)
    models: set = field(default_factory=set)
    samples: object = None   # the folder's scored scenario samples (a DataFrame, harness.reports.tables.collect)
