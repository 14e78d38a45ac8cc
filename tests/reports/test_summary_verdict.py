"""summary.md answers "which model, which mode" by its stated rule and lists each model's top deviations; samples
of one model id served by a runtime stand in rows of their own beside the in-process ones."""

import json

from harness.evaluation.scenario_files import load_scenarios
from harness.reports.report import write_reports
from harness.reports.tables import collect
from harness.storage.transcript_writer import TranscriptWriter
from tests.reports.test_report import ARITHMETIC_SCENARIO, TIME_SCENARIO, append, sample, setup
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


def _table(text: str, title: str) -> list:
    """The ranked rows (rank, model, runtime, mode, ...) of the table under a heading of the bottom line."""
    part = text[text.index(f"### {title}\n"):]
    part = part[:part.index("|\n\n") + 1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines()
            if line.startswith("|") and line.strip("|").split("|")[0].strip().isdigit()]


def test_rows_are_ranked_only_against_rows_run_on_the_same_cases(tmp_path):
    scenarios, results = _tree(tmp_path)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    bottom = summary[summary.index("## Bottom line"):summary.index("## What each scenario checks")]
    assert "Ranked by the lower end" not in bottom and "**Calls due**: no sample of this folder asks it." in bottom
    # m1 ran seeds 0-3 in process in two modes, m1 served seeds 0-2, m2 seed 0: three groups, never one ranking.
    assert [row[1:4] for row in _table(bottom, "No call due: ranked on all checks")] == [
        ["m1", "in process", "grammar"], ["m1", "in process", "native"]]
    assert [row[1:4] for row in _table(bottom, "No call due: ranked on all checks, rows run on other cases "
                                               "(3 cases (1 scenario × 3 samples))")] == [
        ["m1", "llama-server", "native"]]
    assert [row[1:4] for row in _table(bottom, "No call due: ranked on all checks, rows run on other cases "
                                               "(1 case (1 scenario × 1 sample))")] == [["m2", "in process", "native"]]
    assert ("**No call due**, 1 row run on other cases, 1 case (1 scenario × 1 sample), ranked apart and never "
            "against the rows above: **m2 (in process), native**: 1/1 100% [21–100] (the only row).") in bottom


def test_repeated_replies_count_once_in_the_interval_and_the_distinct_count_is_shown(tmp_path):
    scenarios, results = _tree(tmp_path)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    # m1's grammar row is one reply written four times: 4/4 samples, 1 distinct, the interval over that one.
    grammar, native = _table(summary, "No call due: ranked on all checks")
    assert grammar[4:7] == ["4", "1", "4/4 100%, 1/1 distinct [21–100]"]
    assert native[4:7] == ["4", "2", "2/4 50%, 1/2 distinct [9–91]"]
    assert ("These samples do not separate the first row, m1 (in process), grammar (4/4 100%, 1/1 distinct "
            "[21–100]), from 1 other row whose interval overlaps it") in summary


def test_ten_copies_of_one_reply_do_not_make_a_leader(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    _write(results, "m1", [_model("m1", "f" * 64), *_samples(scenario, "m1", [GOOD] * 10),
                           *_samples(scenario, "m1", [BARE] * 10, mode="grammar")])
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    # As ten independent samples, 10/10 [72–100] would lie above 0/10 [0–28]; as the one reply each row is,
    # they do not separate.
    assert "10/10 100%, 1/1 distinct [21–100]" in summary and "0/10 0%, 0/1 distinct [0–79]" in summary
    assert "These samples do not separate the first row, m1, native" in summary and " leads with " not in summary
    # Without repeats the same counts do separate them.
    distinct = [GOOD.replace("51", f"51 ({i})") for i in range(10)]
    _write(results, "m1", [_model("m1", "f" * 64), *_samples(scenario, "m1", distinct),
                           *_samples(scenario, "m1", [f"{BARE} {i}" for i in range(10)], mode="grammar")])
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    assert ("**m1, native** leads with 10/10 100% [72–100]; its interval lies above every other row's "
            "(next: m1, grammar: 0/10 0% [0–28]).") in summary


def test_a_model_run_in_fewer_modes_is_flagged_beside_the_rows_it_is_ranked_with(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    _write(results, "m1", [_model("m1", "f" * 64), *_samples(scenario, "m1", [GOOD, BARE]),
                           *_samples(scenario, "m1", [GOOD, GOOD], mode="grammar")])
    _write(results, "m3", [_model("m3", "d" * 64), *_samples(scenario, "m3", [GOOD, BARE], sha256="d" * 64)])
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    assert "m3 was run on these cases in native only, not in grammar: a mode not run is missing here, not failed." in summary
    rows = _table(summary, "No call due: ranked on all checks")
    assert {row[1]: row[-1] for row in rows if row[2] == "native"} == {"m1": "", "m3": "not run in grammar"}


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


def test_calls_due_are_ranked_on_the_right_first_call_over_call_due_samples_alone(tmp_path):
    scenarios, results = setup(tmp_path)   # arithmetic (no call due) for m1 native, 3 samples
    (scenarios / "get-time.yaml").write_text(TIME_SCENARIO)
    time = next(s for s in load_scenarios(scenarios) if s.name == "get-time")
    ran = {"name": "get_time", "executed": True, "executions": 1, "error": False, "result": '{"time": "14:37"}'}
    with TranscriptWriter(results / "transcripts" / "m1.jsonl") as writer:
        for i in range(3):
            fenced = f'```json\n{{"name": "get_time", "arguments": {{}}}}\n```{" " * i}'
            append(writer, sample(time, i, fenced))                      # chose right, wrote it wrong
            call = f'<tool_call>\n{{"name": "get_time", "arguments": {{}}}}\n</tool_call>{" " * i}'
            record = {**sample(time, i, call), "mode": "grammar"}
            answer = "It is 14:37." if i < 2 else "I cannot tell."       # the third call is right, its answer not
            record["turns"][0]["steps"] = [{"reply": call, "prompt_tail": "", "calls": [ran], "finish_reason": "stop"},
                                           {"reply": answer, "prompt_tail": "", "calls": [], "finish_reason": "stop"}]
            append(writer, record)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    bottom = summary[summary.index("## Bottom line"):summary.index("How the bottom line is reached")]
    calls = next(line for line in bottom.splitlines() if line.startswith("- **Calls due**"))
    assert "over the same 3 cases (1 scenario × 3 samples) in each of 2 rows." in calls
    assert ("These samples do not separate the first row, m1, grammar (3/3 100% [44–100]), from 1 other row whose "
            "interval overlaps it (m1, native: 0/3 0% [0–56]).") in calls
    assert "(*intended tool*, read from the call or from the name a near miss wrote): These samples do not" in calls
    assert ("Every check of a call-due sample (the call and what follows it): 2 of 6 samples pass; first by the "
            "same rule: m1, grammar (2/3 67% [21–94]).") in calls
    # The arithmetic samples answer the other question, and only it.
    no_call = next(line for line in bottom.splitlines() if line.startswith("- **No call due**"))
    assert "**m1, native**: 2/3 67% [21–94] (the only row)." in no_call
    assert [row[1:3] for row in _table(summary, "Calls due: ranked on right first call")] == [
        ["m1", "grammar"], ["m1", "native"]]
