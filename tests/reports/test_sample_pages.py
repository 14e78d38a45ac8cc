"""The samples beside report.html (results/samples/<model>.<n>.html): paged, linked from the report's tables to
the right page, stale pages removed; and every report file put in place together, so a report that fails
halfway leaves the previous one whole."""

import json

import pytest

from harness.reports import html_pages, report as report_module
from harness.reports.report import write_reports
from tests.reports.test_report import setup


def _add_samples(results, count: int) -> None:
    path = results / "transcripts" / "m1.jsonl"
    lines = path.read_text().splitlines()
    good = json.loads(lines[1])
    with open(path, "a") as f:
        for index in range(3, 3 + count):
            f.write(json.dumps({**good, "sample": index, "seed": index}) + "\n")


def test_samples_are_paged_and_the_report_links_each_to_its_page(tmp_path, monkeypatch):
    scenarios, results = setup(tmp_path)
    _add_samples(results, 4)   # 7 samples of one scenario and mode
    monkeypatch.setattr(html_pages, "PAGE_SAMPLES", 3)
    out = write_reports(results, scenarios, plot=False)
    pages = sorted(p.name for p in (results / "samples").iterdir())
    assert pages == ["m1.1.html", "m1.2.html", "m1.3.html"]
    assert {str(results / "samples" / p) for p in pages} <= set(out["written"])
    # Seeds 0, 1, 2 on page 1, 3, 4, 5 on page 2, 6 on page 3; sample 2 (the only failure) is on page 1.
    second = (results / "samples" / "m1.2.html").read_text()
    assert [f'id="m1--arithmetic--native--{n}"' in second for n in range(7)] == [False] * 3 + [True] * 3 + [False]
    assert "1 of 7 failed (continued from the previous page)" in second
    assert '<a href="m1.1.html" rel="prev">' in second and '<a href="m1.3.html" rel="next">' in second
    assert '<a href="../report.html#m1">' in second
    html = (results / "report.html").read_text()
    assert '<a href="samples/m1.1.html#m1--arithmetic--native">arithmetic</a>' in html
    assert '<a href="samples/m1.1.html#m1--arithmetic--native--2">seed 2</a>' in html
    assert "details" not in html.replace("details.sample", "")  # no sample's transcript on the report itself
    # Fewer samples later: the pages no longer written are removed.
    monkeypatch.setattr(html_pages, "PAGE_SAMPLES", 5)
    write_reports(results, scenarios, plot=False)
    assert sorted(p.name for p in (results / "samples").iterdir()) == ["m1.1.html", "m1.2.html"]


def test_a_report_that_fails_halfway_leaves_the_previous_reports_whole(tmp_path, monkeypatch):
    scenarios, results = setup(tmp_path)
    write_reports(results, scenarios, plot=False)
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file() and "transcripts" not in p.parts}
    _add_samples(results, 2)  # the tables would change

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_module, "write_html", fail)  # after the markdown files are written
    with pytest.raises(OSError):
        write_reports(results, scenarios, plot=False)
    after = {p: p.read_bytes() for p in results.rglob("*") if p.is_file() and "transcripts" not in p.parts}
    assert after == before  # every report as it was, and no temporary file left beside them


def test_the_tables_keep_where_each_record_is_not_its_replies(tmp_path):
    from harness.storage.transcripts import RecordRef, load_record
    from harness.reports.tables import collect

    scenarios, results = setup(tmp_path)
    frame = collect(results, scenarios).samples
    refs = list(frame["record"])
    assert all(isinstance(r, RecordRef) for r in refs) and frame["reply"].isna().all()
    # Read again on demand, each is the record at that line.
    assert [load_record(r).sample for r in refs] == [0, 1, 2] and [r.line for r in refs] == [2, 3, 4]


@pytest.mark.browser
def test_a_sample_anchor_on_the_report_reaches_the_later_page_that_holds_it(tmp_path, monkeypatch):
    from tests import chromium

    scenarios, results = setup(tmp_path)
    _add_samples(results, 4)
    monkeypatch.setattr(html_pages, "PAGE_SAMPLES", 3)
    write_reports(results, scenarios, plot=False)
    browser = chromium.Browser()
    try:
        # Sample 6 is on page 3; the report links only to where its row starts (page 1), which passes it on.
        browser.open((results / "report.html").as_uri() + "#m1--arithmetic--native--6")
        for _ in range(3):  # report -> page 1 -> page 2 -> page 3, at most
            if browser.evaluate("location.pathname").endswith("/samples/m1.3.html"):
                break
            browser.wait_for("Page.loadEventFired")
        assert browser.evaluate("location.pathname").endswith("/samples/m1.3.html")
        assert browser.evaluate("document.getElementById('m1--arithmetic--native--6').open") is True
    finally:
        browser.close()
