"""Where `harness report` writes: a record's model id is data, never a path (`../../README`, an absolute id and a
256-byte id each get a file of their own inside the results folder); a results folder that is missing or cannot
be written is a clear error; another folder's report holds only its own transcripts, and a run's hint names it."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from harness.suites.command_line import report_hint
from harness.storage.results import ResultsDir, file_stem
from harness.evaluation.scenario_files import load_scenarios
from harness.reports.report import write_reports
from tests.pins.test_fetch import ROOT
from tests.reports.test_report import ARITHMETIC_SCENARIO, sample
from tests.reports.test_report_malformed import MODEL_RECORD

SMOL = "smollm2-135m-instruct-q4_1"


def _transcript(results, scenario, model_id: str, name: str = "m1") -> None:
    folder = results / "transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    model = {**MODEL_RECORD, "model": {**MODEL_RECORD["model"], "id": model_id}}
    lines = [model, {**sample(scenario, 0, "17 times 3 is 51.", model=model_id)}]
    (folder / f"{name}.jsonl").write_text("".join(json.dumps({"schema": 1, **r}) + "\n" for r in lines))


def _files(folder) -> set:
    return {p for p in folder.rglob("*") if p.is_file()}


def _smol(results):
    """A committed transcript of the project's own scenarios, in a folder of its own."""
    (results / "transcripts").mkdir(parents=True)
    shutil.copy(ROOT / "results" / "transcripts" / f"{SMOL}.jsonl", results / "transcripts")


@pytest.fixture
def scenarios(tmp_path):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    return folder


def test_model_ids_that_look_like_paths_stay_inside_the_results_folder(tmp_path, scenarios):
    (scenario,) = load_scenarios(scenarios)
    outside = tmp_path / "elsewhere"
    ids = ["../../README", "../README", str(outside / "x"), "a" * 256, "sub/dir", ".hidden", "plain-id_1.0"]
    results = tmp_path / "deep" / "results"
    for i, model_id in enumerate(ids):
        _transcript(results, scenario, model_id, name=f"t{i}")
    before = _files(tmp_path) - _files(results)
    out = write_reports(results, scenarios, plot=False)
    assert _files(tmp_path) - _files(results) == before           # nothing written beside the folder
    tables = [p for p in out["written"] if p.endswith(".md") and not p.endswith("summary.md")]
    assert len(tables) == len(ids) and all(os.path.dirname(p) == str(results) for p in tables)
    assert str(results / "plain-id_1.0.md") in tables                 # a plain id keeps its name
    assert sorted(_heading(p) for p in tables) == sorted(ids)         # one table per id, none overwritten


def _heading(path: str) -> str:
    with open(path, encoding="utf-8") as table:
        return table.readline().removeprefix("# ").rstrip("\n")


def test_file_stems_are_plain_and_never_shared():
    names = ["m", "m~", "../m", "/m", "m/", "M", "a" * 255, "a" * 256, "ü", "u", "x\ny", "\ud800"]
    stems = [file_stem(n) for n in names]
    assert len(set(stems)) == len(names)
    assert all("/" not in s and not s.startswith(".") and 0 < len(s) <= 100 for s in stems)
    assert file_stem("qwen2.5-0.5b-instruct-q4_k_m") == "qwen2.5-0.5b-instruct-q4_k_m"


def _report(root, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HARNESS_"))}
    env.update(PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "harness", "report", "--no-plot", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)


def test_a_missing_results_folder_is_a_clear_error(tmp_path):
    done = _report(tmp_path, "--results-dir", tmp_path / "nowhere")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'nowhere'}: no such folder" in done.stderr
    assert not (tmp_path / "nowhere").exists()


def test_a_results_folder_that_cannot_be_written_is_a_clear_error(tmp_path):
    _smol(tmp_path / "results")
    (tmp_path / "results" / "summary.md").mkdir()   # in the way of a report, for any user, root included
    done = _report(tmp_path, "--results-dir", tmp_path / "results")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"cannot write the reports into {tmp_path / 'results'}" in done.stderr and "summary.md" in done.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_results_folder_is_a_clear_error(tmp_path):
    _smol(tmp_path / "results")
    os.chmod(tmp_path / "results", 0o555)
    try:
        done = _report(tmp_path, "--results-dir", tmp_path / "results")
    finally:
        os.chmod(tmp_path / "results", 0o755)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "Permission denied" in done.stderr


def test_another_folder_reports_only_its_transcripts_and_says_where_from(tmp_path):
    _smol(tmp_path / "results")
    done = _report(tmp_path, "--results-dir", tmp_path / "results")
    assert done.returncode == 0, done.stderr
    # The seed ADR's replays (the project's scenarios/replays) belong to the project's results/ alone.
    assert {p.name for p in (tmp_path / "results").glob("*.md")} == {f"{SMOL}.md", "summary.md"}
    summary = (tmp_path / "results" / "summary.md").read_text()
    assert f"from {tmp_path / 'results'}/transcripts/*.jsonl" in summary
    assert "results/transcripts" not in summary.replace(str(tmp_path / "results"), "DIR")
    assert "Quoted by the seed ADR" not in summary
    assert "seed ADR" not in (tmp_path / "results" / "report.html").read_text()


def test_the_next_step_hint_keeps_the_results_folder(tmp_path):
    assert report_hint(ResultsDir.at()) == "next: harness report"
    hint = report_hint(ResultsDir.at(tmp_path / "my results"))
    assert hint == f"next: harness report --results-dir '{tmp_path}/my results'"
