"""summary.md answers "which model, which mode" by its stated rule and lists each model's top deviations; samples
of one model id served by a runtime stand in rows of their own beside the in-process ones."""

import json

from harness.evaluation.scenarios import load_scenarios
from harness.reports.report import write_reports
from harness.reports.tables import collect
from tests.reports.test_report import ARITHMETIC_SCENARIO, sample
from tests.reports.test_report_malformed import MODEL_RECORD

GOOD, BARE = "17 times 3 is 51.", '{"name": "get_time", "arguments": {}}'


def _write(results, name: str, records: list) -> None:
    folder = results / "transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.jsonl").write_text("".join(json.dumps({"schema": 1, **r}) + "\n" for r in records))


def _model(model_id: str, sha256: str, runtime=None) -> dict:
    record = {**MODEL_RECORD, "model": {"id": model_id, "sha256": sha256, "file": None}}
    return {**record, "runtime": runtime} if runtime else record


def _samples(scenario, model_id, replies, sha256="f" * 64, mode="native"):
    out = []
    for i, reply in enumerate(replies):
        record = {**sample(scenario, i, reply, model=model_id), "mode": mode}
        record["model"] = {"id": model_id, "sha256": sha256}
        out.append(record)
    return out


def _tree(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    # m1 in process: 2 of 4 pass natively, 4 of 4 under the grammar; m2: 1 of 1 (a rate over one sample).
    _write(results, "m1", [_model("m1", "f" * 64), *_samples(scenario, "m1", [GOOD, BARE, GOOD, BARE]),
                           *_samples(scenario, "m1", [GOOD] * 4, mode="grammar")])
    _write(results, "m2", [_model("m2", "e" * 64), *_samples(scenario, "m2", [GOOD])])
    # m1 again, served by llama-server under the same id (LocalServer's alias is the file's stem): 0 of 3.
    _write(results, "m1-served", [_model("m1", "served", {"name": "llama-server", "endpoints": ["http://x"],
                                                            "served_model": "m1"}),
                                  *_samples(scenario, "m1", [BARE] * 3, sha256="served")])
    return scenarios, results


def test_the_verdict_ranks_by_the_lower_end_of_the_interval_and_names_its_rule(tmp_path):
    scenarios, results = _tree(tmp_path)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    verdict = summary[summary.index("## Verdict: which model, which mode"):summary.index("## Top deviations")]
    assert "Ranked by the lower end of the Wilson 95% interval of *all checks*" in verdict
    # 4/4 (lower end 51%) ranks above m2's 1/1 (21%), though both are 100%.
    assert "**m1 (in process), grammar mode**: all checks 4/4 100% [51–100]" in verdict
    table = [[c.strip() for c in line.strip("|").split("|")] for line in verdict.splitlines() if line.startswith("|")]
    assert [row[1:4] for row in table if row[0].isdigit()] == [
        ["m1", "in process", "grammar"], ["m2", "in process", "native"], ["m1", "in process", "native"],
        ["m1", "llama-server", "native"]]


def test_top_deviations_are_listed_per_model_and_runtime(tmp_path):
    scenarios, results = _tree(tmp_path)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    top = summary[summary.index("## Top deviations per model"):summary.index("## Models and modes")]
    assert "- **m1 (llama-server)** (3 samples): deviations `bare-json` ×3" in top
    assert "- **m1 (in process)** (8 samples): deviations `bare-json` ×2" in top
    assert "- **m2 (in process)** (1 samples): deviations none" in top


def test_served_and_in_process_samples_of_one_id_stay_apart(tmp_path):
    scenarios, results = _tree(tmp_path)
    frame = collect(results, scenarios).samples
    assert sorted(set(zip(frame["model"], frame["runtime"]))) == [("m1", "in process"), ("m1", "llama-server"),
                                                                   ("m2", "in process")]
    rates = write_reports(results, scenarios, plot=False)["models"]
    assert rates["m1"]["arithmetic"]["samples"] == 4 and rates["m1 @llama-server"]["arithmetic"]["samples"] == 3
    summary = (results / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith("| m1 ") and "| native " in line]
    assert len({line.split("|")[2].strip() for line in rows}) == 2     # the runtime column keeps them apart
    assert any("| llama-server " in line and "0/3" in line for line in rows)
    page = (results / "m1.md").read_text()
    assert "- Model file sha256: `" + "f" * 64 + "`" in page and "- Served by llama-server at http://x" in page
    for runtime in ("in process", "llama-server"):
        assert f"## Live, by scenario and mode ({runtime})" in page
