"""A verdict a run stored in its transcript is what scoring said then: the reports and `harness score` score the
replies again, count only that, and say where the two differ, whichever name the stored field has."""

import json

import pytest

from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scored import sample_entry, score_transcripts
from harness.reports.report import write_reports
from tests.reports.test_report import ARITHMETIC_SCENARIO, sample

BARE = '{"name": "get_time", "arguments": {}}'   # a call attempt where none is due: fails every check now


@pytest.mark.parametrize("field", ["verdicts", "recorded_verdicts"])   # as older records and newer ones hold it
def test_a_sample_stored_as_passed_that_fails_now_is_reported_failed(tmp_path, field):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    (results / "transcripts").mkdir(parents=True)
    records = [{**sample(scenario, 0, BARE), field: {"passed": True, "right_tool": True}},
               {**sample(scenario, 1, "17 times 3 is 51."), field: {"passed": True}}]
    path = results / "transcripts" / "m1.jsonl"
    path.write_text("".join(json.dumps({"schema": 1, **r}) + "\n" for r in records))

    entries = [sample_entry(*kept) for kept in score_transcripts([path], {scenario.name: scenario}).samples]
    assert [e["verdicts"]["all_checks"] for e in entries] == [False, True]

    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text(encoding="utf-8")
    assert "1/2 50% [9–91]" in summary and "2/2" not in summary
    assert ("1 sample(s) score differently now than the verdict their run recorded (1 recorded as passed now "
            "fail)") in summary
    page = (results / "m1.md").read_text(encoding="utf-8")
    assert "- 1 sample(s) score differently now than the verdict their run recorded" in page
    html = (results / "report.html").read_text(encoding="utf-8")
    assert "1 sample(s) score differently now than the verdict their run recorded" in html
    # The transcript itself is left as it was written.
    assert [json.loads(line)[field]["passed"] for line in path.read_text().splitlines()] == [True, True]
