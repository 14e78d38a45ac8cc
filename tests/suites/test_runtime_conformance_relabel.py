"""tools/relabel_runtime_conformance.py labels the committed runtime-conformance records again from the answers
they hold, offline: the committed labels are what today's classify gives, and a stream recorded as cut short for
want of [DONE] alone, after its finish_reason, is read as finished."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from relabel_runtime_conformance import finished_stream  # noqa: E402


def test_the_committed_records_carry_the_labels_classify_gives_today():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "relabel_runtime_conformance.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 relabelled" in done.stdout and " relabelled\n" in done.stdout


def test_a_stream_cut_for_want_of_done_alone_is_read_as_finished_and_a_cut_one_is_left_alone():
    old = "cut short: the stream ended without [DONE]; it stopped after \"Hi\""
    stream = {"status": 200, "content": "Hi", "finish_reason": "stop", "chunks": 2, "cut_short": old,
              "problems": [old]}
    assert finished_stream(stream) == {"status": 200, "content": "Hi", "finish_reason": "stop", "chunks": 2,
                                       "no_done_sentinel": True}
    cut = "cut short: the stream ended without [DONE] and without a finish_reason; it stopped after \"Hi\""
    midway = {"content": "Hi", "finish_reason": None, "cut_short": cut, "problems": [cut]}
    assert finished_stream(midway) is midway and finished_stream(None) is None and finished_stream({}) == {}
