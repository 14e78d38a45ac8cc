"""results/parser-agreement.md and report.html's parser-agreement section come from the committed records
(results/parser-agreement/*.jsonl) alone: `harness report` rebuilds them without the peers environment."""

import shutil

from harness import suites
from harness.suites.parser_agreement import SUITE
from harness.suites.parser_agreement.judging import current, unmapped
from harness.suites.parser_agreement.page import markdown as agreement_markdown
from harness.reports.report import write_reports
from tests.pins.test_fetch import ROOT
from tests.reports.test_report import setup

RESULTS = ROOT / "results"


def committed() -> list:
    records = []
    for path in sorted((RESULTS / "parser-agreement").glob("*.jsonl")):
        found, warnings = SUITE.read_records(path)
        assert not warnings, warnings
        records += found
    return records


def test_the_committed_records_read_back_whole_and_remake_the_committed_page():
    records = committed()
    assert {r.project for r in records} == {"vllm", "sglang", "transformers"} and current(records) == records
    assert all(type(r).from_json(r.to_json()) == r for r in records)
    text = (RESULTS / "parser-agreement.md").read_text(encoding="utf-8")
    assert agreement_markdown(records, unmapped(), RESULTS) == text
    # SGLang's names beside ours, and its template detection beside ours, are on it.
    assert "## SGLang's names for what it forgives, and ours" in text
    assert "## SGLang's template detection beside ours" in text


def test_harness_report_writes_the_page_and_the_html_section_from_the_records(tmp_path):
    scenarios, results = setup(tmp_path)
    shutil.copytree(RESULTS / "parser-agreement", results / "parser-agreement")
    shutil.copytree(RESULTS / "template-detection", results / "template-detection")
    shutil.copy(RESULTS / "conformance.json", results / "conformance.json")
    write_reports(results, scenarios, plot=False, pages=[s.write_pages for s in suites.registered().values()])
    assert (results / "parser-agreement.md").read_text(encoding="utf-8") == \
        (RESULTS / "parser-agreement.md").read_text(encoding="utf-8")
    html = (results / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="parser-agreement">'):]
    section = section[:section.index("</section>")]
    assert "vllm 0.33.0" in section and "sglang 0.5.23" in section and 'href="#parser-agreement"' in html
    # One row per family and project, with the parsers of its templates (glm's later templates have their own).
    rows = {(r.family, r.project) for r in committed()}
    assert section.count("<tr>") == len(rows) + 1
    assert "<td>glm</td><td>sglang</td><td>glm45, glm47, ling3, poolside_v1, spark25</td>" in section


def test_without_records_there_is_no_page_and_no_section(tmp_path):
    scenarios, results = setup(tmp_path)
    write_reports(results, scenarios, plot=False, pages=[s.write_pages for s in suites.registered().values()])
    assert not (results / "parser-agreement.md").exists()
    assert 'id="parser-agreement"' not in (results / "report.html").read_text(encoding="utf-8")
