"""--results-dir: an experiment writes its transcripts and reports elsewhere and leaves results/ as committed;
progress reaches a log as plain lines."""

import hashlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.suites.run_loop import LineProgress

from cached_models import cached_model

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
SMOL = "smollm2-135m-instruct-q4_1"


def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True)


def test_report_reads_and_writes_only_its_results_dir(tmp_path):
    (tmp_path / "transcripts").mkdir()
    shutil.copy(RESULTS / "transcripts" / f"{SMOL}.jsonl", tmp_path / "transcripts")
    before = _digest(RESULTS)
    done = harness("report", "--results-dir", tmp_path, "--no-plot")
    assert done.returncode == 0, done.stderr
    assert _digest(RESULTS) == before
    # A model's table depends on its transcript alone: the experiment's equals the committed one.
    assert (tmp_path / f"{SMOL}.md").read_bytes() == (RESULTS / f"{SMOL}.md").read_bytes()
    written = {p.name for p in tmp_path.glob("*.md")}
    # Only what that folder holds: the seed ADR's replays belong to the project's results/ alone.
    assert written == {f"{SMOL}.md", "summary.md"}


def test_progress_in_a_log_is_one_line_per_sample():
    out = io.StringIO()
    progress = LineProgress(3, stream=out)
    progress.set_description("m")
    progress.update(0)
    progress.update(2)
    progress.update(1)
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["harness run: 2/3 samples", "harness run: 3/3 samples"]
    assert "left" in lines[0] and "left" not in lines[1] and "\r" not in out.getvalue()


@pytest.mark.live
def test_run_appends_to_its_results_dir_only(tmp_path):
    cached_model(SMOL)
    before = _digest(RESULTS)
    done = harness("run", "--model", SMOL, "--scenario", "greeting", "--samples", "1", "--mode", "native",
                   "--results-dir", tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    assert _digest(RESULTS) == before
    records = [json.loads(line) for line in (tmp_path / "transcripts" / f"{SMOL}.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records].count("sample") == 1
    assert "harness run: 1/1 samples" in done.stderr          # stderr is a pipe here, as in CI
