"""A report killed before it puts its files in place leaves them staged (`.<name>.<8 chars>.staged`); the next
report removes those, and only those: a file of another name is left, and a report still writing keeps its own
(the next one refuses to start beside it)."""

import fcntl
import os

import pytest

from harness.core.errors import HarnessError
from harness.reports.report import write_reports
from tests.reports.test_report_paths import _transcript, scenarios  # noqa: F401 -- a fixture
from harness.evaluation.scenario_files import load_scenarios

LEFT_BY_A_KILLED_REPORT = [".summary.md.k1ll3d_x.staged", "samples/.m1.0.html.abcd1234.staged",
                           ".report.html.zz99yy88.staged", "runtime-conformance/.page.md.q0q0q0q0.staged"]
LOCK_NAME = ".report.lock"
NOT_A_REPORTS = ["notes.staged", ".summary.md.staged", ".summary.md.TOOLONG12.staged", "transcripts/m1.jsonl",
                 ".summary.md.abcd1234.partial"]


def _plant(results, names):
    for name in names:
        path = results / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("left behind\n")


@pytest.mark.parametrize("plot", [False, True], ids=["tables", "with-heat-map"])
def test_a_report_removes_what_a_killed_report_left_staged(tmp_path, scenarios, plot):  # noqa: F811
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    _transcript(results, scenario, "m1")
    _plant(results, LEFT_BY_A_KILLED_REPORT + NOT_A_REPORTS)
    write_reports(results, scenarios, plot=plot)
    for name in LEFT_BY_A_KILLED_REPORT:
        assert not (results / name).exists(), name
    for name in NOT_A_REPORTS:
        assert (results / name).exists(), name
    assert not list(results.rglob("*.staged.*")) and not (results / LOCK_NAME).exists()


def test_a_report_beside_a_live_one_refuses_and_leaves_its_staged_files(tmp_path, scenarios):  # noqa: F811
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    _transcript(results, scenario, "m1")
    _plant(results, LEFT_BY_A_KILLED_REPORT)
    # A report that is still writing holds the folder's lock.
    fd = os.open(results / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(HarnessError, match="another report is being written into this folder by process"):
            write_reports(results, scenarios, plot=False)
    finally:
        os.close(fd)
    for name in LEFT_BY_A_KILLED_REPORT:
        assert (results / name).exists(), name
