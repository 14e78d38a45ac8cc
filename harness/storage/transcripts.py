"""Append-only JSONL transcripts, one file per model: results/transcripts/<model>.jsonl; this module reads them
(harness.storage.transcript_writer writes them).

Every sample is one line, written and fsynced as soon as it finishes, so a killed run loses at most the sample
in flight. A line cut short by a kill is detected when read (ignored with a warning) and, before the next
append, moved aside whole to <model>.jsonl.torn rather than glued to the next record. Besides samples, a
`model` record holds once per model file what the report needs without the model: the embedded template's
text and the detection."""

import json
import os
import re
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.core.errors import RecordError, TranscriptError
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


def read_all(results_dir=None) -> list:
    return [read_transcript(p) for p in ResultsDir.at(results_dir).transcript_files()]
