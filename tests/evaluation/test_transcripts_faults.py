"""Transcripts under faults, with real processes and real files: a kill -9 in the middle of a line of any
length, a link planted where a transcript goes, a file that cannot grow, and a second writer while one holds
the lock."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from harness.core.errors import TranscriptBusyError, UnsafeWriteError
from harness.storage.records import SampleRecord
from harness.storage.transcripts import read_transcript
from harness.storage.transcript_writer import TranscriptWriter


def record(index, text=""):
    return SampleRecord.from_json({"kind": "sample", "model": {"id": "m", "sha256": "abc"},
                                   "scenario": {"name": "s", "hash": "h"}, "mode": "native", "sample": index,
                                   "seed": index, "turns": [{"user": text, "steps": []}] if text else []})


# A child that records two samples, then is caught by the kill part way through the line of a third one: the
# bytes of a write the kernel had only partly done when the process died.
TORN_CHILD = """
import os, sys
from harness.storage.transcript_writer import TranscriptWriter, encode_line
from tests_records import record
path, cut = sys.argv[1], int(sys.argv[2])
with TranscriptWriter(path) as writer:
    writer.append(record(0))
    writer.append(record(1))
    line = encode_line(record(2, "x" * (3 << 20)).to_json())
    os.write(writer._file.fileno(), line[:cut])
    print("torn", flush=True)
    sys.stdin.read()
"""


def _child(tmp_path, source, *args, **kwargs):
    (tmp_path / "tests_records.py").write_text(
        f"import sys\nsys.path.insert(0, {os.path.dirname(__file__)!r})\nfrom test_transcripts_faults import record\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(source), *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, **kwargs)


@pytest.mark.parametrize("cut", [100, (1 << 20) + 12345, (2 << 20) + 7])
def test_a_torn_line_of_any_length_is_set_aside_whole_and_the_resumed_samples_are_intact(tmp_path, cut):
    path = tmp_path / "m.jsonl"
    child = _child(tmp_path, TORN_CHILD, path, cut)
    assert child.stdout.readline() == "torn\n"
    child.send_signal(signal.SIGKILL)
    child.wait()
    torn = path.read_bytes()[path.read_bytes().index(b"\n", path.read_bytes().index(b"\n") + 1) + 1:]
    assert len(torn) == cut
    with TranscriptWriter(path) as writer:
        writer.append(record(2))
        writer.append(record(3))
    assert writer.warnings == [f"{path}: torn last line ({cut} bytes) moved to m.jsonl.torn"]
    transcript = read_transcript(path)
    assert transcript.warnings == [] and transcript.skipped == []
    assert [r.sample for r in transcript.samples()] == [0, 1, 2, 3]
    assert (tmp_path / "m.jsonl.torn").read_bytes() == torn + b"\n"


def test_a_torn_line_that_cannot_be_set_aside_leaves_the_transcript_as_it_was(tmp_path):
    path = tmp_path / "m.jsonl"
    data = json.dumps(record(0).to_json()).encode() + b"\n" + b'{"kind": "sam'
    path.write_bytes(data)
    (tmp_path / "m.jsonl.torn").mkdir()             # the side file cannot be written
    with pytest.raises(UnsafeWriteError, match="m.jsonl.torn: it is not a regular file"):
        TranscriptWriter(path).__enter__()
    assert path.read_bytes() == data


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_link_out_of_the_results_folder_is_refused_and_nothing_is_written_there(tmp_path, where):
    results, outside = tmp_path / "results", tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "m.jsonl").write_text("mine\n")
    (results / "transcripts").parent.mkdir()
    if where == "file":
        (results / "transcripts").mkdir()
        (results / "transcripts" / "m.jsonl").symlink_to(outside / "m.jsonl")
    else:
        (results / "transcripts").symlink_to(outside)
    with pytest.raises(UnsafeWriteError) as refused:
        with TranscriptWriter(results / "transcripts" / "m.jsonl", root=results) as writer:
            writer.append(record(0))
    assert str(results / "transcripts" / "m.jsonl") in str(refused.value)
    assert (outside / "m.jsonl").read_text() == "mine\n"


def test_a_transcript_with_a_second_name_is_refused(tmp_path):
    (tmp_path / "outside.jsonl").write_text("")
    os.link(tmp_path / "outside.jsonl", tmp_path / "m.jsonl")
    with pytest.raises(UnsafeWriteError, match="hard link"):
        TranscriptWriter(tmp_path / "m.jsonl").__enter__()


FULL_CHILD = """
import resource, sys
from harness.core.errors import TranscriptError
from harness.storage.transcript_writer import TranscriptWriter
from tests_records import record
path = sys.argv[1]
with TranscriptWriter(path) as writer:
    writer.append(record(0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(open(path, "rb").read()) + 3000, resource.RLIM_INFINITY))
    try:
        for i in range(1, 10):
            writer.append(record(i, "y" * 1000))
    except TranscriptError as exc:
        print(exc, flush=True)
