"""Transcripts that are not what a run writes: a FIFO or /dev/zero in their place, a line past the size bound,
fields a run never writes null (`seed`, `detection.reason`). Each is named (file:line and field, or the file)
and left out; the other records are reported; nothing blocks, nothing grows without bound."""

import json
import os
import subprocess
import sys

import pytest

from harness.storage import transcripts
from harness.storage.transcripts import read_transcript
from harness.reports.report import write_reports
from tests.reports.test_report import setup
from tests.reports.test_report_malformed import MODEL_RECORD


@pytest.fixture
def tree(tmp_path):
    scenarios, results = setup(tmp_path)
    return scenarios, results, results / "transcripts"


def _good_line(transcripts_dir) -> dict:
    return json.loads((transcripts_dir / "m1.jsonl").read_text().splitlines()[1])


def test_a_fifo_and_dev_zero_given_as_transcripts_are_refused_by_name_without_blocking(tree):
    scenarios, results, folder = tree
    os.mkfifo(folder / "fifo.jsonl")       # opened for reading, it would wait for a writer forever
    (folder / "zero.jsonl").symlink_to("/dev/zero")  # read whole, it would fill memory
    out = write_reports(results, scenarios, plot=False)
    refused = [s for s in out["skipped"] if "not a regular file" in s]
    why = "only regular transcript files are read"
    assert refused == [f"{folder / 'fifo.jsonl'}: not a regular file (a FIFO); {why}",
                       f"{folder / 'zero.jsonl'}: not a regular file (a device); {why}"]
    assert "2/3 67%" in (results / "m1.md").read_text()  # the regular transcript is still reported


def test_score_names_a_fifo_path_and_exits_1(tree):
    _, _, folder = tree
    os.mkfifo(folder / "fifo.jsonl")
    done = subprocess.run([sys.executable, "-m", "harness", "score", str(folder / "fifo.jsonl")],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{folder / 'fifo.jsonl'}: not a regular file (a FIFO)" in done.stderr and "Traceback" not in done.stderr


def test_a_line_past_the_bound_is_one_malformed_record_and_the_next_line_is_read(tree, monkeypatch):
    _, _, folder = tree
    good = _good_line(folder)
    path = folder / "m1.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps({**good, "sample": 7, "seed": 7, "padding": "x" * 5000}) + "\n")
        f.write(json.dumps({**good, "sample": 8, "seed": 8}) + "\n")
    monkeypatch.setattr(transcripts, "MAX_RECORD_BYTES", 4096)
    read = read_transcript(path)
    assert [r.sample for r in read.records if r.KIND == "sample"] == [0, 1, 2, 8]
    size = len(json.dumps({**good, "sample": 7, "seed": 7, "padding": "x" * 5000})) + 1
    assert read.skipped == [f"{path}:5: record over the 4096-byte bound ({size} bytes) skipped unread"]


def test_a_null_seed_and_a_null_detection_reason_skip_their_records_and_the_reports_are_written(tree):
    scenarios, results, folder = tree
    good = _good_line(folder)
    path = folder / "m1.jsonl"
    with open(path, "a") as f:
        f.write(json.dumps({**good, "sample": 9, "seed": None}) + "\n")
        f.write(json.dumps({**MODEL_RECORD, "detection": {"reason": None}}) + "\n")
    out = write_reports(results, scenarios, plot=False)
    assert out["skipped"] == [f"{path}:5: malformed record skipped: field 'seed' is NoneType null, not int",
                              f"{path}:6: malformed record skipped: field 'detection.reason' is NoneType null, "
                              "not str"]
    assert "2/3 67%" in (results / "m1.md").read_text()
