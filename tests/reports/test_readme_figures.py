"""README.md's "What it found" quotes results/: every figure there stands between markers that
tools/readme_figures.py writes from results/ (harness.suites.readme_figures, the reports' own counting), and
this test fails when one differs from what results/ gives or a number stands outside a marker."""

import json
from pathlib import Path

import pytest

from harness.backends import runtimes
from harness.storage.results import ResultsDir
from harness.core.errors import ReadmeFiguresError
from harness.suites.readme_figures import conformance_figures, figures, fill, problems, runtime_figures

ROOT = Path(__file__).resolve().parents[2]


def test_every_figure_in_the_readme_is_what_results_gives():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert problems(text, figures(ROOT / "results")) == [], "run python tools/readme_figures.py"


SECTION = """# x

## What it found

1. **Finding.** Of <!-- fig templates -->73<!-- /fig --> templates, {rest}

## Read more

Not checked: 42 and two.
"""


def test_a_figure_that_differs_and_a_number_outside_a_marker_are_named():
    assert problems(SECTION.format(rest="all read."), {"templates": "73"}) == []
    assert problems(SECTION.format(rest="all read."), {"templates": "74"}) == [
        "templates: README says '73', results/ gives '74'"]
    for unchecked, number in (("61 read.", "6"), ("three read.", "three"), ("Both read.", "Both")):
        found = problems(SECTION.format(rest=unchecked), {"templates": "73"})
        assert found and all("outside a figure marker" in f for f in found) and number in found[0], found
    unknown = SECTION.format(rest="<!-- fig detected -->61<!-- /fig --> read.")
    assert problems(unknown, {"templates": "73"}) == ["unknown figure 'detected'"]


def test_fill_rewrites_the_marked_values_of_the_section_only():
    text = SECTION.format(rest="all read.") + "<!-- fig templates -->73<!-- /fig -->\n"
    filled = fill(text, {"templates": "74"})
    assert filled.count("<!-- fig templates -->74<!-- /fig -->") == 1 and filled.endswith(
        "<!-- fig templates -->73<!-- /fig -->\n")
    assert "Not checked: 42 and two." in filled
    with pytest.raises(ReadmeFiguresError, match="unknown figure marker"):
        fill(SECTION.format(rest="<!-- fig detected -->61<!-- /fig -->"), {"templates": "74"})
    with pytest.raises(ReadmeFiguresError, match="no '## What it found' section"):
        fill("# x\n", {})


def _conformance(tmp_path, violations: int) -> ResultsDir:
    results = ResultsDir(tmp_path)
    summary = {"templates": 2, "detected": 1, "declared": 0, "walls": 1, "no_tools": 0, "matrix_cases": 1200,
               "matrix_violations": violations}
    templates = [{"id": "b", "status": "detected", "findings": [{"name": "tools-in-system-prompt"}]},
                 {"id": "a", "status": "wall", "findings": []}]
    results.conformance[1].write_text(json.dumps({"summary": summary, "templates": templates}), encoding="utf-8")
    return results


def test_conformance_figures_come_from_conformance_json_and_a_violation_stops_finding_two(tmp_path):
    got = conformance_figures(_conformance(tmp_path, 0))
    assert (got["matrix-cases"], got["walls"], got["wall-ids"], got["tools-in-prompt"], got["declared-ids"]) == (
        "1,200", "1", "`a`", "`b`", "")
    with pytest.raises(ReadmeFiguresError, match="finding 2 no longer holds"):
        conformance_figures(_conformance(tmp_path, 1))
    (tmp_path / "conformance.json").write_text("{", encoding="utf-8")
    with pytest.raises(ReadmeFiguresError, match="conformance.json: not the conformance report"):
        conformance_figures(ResultsDir(tmp_path))


