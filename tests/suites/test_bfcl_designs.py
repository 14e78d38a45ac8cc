"""results/grammar-designs.md: each grammar design's BFCL rows beside the default design's, per model, over the
cases every design ran; written by `harness report` only when the folder holds a design study."""

import pytest

from harness.suites.bfcl.cases import load_suite
from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
from harness.storage.results import ResultsDir
from harness.storage.transcript_writer import TranscriptWriter
from harness.suites.bfcl.judging import valid_verdict
from harness.suites.bfcl.page import judge_folder
from harness.suites.bfcl.designs import designs_markdown
from harness.grammar.plan import DEFAULT_VARIANT as DEFAULT    # the main folder's rows are the default design's

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
CALL = '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'
SPELLED = '{"name ": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}'


def _write(results: ResultsDir, rows, carried=None):
    suite = load_suite(["simple_python", "irrelevance"])
    path = results.bfcl_transcript(MODEL)
    path.parent.mkdir(parents=True)
    with TranscriptWriter(path) as writer:
        for case_id, mode, reply, refused in rows:
            scenario = suite.cases[case_id].scenario
            writer.append(SampleRecord(
                ModelRef(MODEL, "f" * 64), ScenarioRef(scenario.name, scenario.hash), 0, 0, mode, "hermes",
                turns=[{"user": scenario.turns[0].user, "steps": [
                    {"reply": reply, "prompt_tail": "", "grammar_refused": refused, "completion_tokens": 20}]}],
                seconds=3.0, carried=carried))


def test_the_designs_page_compares_each_design_over_the_same_cases(tmp_path):
    main = ResultsDir(tmp_path / "results")
    # The default design (the main folder's grammar rows) walks around its list: "name " with a blank, no call.
    _write(main, [("simple_python_0", "native", SPELLED, 0), ("simple_python_0", "grammar", SPELLED, 2),
                  ("irrelevance_1", "grammar", SPELLED.replace("calculate_triangle_area", "math.sum"),
                   1), ("irrelevance_2", "grammar", "No tool fits.", 0)])
    no_brace = ResultsDir(main.designs / "no-brace")
    _write(no_brace, [("simple_python_0", "grammar", CALL, 3), ("irrelevance_1", "grammar", "No tool fits.", 4)],
           carried={"from": "refusal-list", "setup": "0" * 16})
    warnings = []
    page = designs_markdown(main, judge_folder(main, warnings), lambda f: judge_folder(f, warnings), valid_verdict)
    rows = {line.split(" | ")[1]: line for line in page.splitlines() if line.startswith(f"| {MODEL} |")}
    assert set(rows) == {DEFAULT, "no-brace"}
    # irrelevance_2 was run by one design only: left out, and said so.
    assert "| 1 / 1 |" in rows[DEFAULT] and "| 1 / 1 |" in rows["no-brace"]
    assert "1 case(s) run by some designs only, left out" in page
    # Samples taken over from a design with the same prompt and grammar are said to be so, with their count.
    assert f"- {MODEL}: 2 of `no-brace`'s samples (BFCL and scenarios, grammar and fallback) were carried from " \
           "`refusal-list`" in page
    # The spelled-off call to the offered math.sum is an attempt: no abstention under our rule; the no-brace
    # answer abstains.
    assert rows[DEFAULT].split(" | ")[6].startswith("0/1 0%")
    assert rows["no-brace"].split(" | ")[6].startswith("1/1 100%")
    assert "| 2/2 steps |" in rows[DEFAULT] and "| 2/2 steps |" in rows["no-brace"]
    # The goal on these cases: native's lenient reading passes the call (1/1); the default's strict 0/1 is below
    # half of it, no-brace's 1/1 meets it (native ran no no-call case here: nothing to fall below).
    assert rows[DEFAULT].split(" | ")[5].startswith("1/1 100%")
    assert rows[DEFAULT].split(" | ")[8] == "calls below half" and rows["no-brace"].split(" | ")[8] == "met"
    assert page.splitlines()[0] == "# Grammar designs side by side"


def test_no_design_study_no_page(tmp_path):
    main = ResultsDir(tmp_path / "results")
    _write(main, [("simple_python_0", "grammar", CALL, 0)])
    assert designs_markdown(main, judge_folder(main, []), lambda f: judge_folder(f, []), valid_verdict) is None


FENCED = "```json\n" + CALL.split("\n")[1] + "\n```"


class AnyCall:
    """BFCL's checker's part, standing in: a reply is right when calls reach it. Which calls reach the checker, in
    which column, is what the page decides and what is tested here."""

    def judge(self, category, functions, calls, answer):
        return {"valid": bool(calls), "error_type": None if calls else "no calls", "errors": []}


def _judged(folder):
    from harness.suites.bfcl.judging import Judged, judge, read_outcomes

    outcomes, suite, _ = read_outcomes(folder, [])
    return Judged(outcomes, judge(outcomes, AnyCall(), suite), suite)


def _write_steps(results: ResultsDir, rows):
    suite = load_suite(["simple_python", "irrelevance"])
    path = results.bfcl_transcript(MODEL)
    path.parent.mkdir(parents=True)
    with TranscriptWriter(path) as writer:
        for case_id, mode, step in rows:
            scenario = suite.cases[case_id].scenario
            writer.append(SampleRecord(
                ModelRef(MODEL, "f" * 64), ScenarioRef(scenario.name, scenario.hash), 0, 0, mode, "hermes",
                turns=[{"user": scenario.turns[0].user, "steps": [
                    {"prompt_tail": "", "completion_tokens": 20, "grammar_refused": 0, **step}]}], seconds=3.0))


