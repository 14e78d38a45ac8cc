"""The records the harness keeps, typed: what a live run, a replay or a runtime check writes, and what resume
and the reports read back. Each kind is a dataclass with `to_json()` and `from_json()`; `from_json` checks every
field it declares and names the first one that is missing or of the wrong type, so a damaged line is skipped
with its reason instead of failing a report halfway. The step log inside a sample (`turns`) is the tool loop's
own JSON, described by the `Turn` and `Step` types (fields.py) and judged when the sample is scored. The kinds:
samples.py (a live run or replay: model, sample); the suites of harness.suites keep their records in their
folders.

A record carries `schema` (SCHEMA_VERSION when written); a reader skips records of a newer schema."""

from __future__ import annotations

from harness.core.errors import RecordError
from harness.storage.records.fields import MODEL, SAMPLE, SCHEMA_VERSION, Step, Turn
from harness.storage.records.samples import ModelRecord, ModelRef, SampleRecord, ScenarioRef

KINDS = {kind.KIND: kind for kind in (SampleRecord, ModelRecord)}


def record_from_json(raw, kinds=(SAMPLE, MODEL)):
    """The typed record a JSON line holds; RecordError says why it cannot be one of `kinds`. A kind is a name of
    KINDS or a record class of its own (with KIND, from_json and to_json): a suite above this floor
    (harness.suites) keeps its record type in its own folder and names it here, since KINDS cannot import it."""
    if not isinstance(raw, dict):
        raise RecordError(f"not a JSON object but {type(raw).__name__}")
    types = {k.KIND: k for k in kinds if isinstance(k, type)}
    names = [k.KIND if isinstance(k, type) else k for k in kinds]
    kind = raw.get("kind")
    if kind not in names:
        expected = " or ".join(repr(k) for k in names)
        raise RecordError(f"unknown kind {kind!r} (expected {expected})")
    return (types.get(kind) or KINDS[kind]).from_json(raw)


__all__ = ["KINDS", "MODEL", "SAMPLE", "SCHEMA_VERSION", "ModelRecord", "ModelRef", "RecordError", "SampleRecord", "ScenarioRef", "Step", "Turn", "record_from_json"]
