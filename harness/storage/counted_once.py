"""Records read from several files of one folder, each counted once: a link to a file read already is not read
again (distinct_files), and a record whose key another file holds too, a copy's, counts once (CountedOnce).
`harness score`, the report's tables, BFCL's page and the runtime suites' pages read their folders through these."""

import os
from pathlib import Path

from harness.storage.results import file_stem


def distinct_files(paths, warnings: list) -> list:
    """The files of `paths` to read, each file once: a symlink (or hard link) to a file already listed is left
    out with a warning naming both, so a link beside a transcript does not count its records twice. A link gives
    way to the file it points at, whatever their order; a path that cannot be looked at is kept (reading it
    says why)."""
    paths = [Path(p) for p in paths]
    kept, seen = set(), {}
    for i in sorted(range(len(paths)), key=lambda i: paths[i].is_symlink()):
        try:
            info = os.stat(paths[i])
        except OSError:
            kept.add(i)
            continue
        same = seen.setdefault((info.st_dev, info.st_ino), paths[i])
        if same is paths[i]:
            kept.add(i)
        else:
            warnings.append(f"{paths[i]}: the same file as {same} (a link to it): read once")
    return [p for i, p in enumerate(paths) if i in kept]


class CountedOnce:
    """Records of several files, each key counted once. Within a file the last record of a key wins (a key
    recorded twice there was asked twice); across files a key is a copy (the harness writes each key to one
    file), so it counts once, from the file the harness writes it to (its `home`, a file name) where that is one
    of them, else from the first file read. Every file whose keys another file holds is named with that file in
    one warning: a copy of a transcript beside it is read, but counts nothing twice."""

    def __init__(self):
        self.chosen: dict = {}            # key -> (path, value), in the order keys were first seen
        self.repeats: dict = {}           # (path left out, path counted) -> how many keys

    def add_file(self, path, items) -> None:
        """items: (key, home, value) of each record of one file, in its order; the value is what is kept of the
        record (not the record: a report keeps what its tables count), home the file name its key belongs in
        (None: none in particular)."""
        latest = {}
        for key, home, value in items:
            latest[key] = (home, value)
        for key, (home, value) in latest.items():
            held = self.chosen.get(key)
            if held is None:
                self.chosen[key] = (path, value)
                continue
            if home is not None and Path(path).name == home and Path(held[0]).name != home:
                self.chosen[key] = (path, value)
                pair = (held[0], path)
            else:
                pair = (path, held[0])
            self.repeats[pair] = self.repeats.get(pair, 0) + 1

    def values(self) -> list:
        return [value for _, value in self.chosen.values()]

    def warnings(self) -> list:
        return [f"{left}: {n} record(s) also in {counted}, counted once, from {counted} (a copy of one file beside "
                "the other? remove the copy)" for (left, counted), n in self.repeats.items()]


def sample_home(record) -> str:
    """The file name `harness run` writes a sample of this model to (in transcripts/ or bfcl/)."""
    return f"{file_stem(record.model.id)}.jsonl"

