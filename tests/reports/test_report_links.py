"""`harness report` never writes through a link: a summary.md, report.html or heatmap.png planted as a symbolic
link to a file outside the results folder is refused with its path, the file it points at is left as it was,
and no report is rewritten half way; the reports are replaced whole (a temporary file renamed over them)."""

import os
import subprocess
import sys

import pytest

from harness.core.errors import UnsafeWriteError
from harness.reports.report import write_reports

sys.path.insert(0, os.path.dirname(__file__))
from test_report import setup  # noqa: E402


@pytest.mark.parametrize("name", ["summary.md", "report.html", "heatmap.png", "m1.md"])
def test_a_report_that_links_out_of_the_folder_is_refused_and_nothing_is_rewritten(tmp_path, name):
    scenarios, results = setup(tmp_path)
    write_reports(results, scenarios, plot=True)
    before = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()}
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (results / name).unlink()
    (results / name).symlink_to(victim)
    with pytest.raises(UnsafeWriteError) as refused:
        write_reports(results, scenarios, plot=True)
    assert f"refusing to write {results / name}: it is a symbolic link to {victim}" in str(refused.value)
    assert victim.read_text() == "precious\n"
    assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file() and not p.is_symlink()} == \
        {k: v for k, v in before.items() if k != name}
    assert not [p for p in results.iterdir() if p.name.startswith(".")]     # no temporary file left behind


def test_the_command_names_the_link_and_fails(tmp_path):
    scenarios, results = setup(tmp_path)
    (tmp_path / "victim.md").write_text("precious\n")
    (results / "summary.md").symlink_to(tmp_path / "victim.md")
    done = subprocess.run([sys.executable, "-m", "harness", "report", "--results-dir", str(results), "--no-plot"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and f"refusing to write {results / 'summary.md'}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and (tmp_path / "victim.md").read_text() == "precious\n"


def test_a_report_is_replaced_not_written_through_a_hard_link(tmp_path):
    scenarios, results = setup(tmp_path)
    write_reports(results, scenarios, plot=False)
    os.link(results / "summary.md", tmp_path / "other-name.md")
    first = (tmp_path / "other-name.md").read_bytes()
    (results / "summary.md").write_text("stale")
    os.link(results / "summary.md", tmp_path / "second.md")
    write_reports(results, scenarios, plot=False)
    assert (tmp_path / "second.md").read_text() == "stale" and (results / "summary.md").read_bytes() == first
