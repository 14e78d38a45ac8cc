"""Writing transcripts: one record a line, appended and fsynced under an exclusive lock, a torn last line set
aside whole before the next append, and a rewrite (dropping superseded records) that a kill leaves either old or
new. harness.storage.transcripts reads what this writes."""

import fcntl
import json
import math
import os
import threading
from pathlib import Path

from harness.core.errors import TranscriptBusyError, TranscriptError, UnsafeWriteError
from harness.core.safe_writes import lock_holder, open_append
from harness.storage.records import MODEL, SAMPLE, SampleRecord
from harness.storage.transcripts import read_transcript


def _finite(value):
    """NaN and the infinities as null: JSON has no word for them, and a bare NaN makes the line unreadable to
    every strict reader."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def encode_line(obj) -> bytes:
    """One record as one line of valid JSON in UTF-8: non-finite numbers as null, and, where a string holds a lone
    surrogate, the whole line ASCII-escaped (the surrogate kept as the \\uXXXX escape it arrived as)."""
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        obj = _finite(obj)
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


class TranscriptWriter:
    """Appends records to one transcript under an exclusive lock held from open to close (two writers of one
    file interleave whole lines, never bytes). A caller that decides what to write from what the file holds
    (harness run's done set) reads it after entering, under the lock. `wait=False`: a transcript another process
    holds is refused at once, naming that process, instead of waiting for it. `root`: the folder the transcript
    must stay inside (harness.core.safe_writes), by default its own."""

    def __init__(self, path: Path, root: Path | None = None, wait: bool = True):
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path.parent
        self.wait = wait
        self.warnings: list = []
        self._file = None
        # One record at a time: runtime conformance's workers share a writer from threads, and a write cut back on
        # failure must cut back to where its own line began, not past another thread's.
        self._lock = threading.Lock()

    def __enter__(self):
        while True:
            f = _open(self.path, self.root)
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
            except BlockingIOError:
                holder = lock_holder(f.fileno())
                f.close()
                raise TranscriptBusyError(f"{self.path} is being written by {holder}: wait for that run to end "
                                          "or stop it, then run this again (it resumes)") from None
            if _still_there(f, self.path):
                break
            f.close()        # removed or replaced while we waited for its lock: lock the file there now
        self._file = f
        try:
            self._repair_tail()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None

    def discard_if_empty(self) -> None:
        """Remove the transcript if it holds nothing (opened for a model that then failed to load). Safe under
        the lock: a writer that opened the old file finds it gone once it holds the lock, and opens again."""
        if self._file is not None and os.fstat(self._file.fileno()).st_size == 0:
            self.path.unlink(missing_ok=True)

    def drop_superseded(self, rerun=frozenset()) -> int:
        """Rewrite the transcript without the sample records a later record of the same sample replaced under
        another setup (harness.grammar.plan.setup_digest: a sample re-run under today's grammar), or of a key in
        `rerun` (samples the run wrote again under the same setup: a fallback whose recorded retries today's rule
        would not make). Returns how many records were dropped."""
        def superseded(records):
            last = {r.key(): r for r in records if isinstance(r, SampleRecord)}
            return [r for r in records if isinstance(r, SampleRecord) and last[r.key()] is not r
                    and (last[r.key()].setup() != r.setup() or r.key() in rerun)]
        return self.drop(superseded)

    def drop(self, select, kinds=(SAMPLE, MODEL)) -> int:
        """Rewrite the file without the records (of `kinds`) that select(records) returns, given them in file
        order. The new file is written beside it and renamed over it, so a kill leaves either the old file or the
        new one, never a mix; a line left out as malformed is kept as it was. Returns how many records were
        dropped. The last thing a writer does: its appends go to the file it opened, which this replaces."""
        if self._file is None:
            raise TranscriptError(f"{self.path}: writer is not open")
        read = read_transcript(self.path, kinds)
        drop = {id(r) for r in select(read.records)}
        if not drop:
            return 0
        fresh = self.path.with_name(self.path.name + ".rewrite")
        kept_lines = {read.lines[id(r)] for r in read.records if id(r) not in drop}
        typed_lines = set(read.lines.values())
        with open(self.path, "rb") as old, _open(fresh, self.root) as out:
            os.ftruncate(out.fileno(), 0)
            for number, line in enumerate(old, 1):
                # Only the dropped records' lines go: a line left out as malformed is kept as it was.
                if number in kept_lines or number not in typed_lines:
                    _write_all(out.fileno(), line if line.endswith(b"\n") else line + b"\n")
            os.fsync(out.fileno())
        os.replace(fresh, self.path)
        return len(drop)

    def _repair_tail(self):
        """A torn last line (a kill while writing it, of any length) would swallow the next record: it is moved
        whole to <transcript>.torn (nothing is thrown away) and the transcript cut back to its last whole line."""
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        start = _line_start(fd, size)
        if size - start <= _WHOLE_CHECK and _is_record(os.pread(fd, size - start, start)):
            _write_all(fd, b"\n")  # a complete record that lost only its newline
            os.fsync(fd)
            return
        side = self.path.with_name(self.path.name + ".torn")
        try:
            with _open(side, self.root) as out:
                before = os.fstat(out.fileno()).st_size
                try:
                    for offset in range(start, size, _CHUNK):
                        _write_all(out.fileno(), os.pread(fd, min(_CHUNK, size - offset), offset))
                    _write_all(out.fileno(), b"\n")
                    os.fsync(out.fileno())
                except BaseException:
                    os.ftruncate(out.fileno(), before)
                    raise
        except OSError as exc:
            raise TranscriptError(f"{self.path}: its torn last line ({size - start} bytes) cannot be set aside in "
                                  f"{side.name}: {exc}; the transcript is left as it was") from exc
        os.ftruncate(fd, start)
        os.fsync(fd)
        self.warnings.append(f"{self.path}: torn last line ({size - start} bytes) moved to {side.name}")

    def append(self, record) -> None:
        """Write one typed record (harness.storage.records) as one line. A write that fails part way (a full
        disk, a folder gone read-only, a signal) is cut back, so the file ends with its last whole record."""
        if self._file is None:
            raise TranscriptError(f"{self.path}: writer is not open")
        line = encode_line(record.to_json())
        with self._lock:
            self._append_line(line)

    def _append_line(self, line: bytes) -> None:
        fd = self._file.fileno()
        start = os.fstat(fd).st_size
        try:
            _write_all(fd, line)
            os.fsync(fd)
        except BaseException as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass        # the next writer's repair sets the torn line aside
            if isinstance(exc, OSError):
                raise TranscriptError(f"{self.path}: cannot write a record: {exc.strerror or exc}; the records "
                                      "before it are intact, and the same command resumes once it can write") from exc
            raise


# A torn tail up to this size is read whole to tell a record that lost only its newline from a cut one; a longer
# one is set aside unread (nothing is lost either way).
_WHOLE_CHECK = 64 << 20
_CHUNK = 1 << 20


def _open(path: Path, root: Path):
    try:
        return open_append(path, root)
    except UnsafeWriteError:
        raise
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot open for writing: {exc.strerror or exc}") from exc


def _still_there(f, path: Path) -> bool:
    try:
        now_there = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(f.fileno())
    return (now_there.st_dev, now_there.st_ino) == (mine.st_dev, mine.st_ino)


def _line_start(fd: int, size: int) -> int:
    """Where the last line of a file starts: after its last newline, looked for backwards chunk by chunk."""
    end = size
    while end > 0:
        begin = max(0, end - _CHUNK)
        cut = os.pread(fd, end - begin, begin).rfind(b"\n")
        if cut >= 0:
            return begin + cut + 1
        end = begin
    return 0


def _is_record(fragment: bytes) -> bool:
    try:
        return isinstance(json.loads(fragment.decode("utf-8")), dict)
    except (ValueError, RecursionError):
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
