"""Append-only JSONL transcripts, one file per model: results/transcripts/<model>.jsonl.

Every sample is one line, written, flushed and fsynced as soon as it finishes, so a killed run loses at most
the sample in flight. A line cut short by a kill is detected when read (ignored with a warning) and, before
the next append, moved aside to <model>.jsonl.torn rather than glued to the next record. Besides samples, a
`model` record holds once per model file what the report needs without the model: the embedded template's
text and the detection."""

import fcntl
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.core.errors import HarnessError
from harness.evaluation.results import ResultsDir

SCHEMA_VERSION = 1
SAMPLE = "sample"
MODEL = "model"


class TranscriptError(HarnessError):
    """A transcript cannot be read or written."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def sample_key(record: dict) -> tuple:
    """What makes two sample records the same sample: resume skips a key already recorded."""
    return (record["model"]["id"], record["model"].get("sha256"), record["scenario"]["name"],
            record["scenario"]["hash"], record.get("mode", "native"), record["sample"], record["seed"])


# What resume and the report read from a record, by kind: (path of keys, accepted types, may be absent).
_STR, _OPT_STR, _INT = (str,), (str, type(None)), (int,)
_SHAPES = {
    SAMPLE: [(("model",), (dict,), False), (("model", "id"), _STR, False), (("model", "sha256"), _OPT_STR, True),
             (("scenario",), (dict,), False), (("scenario", "name"), _STR, False),
             (("scenario", "hash"), _STR, False), (("mode",), _STR, True), (("sample",), _INT, False),
             (("seed",), _INT, False), (("turns",), (list,), True), (("seconds",), (int, float, type(None)), True),
             (("error",), _OPT_STR, True), (("family",), _OPT_STR, True), (("replay",), (dict, type(None)), True)],
    MODEL: [(("model",), (dict,), False), (("model", "id"), _STR, False), (("model", "sha256"), _STR, False),
            (("template",), (dict,), False), (("template", "source"), _STR, False),
            (("template", "sha256"), _STR, False), (("template", "text"), _STR, False),
            (("detection",), (dict,), True), (("family",), _OPT_STR, True)],
}


def record_problem(record) -> str | None:
    """Why a record lacks a field resume or the report reads (or has it with the wrong type), or None."""
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    if record.get("kind") not in _SHAPES:
        return f"unknown kind {record.get('kind')!r} (expected {SAMPLE!r} or {MODEL!r})"
    for keys, types, optional in _SHAPES[record["kind"]]:
        value, present = record, True
        for key in keys:
            present = isinstance(value, dict) and key in value
            value = value.get(key) if present else None
        name = ".".join(keys)
        if not present:
            if not optional:
                return f"missing field {name!r}"
        elif not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"field {name!r} is {type(value).__name__} {json.dumps(value, default=str)[:60]}, not " \
                   f"{' or '.join('null' if t is type(None) else t.__name__ for t in types)}"
    return None     # what lies deeper (turns, steps, replies) is checked as the report scores it


@dataclass
class Transcript:
    path: Path
    records: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    # Malformed records (bad JSON, a wrong shape) that were left out: also in warnings, but unlike a torn last
    # line (a kill, which resume repairs) they mean the file was damaged or written by something else.
    skipped: list = field(default_factory=list)
    lines: dict = field(default_factory=dict)   # id(record) -> its line, for messages about it

    def where(self, record: dict) -> str:
        return f"{self.path}:{self.lines.get(id(record), '?')}"

    def skip(self, message: str) -> None:
        self.skipped.append(message)
        self.warnings.append(message)

    def samples(self) -> list:
        """Sample records, the last one of each key winning (a key recorded twice was run twice)."""
        latest = {}
        for record in self.records:
            if record.get("kind") == SAMPLE:
                latest[sample_key(record)] = record
        return list(latest.values())

    def models(self) -> dict:
        """Model records by model sha256 (the last one wins)."""
        return {r["model"].get("sha256"): r for r in self.records if r.get("kind") == MODEL}

    def done(self) -> set:
        return {sample_key(r) for r in self.records if r.get("kind") == SAMPLE}


def read_transcript(path: Path, problem=record_problem) -> Transcript:
    """Every complete record of a transcript. Unreadable lines are skipped with a warning naming the line;
    a missing file is an empty transcript. problem(record) says why a record has the wrong shape (None: fine);
    other append-only record files (harness.evaluation.runtime_agreement's) pass their own."""
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
        except ValueError as exc:
            if last and torn_tail:
                out.warnings.append(f"{path}:{number}: torn last line ({len(raw)} bytes, a run was killed "
                                    "while writing it) ignored")
            else:
                out.skip(f"{path}:{number}: unreadable record skipped: {exc}")
            continue
        wrong = problem(record)
        if wrong:
            out.skip(f"{path}:{number}: malformed record skipped: {wrong}")
            continue
        if last and torn_tail:
            # Valid JSON without its newline: the kill came between the record and its "\n". Keep it.
            out.warnings.append(f"{path}:{number}: last record has no final newline")
        if record.get("schema", 0) > SCHEMA_VERSION:
            out.warnings.append(f"{path}:{number}: schema {record.get('schema')} is newer than this harness "
                                f"({SCHEMA_VERSION}); record ignored")
            continue
        out.records.append(record)
        out.lines[id(record)] = number
    return out


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

    def append(self, record: dict) -> None:
        if self._file is None:
            raise TranscriptError(f"{self.path}: writer is not open")
        record = {"schema": SCHEMA_VERSION, **record}
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._file.seek(0, os.SEEK_END)
        self._file.write(line.encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())
