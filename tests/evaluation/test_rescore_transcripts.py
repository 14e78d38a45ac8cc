"""tools/rescore_transcripts.py: no committed sample record stores a verdict current scoring contradicts; the tool
replaces only that block (recording its run in it), never a reply, and refuses a line it cannot write back byte
for byte. The reports count current scoring whatever a record stores, and still say where the run's own verdict
differs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scoring import score_sample
from harness.storage.records import SampleRecord
from harness.storage.transcript_writer import encode_line
from harness.reports.report import write_reports
from tests.reports.test_report import ARITHMETIC_SCENARIO, sample

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import rescore_transcripts as tool  # noqa: E402

BARE = '{"name": "get_time", "arguments": {}}'   # a call attempt where none is due: fails every check now


def test_no_committed_record_stores_a_verdict_current_scoring_contradicts():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "rescore_transcripts.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    counted = [line for line in done.stdout.splitlines() if line.endswith("record(s) rescored")]
    assert counted and all(": 0 record(s)" in line for line in counted), done.stdout


@pytest.fixture
def folder(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(scenarios)
    return tmp_path, scenarios, scenario


def _now(scenario, raw):
    return json.loads(json.dumps(score_sample(scenario, SampleRecord.from_json(raw))))


@pytest.mark.parametrize("field", ["verdicts", "recorded_verdicts"])   # as older records and newer ones hold it
def test_a_contradicted_block_is_rescored_and_nothing_else_in_the_line_moves(folder, field):
    tmp_path, scenarios, scenario = folder
    wrong = {"schema": 1, **sample(scenario, 0, BARE), field: {"passed": True, "right_tool": True}}
    right = {"schema": 1, **sample(scenario, 1, "17 times 3 is 51.")}
    right[field] = _now(scenario, right)
    # A block older than some verdict scoring gives now, holding nothing it contradicts: left alone.
    partial = {"schema": 1, **sample(scenario, 2, "17 times 3 is 51."), field: {"passed": True}}
    lines = [encode_line(r) for r in (wrong, right, partial)]
    path = tmp_path / "m1.jsonl"
    path.write_bytes(b"".join(lines))

    text, changed = tool.rescore(path, tool.scenario_lookup(scenarios), "2026-12-03")
    assert changed == 1
    new = text.splitlines(keepends=True)
    assert new[1:] == lines[1:]
    rescored = json.loads(new[0])
    assert {k: v for k, v in rescored.items() if k != field} == {k: v for k, v in wrong.items() if k != field}
    block = rescored[field]
    assert block["passed"] is False and block["right_tool"] is False
    assert block["rescored"] == {"by": "tools/rescore_transcripts.py", "harness": "0.1.0", "on": "2026-12-03",
                                 "run_passed": True}
    assert {k: v for k, v in block.items() if k != "rescored"} == _now(scenario, wrong)

    # Again: nothing left to do, and the run's own verdict is kept through later rescorings.
    path.write_bytes(text)
    assert tool.rescore(path, tool.scenario_lookup(scenarios), "2027-01-01") == (text, 0)
    block["passed"] = True        # as if scoring changed once more
    path.write_bytes(encode_line(rescored) + b"".join(lines[1:]))
    again = json.loads(tool.rescore(path, tool.scenario_lookup(scenarios), "2027-01-01")[0].splitlines()[0])
    assert again[field]["rescored"]["run_passed"] is True and again[field]["rescored"]["on"] == "2027-01-01"


def test_a_line_that_would_not_come_back_byte_for_byte_is_refused(folder):
    tmp_path, scenarios, scenario = folder
    path = tmp_path / "m1.jsonl"
    original = json.dumps({"schema": 1, **sample(scenario, 0, BARE), "verdicts": {"passed": True}}, indent=None)
    path.write_text(original + "\n", encoding="utf-8")    # json.dumps' spaces: not how a run writes a line
    with pytest.raises(SystemExit, match="byte for byte"):
        tool.rescore(path, tool.scenario_lookup(scenarios), "2026-12-03")
    assert path.read_text(encoding="utf-8") == original + "\n"


def test_the_reports_count_current_scoring_and_say_where_the_run_recorded_otherwise(folder):
    tmp_path, scenarios, scenario = folder
    results = tmp_path / "results"
    (results / "transcripts").mkdir(parents=True)
    wrong = {"schema": 1, **sample(scenario, 0, BARE), "verdicts": {"passed": True}}
    path = results / "transcripts" / "m1.jsonl"
    path.write_bytes(encode_line(wrong))
    text, _ = tool.rescore(path, tool.scenario_lookup(scenarios), "2026-12-03")
    path.write_bytes(text)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text(encoding="utf-8")
    assert "0/1 0%" in summary
    # The stored block now agrees with scoring; the run's own verdict (passed) still differs, and is said.
    assert "1 sample(s) score differently now than the verdict their run recorded (1 recorded as passed" in summary
    assert "`rescored.run_passed`" in summary
