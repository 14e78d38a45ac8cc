"""Append-only transcripts: records survive, a torn last line is ignored with a warning and moved aside,
and resume keys find what was already recorded."""

import json

import pytest

from harness.core.errors import RecordError
from harness.storage.records import SampleRecord, record_from_json
from harness.storage.transcripts import read_transcript
from harness.storage.transcript_writer import TranscriptWriter


def record(index, seed=0, scenario_hash="h1", mode="native", turns=()):
    return SampleRecord.from_json({"kind": "sample", "model": {"id": "m", "sha256": "abc"},
                                   "scenario": {"name": "s", "hash": scenario_hash}, "mode": mode, "sample": index,
                                   "seed": seed + index, "turns": list(turns)})


def test_records_round_trip_with_schema_and_newline(tmp_path):
    path = tmp_path / "m.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record(0))
        writer.append(record(1))
    data = path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 2
    transcript = read_transcript(path)
    assert [r.sample for r in transcript.records] == [0, 1] and transcript.warnings == []
    assert transcript.records[0].schema == 1


def test_torn_last_line_is_ignored_with_a_warning_then_moved_aside(tmp_path):
    path = tmp_path / "m.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record(0))
    torn = json.dumps(record(1).to_json())[:37].encode()
    with open(path, "ab") as f:
        f.write(torn)  # what a kill in the middle of a write leaves
    transcript = read_transcript(path)
    assert [r.sample for r in transcript.records] == [0]
    assert len(transcript.warnings) == 1 and "torn last line" in transcript.warnings[0] and ":2:" in transcript.warnings[0]
    with TranscriptWriter(path) as writer:
        writer.append(record(1))
    assert writer.warnings and "m.jsonl.torn" in writer.warnings[0]
    transcript = read_transcript(path)
    assert [r.sample for r in transcript.records] == [0, 1] and transcript.warnings == []
    assert (tmp_path / "m.jsonl.torn").read_bytes() == torn + b"\n"


def test_a_whole_record_missing_only_its_newline_is_kept(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(record(0).to_json()))
    assert [r.sample for r in read_transcript(path).records] == [0]
    with TranscriptWriter(path) as writer:
        writer.append(record(1))
    assert [r.sample for r in read_transcript(path).records] == [0, 1]
    assert not (tmp_path / "m.jsonl.torn").exists()


def test_a_bad_line_in_the_middle_is_skipped_and_named(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(record(0).to_json()) + "\n{oops\n" + json.dumps(record(1).to_json()) + "\n")
    transcript = read_transcript(path)
    assert [r.sample for r in transcript.records] == [0, 1]
    assert transcript.warnings and ":2: unreadable record" in transcript.warnings[0]


def test_resume_keys_and_the_last_record_of_a_key_wins(tmp_path):
    path = tmp_path / "m.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record(0))
        writer.append(record(0, turns=[{"user": "again", "steps": []}]))
        writer.append(record(0, scenario_hash="h2"))
    transcript = read_transcript(path)
    assert record(0).key() in transcript.done()
    assert record(1).key() not in transcript.done()
    assert record(0, mode="grammar").key() not in transcript.done()
    samples = transcript.samples()
    assert len(samples) == 2 and ["again"] in [[t["user"] for t in s.turns] for s in samples]


def test_a_missing_transcript_is_empty(tmp_path):
    transcript = read_transcript(tmp_path / "nope.jsonl")
    assert transcript.records == [] and transcript.warnings == []


def test_a_record_read_back_is_the_record_written(tmp_path):
    path = tmp_path / "m.jsonl"
    written = record(3, turns=[{"user": "hi", "steps": [{"reply": "hello"}]}])
    written.recorded_verdicts = {"passed": True}
    with TranscriptWriter(path) as writer:
        writer.append(written)
    (read,) = read_transcript(path).records
    assert read.to_json() == written.to_json() and json.loads(path.read_text())["kind"] == "sample"


def test_run_time_verdicts_are_kept_as_recorded_then_under_either_name():
    # Older records hold them under "verdicts"; a record written now names them for what they are.
    old = {**record(0).to_json(), "verdicts": {"passed": True}}
    del old["recorded_verdicts"]
    read = record_from_json(old)
    assert read.recorded_verdicts == {"passed": True} and not hasattr(read, "verdicts")
    written = read.to_json()
    assert written["recorded_verdicts"] == {"passed": True} and "verdicts" not in written


@pytest.mark.parametrize("raw, why", [
    ([1], "not a JSON object but list"),
    ({"kind": "sampel"}, "unknown kind 'sampel'"),
    ({"kind": "sample", "model": {"id": "m"}, "scenario": {"name": "s", "hash": "h"}, "sample": 0}, "missing field 'seed'"),
    ({"kind": "sample", "model": {"id": 7}, "scenario": {"name": "s", "hash": "h"}}, "field 'model.id' is int"),
    ({"kind": "sample", "model": {"id": "m"}, "scenario": {"name": "s"}}, "missing field 'scenario.hash'"),
    ({"kind": "sample", "model": {"id": "m"}, "scenario": {"name": "s", "hash": "h"}, "sample": True, "seed": 0},
     "field 'sample' is bool"),
    ({"kind": "model", "model": {"id": "m", "sha256": None}, "template": {}}, "field 'model.sha256' is NoneType"),
    ({"kind": "model", "model": {"id": "m", "sha256": "s"}, "template": {"source": "gguf", "sha256": "s"}},
     "missing field 'template.text'"),
])
def test_a_record_of_the_wrong_shape_is_refused_with_the_field_named(raw, why):
    with pytest.raises(RecordError, match=why.replace("(", r"\(")):
        record_from_json(raw)