def test_lazy_trigger_counts_calls_held_in_another_spelling_apart_from_strict_ones(tmp_path):
    """A call the lazy grammar held from a fence is a hermes near miss: the strict columns (here and in bfcl.md)
    do not count it; the design page's own column gives BFCL's checker on it. The same fenced reply written
    without the lazy grammar holding it (refusal-list) is no held call."""
    from harness.suites.bfcl.page import rows as bfcl_rows

    main = ResultsDir(tmp_path / "results")
    _write_steps(main, [("simple_python_0", "native", {"reply": FENCED}),
                        ("simple_python_0", "grammar", {"reply": FENCED, "grammar": "auto"}),
                        ("irrelevance_1", "grammar", {"reply": "No tool fits.", "grammar": "auto"})])
    lazy = ResultsDir(main.designs / "lazy-trigger")
    held = {"reply": FENCED, "grammar": "auto", "grammar_from": 0, "grammar_trigger": "```json", "grammar_held": True}
    _write_steps(lazy, [("simple_python_0", "grammar", held),
                        ("irrelevance_1", "grammar", {"reply": "No tool fits.", "grammar": "auto",
                                                      "grammar_from": None, "grammar_trigger": None,
                                                      "grammar_held": False})])
    page = designs_markdown(main, _judged(main), _judged, valid_verdict)
    cells = {line.split(" | ")[1]: line.split(" | ") for line in page.splitlines() if line.startswith(f"| {MODEL} |")}
    assert cells["lazy-trigger"][3].startswith("0/1 0%")                     # strict: the family's format only
    assert cells["lazy-trigger"][4].startswith("1/1 100%") and cells["lazy-trigger"][4].endswith("(1 held)")
    assert cells[DEFAULT][3].startswith("0/1 0%") and cells[DEFAULT][4] == "–"
    assert cells["lazy-trigger"][6].startswith("1/1 100%")                   # the answer abstains
    judged = _judged(lazy)
    (row,) = [r for r in bfcl_rows(judged.outcomes, judged.verdicts, judged.suite) if r["category"] == "simple_python"]
    assert row["BFCL, strict calls"].startswith("0/1") and row["strict call parsed"].startswith("0/1")
    assert row["BFCL, lenient reading"].startswith("1/1")


def test_the_designs_page_sets_the_scenarios_of_each_design_side_by_side(tmp_path):
    """A study folder's transcripts (the YAML scenarios under its design) beside the main folder's grammar
    samples, over the samples every design ran, with native mode's same samples as the reference."""
    from harness.evaluation.scenario_files import load_scenarios

    greeting = next(s for s in load_scenarios() if s.name == "greeting")

    def write(results, rows):
        path = results.transcript(MODEL)
        path.parent.mkdir(parents=True)
        with TranscriptWriter(path) as writer:
            for sample, mode, family, reply in rows:
                writer.append(SampleRecord(
                    ModelRef(MODEL, "f" * 64), ScenarioRef(greeting.name, greeting.hash), sample, sample, mode,
                    family, turns=[{"user": greeting.turns[0].user, "steps": [{"reply": reply, "prompt_tail": ""}]}]))

    main = ResultsDir(tmp_path / "results")
    write(main, [(0, "native", "hermes", "Hello! I am well, thanks."),
                 (0, "grammar", "hermes", "Hello there, doing well!"),
                 (1, "grammar", "hermes", "Hello again!")])          # run by the default design only: left out
    write(ResultsDir(main.designs / "lazy-trigger"),
          [(0, "grammar", "hermes", '<tool_call>\n{"name": "search", "arguments": {"query": "hello"}}\n</tool_call>')])
    warnings = []
    page = designs_markdown(main, judge_folder(main, warnings), lambda f: judge_folder(f, warnings), valid_verdict)
    section = page.split("## The YAML scenarios")[1]
    rows = {line.split(" | ")[1]: line.split(" | ") for line in section.splitlines() if line.startswith(f"| {MODEL} |")}
    assert set(rows) == {DEFAULT, "lazy-trigger"}
    assert rows[DEFAULT][2] == "0 / 1" and rows["lazy-trigger"][2] == "0 / 1"
    assert rows[DEFAULT][7].startswith("1/1 100%") and rows["lazy-trigger"][7].startswith("0/1 0%")
    assert rows["lazy-trigger"][10].startswith("1/1 100%")       # native's no call made on the same sample
    assert rows[DEFAULT][5] == "–"          # no call due: whether an answer used a result does not apply


@pytest.mark.parametrize("strict,lenient,abstained,native,said", [
    ([True, False], [True, True], [True], [True], "met"),                     # 1 of 2 is half of 2
    ([False, False], [True, False], [True], [False], "calls below half"),
    ([True, True], [True, True], [False], [True], "no-call below native"),
    ([False], [True], [False], [True], "calls below half, no-call below native"),
    ([False], [False], [True], [True], "–"),                                  # native knows nothing here
    (None, [True], [True], [True], "not judged"),
])
def test_the_goal_column_says_which_half_fails(strict, lenient, abstained, native, said):
    from harness.suites.bfcl.designs import _goal

    assert _goal(strict, lenient, abstained, native) == said