def test_the_runtime_figures_need_one_runtime_of_each_server(tmp_path):
    folder = tmp_path / "runtime-conformance"
    folder.mkdir()
    name = f"{runtimes.get('llama-server').record_name}.jsonl"
    head = (ROOT / "results" / "runtime-conformance" / name).read_text(encoding="utf-8").splitlines()[:3]
    (folder / name).write_text("\n".join(head) + "\n", encoding="utf-8")
    with pytest.raises(ReadmeFiguresError, match="one llama-cpp-python runtime; the records hold 0"):
        runtime_figures(ResultsDir(tmp_path))


def _served(tmp_path, forced_calls: bool, auto_calls: int = 0, stream_calls: bool = True) -> ResultsDir:
    """Deployment records of finding 1's model on four runtimes: under auto each leaves its call in content (but
    `auto_calls` of a's answers carry tool_calls); under required a returns calls (or not: `forced_calls`), b
    ignores it, c errors (no answer, counted nowhere), and d returns calls streamed only (or not:
    `stream_calls`)."""
    from harness.suites.deployment.records import DeploymentRecord
    from harness.suites.readme_figures import FINDING_MODEL

    call = {"name": "f", "arguments": "{}"}

    def answer(calls: bool, error=None):
        if error:
            return {"status": 400, "error": error}
        return {"status": 200, "content": None if calls else "```json", "tool_calls": [call] if calls else []}

    def one(runtime, n, choice, plain, stream=None, labels=()):
        return DeploymentRecord(runtime=runtime, server="llama-server", model={"id": FINDING_MODEL, "sha256": None},
                                template={"id": "t", "sha256": "b" * 64}, family="hermes",
                                case={"id": f"c{n}", "category": "simple_python", "hash": "h"}, tool_choice=choice,
                                labels=list(labels), plain=plain, stream=stream or plain)
    left = ["call-left-in-content"]
    records = [one("a", n, "auto", answer(n < auto_calls), labels=[] if n < auto_calls else left) for n in range(10)]
    records += [one("b", n, "auto", answer(False), labels=left) for n in range(10)]
    records += [one("a", n, "required", answer(forced_calls)) for n in range(10)]
    records += [one("b", n, "required", answer(False), labels=["required-ignored", *left]) for n in range(10)]
    records += [one("c", n, choice, answer(False, error="HTTP 400: no parser"), labels=["runtime-error"])
                for n in range(10) for choice in ("auto", "required")]
    records += [one("d", n, choice, answer(False), answer(stream_calls), labels=left)
                for n in range(10) for choice in ("auto", "required")]
    folder = tmp_path / "deployment"
    folder.mkdir(exist_ok=True)
    (folder / f"{FINDING_MODEL}.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records),
                                                   encoding="utf-8")
    return ResultsDir(tmp_path)


def test_the_deployment_figures_count_answers_given_and_stop_when_a_claim_of_finding_four_fails(tmp_path):
    from harness.suites.readme_figures import deployment_figures

    got = deployment_figures(_served(tmp_path, forced_calls=True))
    assert got["deploy-auto-calls"] == "0/30" and got["deploy-runtimes"] == "3" and got["deploy-auto-left"] == "30"
    assert (got["deploy-forcing"], got["deploy-forced"], got["deploy-others"], got["deploy-ignored"]) == (
        "`a`", "10/10", "2", "20/20")
    assert (got["deploy-stream-runtimes"], got["deploy-stream-calls"]) == ("`d`", "20/20")
    with pytest.raises(ReadmeFiguresError, match="finding 4 no longer holds .under required"):
        deployment_figures(_served(tmp_path, forced_calls=False))
    with pytest.raises(ReadmeFiguresError, match="finding 4 no longer holds .served under tool_choice auto"):
        deployment_figures(_served(tmp_path, forced_calls=True, auto_calls=2))
    with pytest.raises(ReadmeFiguresError, match="finding 4 no longer holds .some runtime returns calls in most "
                                                  "streamed"):
        deployment_figures(_served(tmp_path, forced_calls=True, stream_calls=False))
