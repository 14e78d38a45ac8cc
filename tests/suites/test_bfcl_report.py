"""results/bfcl.md from a small hand-made BFCL transcript: BFCL's checker on the strict and the lenient calls,
our checks beside it, irrelevance by both rules, the published figures, and nothing at all without records."""

import sys
from pathlib import Path

import pytest

from harness.suites.bfcl.cases import load_suite
from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
from harness.storage.results import ResultsDir
from harness.storage.transcript_writer import TranscriptWriter
from harness.suites.bfcl.page import judge_folder
from harness.suites.bfcl.page import headline, write_bfcl
from harness import suites
from harness.reports.report import write_reports
from tests.requirements import bfcl_checker_python
from tests.reports.test_report import setup

MODEL = "qwen3-0.6b-q8_0"       # a model BFCL's leaderboard has a row for
CALL = '<tool_call>\n{{"name": "{}", "arguments": {}}}\n</tool_call>'
REPLIES = [  # (case, mode, reply)
    ("simple_python_0", "native", CALL.format("calculate_triangle_area", '{"base": 10, "height": 5}')),
    ("simple_python_1", "native", '```json\n{"name": "math.factorial", "arguments": {"number": 5}}\n```'),
    ("simple_python_2", "native", CALL.format("math.hypot", '{"x": 3, "y": 5}')),
    ("irrelevance_0", "native", '```json\n{"name": "determine_body_mass_index", "arguments": {}}\n```'),
    ("irrelevance_1", "native", "I cannot help with that using these tools."),
    ("simple_python_0", "grammar", CALL.format("calculate_triangle_area", '{"base": 10, "height": 5}')),
]


@pytest.fixture(scope="module")
def checker_python():
    return bfcl_checker_python()


def _results(tmp_path, stale: bool = False) -> ResultsDir:
    suite = load_suite(["simple_python", "irrelevance"])
    results = ResultsDir(tmp_path / "results")
    path = results.bfcl_transcript(MODEL)
    path.parent.mkdir(parents=True)
    with TranscriptWriter(path) as writer:
        for case_id, mode, reply in REPLIES + ([("simple_python_3", "native", "x")] if stale else []):
            scenario = suite.cases[case_id].scenario
            digest = "0" * 64 if case_id == "simple_python_3" else scenario.hash
            writer.append(SampleRecord(ModelRef(MODEL, "f" * 64), ScenarioRef(scenario.name, digest), 0, 0, mode,
                                       "hermes", turns=[{"user": scenario.turns[0].user,
                                                         "steps": [{"reply": reply, "prompt_tail": ""}]}],
                                       seconds=2.0))
        # A sample the template stopped: no abstention by either rule.
        scenario = suite.cases["irrelevance_2"].scenario
        writer.append(SampleRecord(ModelRef(MODEL, "f" * 64), ScenarioRef(scenario.name, scenario.hash), 0, 0,
                                   "native", "hermes", turns=[{"user": scenario.turns[0].user, "steps": []}],
                                   error="template error: raised", seconds=0.5))
    return results


