"""Append-only JSONL transcripts, one file per model: results/transcripts/<model>.jsonl.

Every sample is one line, written and fsynced as soon as it finishes, so a killed run loses at most the sample
in flight. A line cut short by a kill is detected when read (ignored with a warning) and, before the next
append, moved aside whole to <model>.jsonl.torn rather than glued to the next record. Besides samples, a
`model` record holds once per model file what the report needs without the model: the embedded template's
text and the detection."""

import fcntl
import json
import math
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.core.errors import RecordError, TranscriptBusyError, TranscriptError, UnsafeWriteError
from harness.core.safe_writes import lock_holder, open_append
from harness.storage.records import (
    MODEL, SAMPLE, SCHEMA_VERSION, ModelRecord, SampleRecord, record_from_json,
)
from harness.storage.results import ResultsDir

# The prefix the tool loop gives a sample stopped because generation failed (harness.live.tool_loop).
GENERATION_FAILED = "generate:"
# A sample a served runtime answered with an error (HTTP 500 every time, a 4xx): recorded as done, the runtime's
# finding; unlike GENERATION_FAILED, not asked again.
RUNTIME_ANSWERED = "runtime answered:"
# A JSON escape of a UTF-16 surrogate: the only way a lone one (valid JSON, not encodable as UTF-8) gets in.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Transcript:
    path: Path
    records: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    # Malformed records (bad JSON, a wrong shape) that were left out: also in warnings, but unlike a torn last
    # line (a kill, which resume repairs) they mean the file was damaged or written by something else.
    skipped: list = field(default_factory=list)
    lines: dict = field(default_factory=dict)   # id(record) -> its line, for messages about it

    def where(self, record) -> str:
        return f"{self.path}:{self.lines.get(id(record), '?')}"

    def skip(self, message: str) -> None:
        self.skipped.append(message)
        self.warnings.append(message)

    def samples(self) -> list:
        """Sample records, the last one of each key winning (a key recorded twice was run twice)."""
        latest = {}
        for record in self.records:
            if isinstance(record, SampleRecord):
                latest[record.key()] = record
        return list(latest.values())

    def models(self) -> dict:
        """Model records by model sha256 (the last one wins)."""
        return {r.model.sha256: r for r in self.records if isinstance(r, ModelRecord)}

    def done(self) -> set:
        """Keys a resumed run skips. A sample whose generation failed (a server down or timing out, a prompt the
        runtime refused) is recorded as evidence but not done: nothing was generated, so a later run asks again."""
        return set(self.done_setups())

    def done_setups(self) -> dict:
        """done()'s keys, each with the setup its latest record was written under (SampleRecord.setup): a run
        whose plan gives a sample another setup runs it again, and the new record supersedes the old."""
        return {r.key(): r.setup() for r in self.records if isinstance(r, SampleRecord)
                and not (r.error or "").startswith(GENERATION_FAILED)}


# The longest record line read: a sample of many long replies stays far below it, and a file whose "line" runs
# past it (a device, a file with no newline) is a malformed record named by its line, not an allocation of
# gigabytes.
MAX_RECORD_BYTES = 64 << 20


