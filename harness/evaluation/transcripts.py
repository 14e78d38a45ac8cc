"""Append-only JSONL transcripts, one file per model: results/transcripts/<model>.jsonl.

Every sample is one line, written, flushed and fsynced as soon as it finishes, so a killed run loses at most
the sample in flight. A line cut short by a kill is detected when read (ignored with a warning) and, before
the next append, moved aside to <model>.jsonl.torn rather than glued to the next record. Besides samples, a
`model` record holds once per model file what the report needs without the model: the embedded template's
text and the detection."""

import fcntl
import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.core.errors import HarnessError
from harness.evaluation.records import (
    MODEL, SAMPLE, SCHEMA_VERSION, ModelRecord, RecordError, SampleRecord, record_from_json,
)
from harness.evaluation.results import ResultsDir

# The prefix the tool loop gives a sample stopped because generation failed (harness.live.tool_loop).
GENERATION_FAILED = "generate:"
# A JSON escape of a UTF-16 surrogate: the only way a lone one (valid JSON, not encodable as UTF-8) gets in.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class TranscriptError(HarnessError):
    """A transcript cannot be read or written."""


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
        return {r.key() for r in self.records if isinstance(r, SampleRecord)
                and not (r.error or "").startswith(GENERATION_FAILED)}


def read_transcript(path: Path, kinds=(SAMPLE, MODEL)) -> Transcript:
    """Every complete record of a transcript, typed (harness.evaluation.records), of the `kinds` it may hold
    (runtime checks keep their own files of their own kind). Unreadable lines and records of the wrong shape are
    skipped with a warning naming the line; a missing file is an empty transcript."""
    path = Path(path)
    out = Transcript(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read: {exc}") from exc
    lines = data.split(b"\n")
    torn_tail = lines[-1] != b""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = number == len(lines)
        try:
            record = json.loads(raw.decode("utf-8"))
            if _SURROGATE_ESCAPE.search(raw):
                record = _without_lone_surrogates(record)
        except (ValueError, RecursionError) as exc:
            if last and torn_tail:
                out.warnings.append(f"{path}:{number}: torn last line ({len(raw)} bytes, a run was killed "
                                    "while writing it) ignored")
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
        if last and torn_tail:
            # Valid JSON without its newline: the kill came between the record and its "\n". Keep it.
            out.warnings.append(f"{path}:{number}: last record has no final newline")
        out.records.append(typed)
        out.lines[id(typed)] = number
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
    """Appends records to one transcript under an exclusive lock (two runs on one model interleave whole
    lines, never bytes)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.warnings: list = []
        self._file = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a+b")
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX)
        self._repair_tail()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None

    def _repair_tail(self):
        """A torn last line would swallow the next record; move it aside (nothing is thrown away)."""
        f = self._file
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        chunk = min(size, 1 << 20)
        f.seek(size - chunk)
        tail = f.read(chunk)
        cut = tail.rfind(b"\n")
        start = size - chunk + cut + 1 if cut >= 0 else size - chunk
        f.seek(start)
        fragment = f.read()
        try:
            json.loads(fragment.decode("utf-8"))
            whole = True
        except ValueError:
            whole = False
        if whole:
            f.write(b"\n")  # a complete record that lost only its newline
        else:
            with open(self.path.with_suffix(self.path.suffix + ".torn"), "ab") as side:
                side.write(fragment + b"\n")
                side.flush()
                os.fsync(side.fileno())
            f.truncate(start)
            self.warnings.append(f"{self.path}: torn last line ({len(fragment)} bytes) moved to "
                                 f"{self.path.name}.torn")
        f.flush()
        os.fsync(f.fileno())

    def append(self, record) -> None:
        """Write one typed record (harness.evaluation.records) as one line."""
        if self._file is None:
            raise TranscriptError(f"{self.path}: writer is not open")
        line = encode_line(record.to_json())
        self._file.seek(0, os.SEEK_END)
        self._file.write(line)
        self._file.flush()
        os.fsync(self._file.fileno())