"""


def test_a_file_that_cannot_grow_stops_the_writer_with_the_file_ending_on_a_whole_record(tmp_path):
    path = tmp_path / "m.jsonl"
    child = _child(tmp_path, FULL_CHILD, path)
    out, _ = child.communicate("")
    assert child.returncode == 0 and "cannot write a record: File too large" in out and "resume" in out, out
    transcript = read_transcript(path)
    assert transcript.warnings == [] and [r.sample for r in transcript.samples()] == [0, 1, 2]
    assert path.read_bytes().endswith(b"\n")


HOLDER_CHILD = """
import sys
from harness.storage.transcript_writer import TranscriptWriter
with TranscriptWriter(sys.argv[1]):
    print("holding", flush=True)
    sys.stdin.read()
"""


def test_a_second_writer_that_will_not_wait_names_the_process_holding_the_transcript(tmp_path):
    path = tmp_path / "m.jsonl"
    child = _child(tmp_path, HOLDER_CHILD, path)
    try:
        assert child.stdout.readline() == "holding\n"
        with pytest.raises(TranscriptBusyError) as busy:
            TranscriptWriter(path, wait=False).__enter__()
        assert f"{path} is being written by process {child.pid} (" in str(busy.value)
        assert "TranscriptWriter" in str(busy.value) and "then run this again" in str(busy.value)
    finally:
        child.communicate("")
    with TranscriptWriter(path, wait=False) as writer:      # released: taken at once
        writer.append(record(0))
    assert [r.sample for r in read_transcript(path).samples()] == [0]


WRITING_CHILD = """
import os, sys
from harness.storage.transcript_writer import TranscriptWriter, encode_line
from tests_records import record
with TranscriptWriter(sys.argv[1]) as writer:
    writer.append(record(0))
    line = encode_line(record(1, "z" * 5000).to_json())
    os.write(writer._file.fileno(), line[:2000])      # a line half written, the run still alive
    print("writing", flush=True)
    sys.stdin.read()
    os.write(writer._file.fileno(), line[2000:])
"""


def test_a_transcript_read_while_a_run_writes_it_is_a_whole_prefix_not_a_malformed_record(tmp_path):
    path = tmp_path / "m.jsonl"
    child = _child(tmp_path, WRITING_CHILD, path)
    try:
        assert child.stdout.readline() == "writing\n"
        done = subprocess.run([sys.executable, "-m", "harness", "score", str(path), "--json"], capture_output=True,
                              text=True)
    finally:
        child.communicate("")
    # The half-written line is being written, not damage: exit 0, and the sample before it is scored.
    assert done.returncode == 0, done.stderr
    assert "torn last line (2000 bytes: being written by a run now" in done.stderr
    assert [e["sample"] for e in json.loads(done.stdout)] == [0]
    assert [r.sample for r in read_transcript(path).samples()] == [0, 1]