def _row(text: str, mode: str, category: str) -> list:
    line = next(l for l in text.splitlines() if l.startswith(f"| {MODEL} | {mode} | {category} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_table_judges_strict_and_lenient_calls_with_bfcls_checker(tmp_path, checker_python):
    results = _results(tmp_path, stale=True)
    warnings = []
    assert write_bfcl(results, warnings) == [str(results.bfcl_report)]
    text = results.bfcl_report.read_text(encoding="utf-8")
    # model, mode, category, cases, BFCL strict, BFCL lenient, strict parsed, ours, lenient found, BFCL's failure
    # kinds (lenient), format failures, checker errors, stopped by an error, skipped, s a case
    simple = _row(text, "native", "simple_python")
    assert simple[3:] == ["3", "1/3 33% [6–79]", "2/3 67% [21–94]", "2/3 67% [21–94]", "–", "1",
                          "value_error:others ×1", "fenced-json ×1",
                          "0", "0", "0", "2.0"]
    irrelevance = _row(text, "native", "irrelevance")
    # BFCL: the fenced near miss is no decodable call, so an abstention; ours: a call was attempted.
    assert irrelevance[3:8] == ["3", "2/3 67% [21–94]", "1/3 33% [6–79]", "–", "1/3 33% [6–79]"]
    assert irrelevance[12] == "1"           # stopped by an error
    assert irrelevance[9] == "irrelevance_error:decoder_success ×1, stopped-by-error ×1"
    assert _row(text, "grammar", "simple_python")[4] == "1/1 100% [21–100]"
    assert "bfcl-eval 2026.3.23" in text and "`bfcl_eval.constants.model_config`" in text
    # The published figure of the same column (Python Simple AST, not the overall table's mean over three
    # languages), from the board it was read on; only categories run here have a row.
    assert (f"| {MODEL} | simple_python | 86.50 (Qwen3-0.6B (FC), board 2026-04-12) | native: 1/3 33% [6–79]; "
            "grammar: 1/1 100% [21–100] |") in text
    assert f"| {MODEL} | irrelevance | 82.50 (Qwen3-0.6B (FC), board 2026-04-12) |" in text
    assert "llama-3.2-1b" not in text.split("## Beside BFCL's published figures")[1]
    assert "- Board 2026-04-12: BFCL leaderboard v4 of 2026-04-12" in text
    assert any("1 BFCL record(s)" in w for w in warnings)      # the stale record is left out, and said


def test_without_the_checker_environment_our_checks_stand_and_bfcls_say_not_judged(tmp_path):
    results = _results(tmp_path)
    warnings = []
    write_bfcl(results, warnings, checker_python=Path(sys.executable))
    text = results.bfcl_report.read_text(encoding="utf-8")
    # Each cell BFCL's checker would fill names the command that builds its environment.
    not_judged = "not judged (`bash scripts/setup_bfcl.sh`)"
    assert _row(text, "native", "simple_python")[4:7] == [not_judged, not_judged, "2/3 67% [21–94]"]
    assert _row(text, "native", "simple_python")[9] == not_judged
    assert (f"| {MODEL} | simple_python | 86.50 (Qwen3-0.6B (FC), board 2026-04-12) | native: {not_judged}; "
            f"grammar: {not_judged} |") in text
    assert any("BFCL's checker was not run" in w and "setup_bfcl.sh" in w for w in warnings)


def test_a_results_folder_without_bfcl_records_gets_no_page(tmp_path):
    results = ResultsDir(tmp_path / "results")
    assert write_bfcl(results, []) == [] and not results.bfcl_report.exists()


def _bottom_line(summary: str) -> str:
    return summary[summary.index("## Bottom line"):summary.index("How the bottom line is reached")]


def test_the_bottom_line_ranks_bfcl_rows_only_against_rows_run_on_the_same_cases(tmp_path, checker_python):
    # The real path: `harness report` over a folder holding live transcripts and BFCL records.
    scenarios, results = setup(tmp_path)
    _results(tmp_path)
    write_reports(results, scenarios, plot=False, pages=[suites.get("bfcl").write_pages])
    line = next(l for l in _bottom_line((results / "summary.md").read_text()).splitlines() if "**BFCL" in l)
    # native ran 6 cases (3 of simple_python, 3 of irrelevance), grammar 1: each question apart (a row that
    # never called would otherwise rank on its abstentions), and within one, two groups, never one ranking.
    assert ("**BFCL, calls due**, ranked on *BFCL accuracy* (BFCL's own checker on the calls the strict parser "
            "read), over the same 3 cases (simple_python) in each of 1 row: **qwen3-0.6b-q8_0, native**: "
            "1/3 33% [6–79] (the only row).") in line
    assert ("**BFCL, calls due**, 1 row run on other cases (1 case in 1 category), ranked apart: "
            "**qwen3-0.6b-q8_0, grammar**: 1/1 100% [21–100] (the only row).") in line
    assert ("**BFCL, no call due**, ranked on *BFCL accuracy* (BFCL's own checker on the calls the strict parser "
            "read), over the same 3 cases (irrelevance) in each of 1 row: **qwen3-0.6b-q8_0, native**: "
            "2/3 67% [21–94] (the only row).") in line
    html = (results / "report.html").read_text(encoding="utf-8")
    assert "<strong>qwen3-0.6b-q8_0, native</strong>: 1/3 33% [6–79]" in html


def test_the_bfcl_line_says_not_judged_without_the_checker_and_no_runs_without_records(tmp_path):
    results = _results(tmp_path)
    judged = judge_folder(results, [], checker_python=Path(sys.executable))
    assert judged.verdicts is None
    assert headline(judged).startswith("**BFCL**: 7 cases recorded over 2 model × mode rows, not judged")
    assert "`bash scripts/setup_bfcl.sh` builds its environment" in headline(judged)
    empty = judge_folder(ResultsDir(tmp_path / "elsewhere"), [])
    assert headline(empty).startswith("**BFCL**: no BFCL runs in this folder")


@pytest.mark.parametrize("beside", ["symlink", "copy"])
def test_a_copy_or_a_link_of_a_bfcl_file_counts_nothing_twice(tmp_path, beside):
    """`<model> (1).jsonl` beside `<model>.jsonl` in bfcl/: each case's record counts once, a warning names both."""
    import shutil

    from harness.suites.bfcl.judging import read_outcomes

    results = _results(tmp_path)
    own = results.bfcl_transcript(MODEL)
    other = own.with_name(f"{own.stem} (1).jsonl")
    other.symlink_to(own.name) if beside == "symlink" else shutil.copyfile(own, other)
    warnings = []
    outcomes, _, _ = read_outcomes(results, warnings)
    assert len(outcomes) == own.read_text(encoding="utf-8").count('"kind":"sample"') == len(REPLIES) + 1
    assert any(str(own) in w and str(other) in w for w in warnings), warnings


def test_a_model_no_board_listed_says_so_and_a_siblings_figure_is_marked():
    from harness.suites.bfcl.published import published_cell

    assert published_cell("smollm2-135m-instruct-q4_1", "simple_python") == "never listed on a BFCL board"
    assert published_cell("qwen2.5-coder-0.5b-instruct-q4_k_m", "live_irrelevance") == (
        "53.29 (sibling Qwen2.5-0.5B-Instruct (FC) (this model never listed on a BFCL board), board 2025-04-25)")
    assert published_cell("llama-3.2-1b-instruct-q4_k_m", "simple_python").startswith("75.00 (")