@dataclass(frozen=True)
class RecordRef:
    """Where a record sits in its transcript (the byte offset of its line): a report keeps this instead of the
    record and reads it again when it writes the sample out, so its memory does not grow with the replies."""
    path: Path
    offset: int
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def _open_regular(path: Path):
    """The file opened for reading, or TranscriptError when it is not a regular file. Opened without blocking
    (a FIFO opened for reading otherwise waits for a writer) and checked on the open descriptor, so nothing
    swapped in between a check and the open is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        raise TranscriptError(f"{path}: not a regular file ({kind}); only regular transcript files are read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _decode(raw: bytes):
    record = json.loads(raw.decode("utf-8"))
    if _SURROGATE_ESCAPE.search(raw):
        record = _without_lone_surrogates(record)
    return record


def scan_transcript(path: Path, out: "Transcript", kinds=(SAMPLE, MODEL)):
    """Every complete record of a transcript, typed, one at a time as (record, RecordRef): memory holds one line
    (at most MAX_RECORD_BYTES), whatever the file's size. What is wrong goes to `out`: unreadable lines, records
    of the wrong shape or past the bound are skipped naming file:line; a torn last line is a warning; a file that
    is not a regular one (a FIFO, /dev/zero) is skipped whole, unopened for reading. A missing file has none."""
    path = Path(path)
    try:
        handle = _open_regular(path)
    except FileNotFoundError:
        return
    except TranscriptError as exc:
        out.skip(str(exc))
        return
    with handle:
        number = offset = 0
        while True:
            raw = handle.readline(MAX_RECORD_BYTES + 1)
            if not raw:
                return
            number += 1
            start = offset
            offset += len(raw)
            ended = raw.endswith(b"\n")
            if not ended and len(raw) > MAX_RECORD_BYTES:
                rest = _skip_line(handle)
                offset += rest
                out.skip(f"{path}:{number}: record over the {MAX_RECORD_BYTES}-byte bound ({len(raw) + rest} "
                         "bytes) skipped unread")
                continue
            if not raw.strip():
                continue
            try:
                record = _decode(raw)
            except (ValueError, RecursionError) as exc:
                if not ended:
                    out.warnings.append(f"{path}:{number}: torn last line ({len(raw)} bytes: being written by a "
                                        "run now, or left by one that was killed) ignored")
                else:
                    out.skip(f"{path}:{number}: unreadable record skipped: {exc}")
                continue
            schema = record.get("schema", 0) if isinstance(record, dict) else 0
            if isinstance(schema, int) and schema > SCHEMA_VERSION:
                # A later harness wrote it, perhaps in a shape this one cannot read: left alone, not called damaged.
                out.warnings.append(f"{path}:{number}: schema {schema} is newer than this harness "
                                    f"({SCHEMA_VERSION}); record ignored")
                continue
            try:
                typed = record_from_json(record, kinds)
            except RecordError as wrong:
                out.skip(f"{path}:{number}: malformed record skipped: {wrong}")
                continue
            if not ended:
                # Valid JSON without its newline: the kill came between the record and its "\n". Keep it.
                out.warnings.append(f"{path}:{number}: last record has no final newline")
            yield typed, RecordRef(path, start, number)


def _skip_line(handle) -> int:
    """Read past the rest of an over-long line, a chunk at a time; the bytes skipped."""
    skipped = 0
    while True:
        chunk = handle.readline(1 << 20)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


def load_record(ref: RecordRef, kinds=(SAMPLE, MODEL)):
    """The record at `ref`, read again (a report writing out a sample it kept only the place of)."""
    with _open_regular(ref.path) as handle:
        handle.seek(ref.offset)
        raw = handle.readline(MAX_RECORD_BYTES + 1)
    try:
        return record_from_json(_decode(raw), kinds)
    except (ValueError, RecursionError, RecordError) as exc:
        raise TranscriptError(f"{ref}: changed since it was read ({exc})") from exc


def read_transcript(path: Path, kinds=(SAMPLE, MODEL)) -> Transcript:
    """Every complete record of a transcript, typed (harness.storage.records), of the `kinds` it may hold
    (runtime checks keep their own files of their own kind), in memory (scan_transcript streams them).
    Unreadable lines and records of the wrong shape are skipped with a warning naming the line; a missing file
    is an empty transcript."""
    out = Transcript(Path(path))
    for typed, ref in scan_transcript(path, out, kinds):
        out.records.append(typed)
        out.lines[id(typed)] = ref.line
    return out


def _without_lone_surrogates(value):
    """A lone surrogate a server sent (written escaped, as sent) read back as U+FFFD: Python holds it in a str,
    but no report, terminal or file can encode it as UTF-8."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


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


def read_all(results_dir=None) -> list:
    return [read_transcript(p) for p in ResultsDir.at(results_dir).transcript_files()]


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
