"""Append-only transcripts: records survive, a torn last line is ignored with a warning and moved aside,
and resume keys find what was already recorded."""

import json

from harness.evaluation.transcripts import SAMPLE, TranscriptWriter, read_transcript, sample_key


def record(index, seed=0, scenario_hash="h1", mode="native"):
    return {"kind": SAMPLE, "model": {"id": "m", "sha256": "abc"}, "scenario": {"name": "s", "hash": scenario_hash},
            "mode": mode, "sample": index, "seed": seed + index, "turns": []}


def test_records_round_trip_with_schema_and_newline(tmp_path):
    path = tmp_path / "m.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record(0))
        writer.append(record(1))
    data = path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 2
    transcript = read_transcript(path)
    assert [r["sample"] for r in transcript.records] == [0, 1] and transcript.warnings == []
    assert transcript.records[0]["schema"] == 1


def test_torn_last_line_is_ignored_with_a_warning_then_moved_aside(tmp_path):
    path = tmp_path / "m.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record(0))
    torn = json.dumps(record(1))[:37].encode()
    with open(path, "ab") as f:
        f.write(torn)  # what a kill in the middle of a write leaves
    transcript = read_transcript(path)
    assert [r["sample"] for r in transcript.records] == [0]
    assert len(transcript.warnings) == 1 and "torn last line" in transcript.warnings[0] and ":2:" in transcript.warnings[0]
    with TranscriptWriter(path) as writer:
        writer.append(record(1))
    assert writer.warnings and "m.jsonl.torn" in writer.warnings[0]
    transcript = read_transcript(path)
    assert [r["sample"] for r in transcript.records] == [0, 1] and transcript.warnings == []
    assert (tmp_path / "m.jsonl.torn").read_bytes() == torn + b"\n"


def test_a_whole_record_missing_only_its_newline_is_kept(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(record(0)))
    assert [r["sample"] for r in read_transcript(path).records] == [0]
    with TranscriptWriter(path) as writer:
        writer.append(record(1))
    assert [r["sample"] for r in read_transcript(path).records] == [0, 1]
    assert not (tmp_path / "m.jsonl.torn").exists()


def test_a_bad_line_in_the_middle_is_skipped_and_named(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(record(0)) + "\n{oops\n" + json.dumps(record(1)) + "\n")
    transcript = read_transcript(path)
    assert [r["sample"] for r in transcript.records] == [0, 1]
    assert transcript.warnings and ":2: unreadable record" in transcript.warnings[0]


def test_resume_keys_and_the_last_record_of_a_key_wins(tmp_path):
    path = tmp_path / "m.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record(0))
        writer.append({**record(0), "turns": ["again"]})
        writer.append(record(0, scenario_hash="h2"))
    transcript = read_transcript(path)
    assert sample_key(record(0)) in transcript.done()
    assert sample_key(record(1)) not in transcript.done()
    assert sample_key(record(0, mode="grammar")) not in transcript.done()
    samples = transcript.samples()
    assert len(samples) == 2 and {"again"} in [set(s["turns"]) for s in samples]


def test_a_missing_transcript_is_empty(tmp_path):
    transcript = read_transcript(tmp_path / "nope.jsonl")
    assert transcript.records == [] and transcript.warnings == []
