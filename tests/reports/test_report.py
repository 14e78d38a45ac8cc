"""`harness report` from transcripts alone: tables, intervals, replays, template comparison, determinism."""

import json
from pathlib import Path

from harness.reports.report import write_reports
from harness.reports.tables import collect, rate_cell
from harness.evaluation.replays import load_replays
from harness.evaluation.scenarios import load_scenarios
from harness.evaluation.records import record_from_json
from harness.evaluation.transcripts import TranscriptWriter

ARITHMETIC_SCENARIO = """\
name: arithmetic
description: no tool
tools:
  - name: get_time
    description: time
    parameters: {type: object, properties: {}}
    returns: {time: "14:37"}
conversation:
  turns:
    - user: What is 17 times 3?
      expect: {no_tool: true, answer_contains: {any_of: ["51"]}}
"""


def append(writer, raw: dict) -> None:
    """Write a record given as its JSON, as a run would (the writer takes typed records)."""
    writer.append(record_from_json(raw))


def sample(scenario, index, reply, family="hermes", model="m1"):
    return {"kind": "sample", "model": {"id": model, "sha256": "f" * 64}, "family": family, "mode": "native",
            "scenario": {"name": scenario.name, "hash": scenario.hash}, "sample": index, "seed": index,
            "replayed": False, "seconds": 1.5,
            "turns": [{"user": scenario.turns[0].user, "steps": [{"reply": reply, "prompt_tail": "", "calls": [],
                                                                   "completion_tokens": 5, "finish_reason": "stop"}]}]}


def setup(tmp_path, replays=None):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    if replays:
        (scenarios / "replays").mkdir()
        (scenarios / "replays" / "r.yaml").write_text(replays)
    (scenario,) = load_scenarios(scenarios)
    results = tmp_path / "results"
    with TranscriptWriter(results / "transcripts" / "m1.jsonl") as writer:
        append(writer, {"kind": "model", "model": {"id": "m1", "sha256": "f" * 64, "file": "m1.gguf"},
                       "template": {"source": "gguf", "sha256": "0" * 64, "text": "{{ x }}", "pinned_id": None},
                       "family": "hermes", "detection": {"reason": "test"}, "template_kwargs": {}})
        append(writer, sample(scenario, 0, "17 times 3 is 51."))
        append(writer, sample(scenario, 1, "It is 51"))
        append(writer, sample(scenario, 2, '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'))
    return scenarios, results


def test_rates_come_from_the_transcript_with_wilson_intervals(tmp_path):
    scenarios, results = setup(tmp_path)
    frame = collect(results, scenarios).samples
    assert list(frame["passed"]) == [True, True, False]
    assert rate_cell(frame["passed"]) == "2/3 67% [21–94]"
    assert rate_cell([None, None]) == "–"


def test_markdown_json_and_heat_map_are_written_and_deterministic(tmp_path, monkeypatch):
    scenarios, results = setup(tmp_path)
    out = write_reports(results, scenarios)
    names = sorted(p.split("/")[-1] for p in out["written"])
    assert names == ["heatmap.png", "m1.md", "report.html", "summary.md"]
    table = (results / "m1.md").read_text()
    assert "| arithmetic |" in table and "2/3 67% [21–94]" in table and "Wilson 95%" in table
    assert out["models"]["m1"]["arithmetic"]["passed"] == 2 / 3
    first = {p: open(p, "rb").read() for p in out["written"]}
    again = write_reports(results, scenarios)
    assert {p: open(p, "rb").read() for p in again["written"]} == first


def test_replays_are_scored_and_marked(tmp_path):
    replays = """\
source: a test
replays:
  - model: old-model
    family: hermes
    scenario: arithmetic
    kind: quoted
    reply: '<tool_call>\n{{"name": "get_time", "arguments": {}}}\n</tool_call>'
    quote: the quote
described_only:
  - {model: old-model, scenario: arithmetic, what: it answered, why: no text}
"""
    scenarios, results = setup(tmp_path, replays)
    frame = collect(results, scenarios).samples
    replayed = frame[frame["replayed"]]
    assert len(replayed) == 1 and replayed["deviations"].iloc[0] == ["double-braces"]
    write_reports(results, scenarios, plot=False)
    text = (results / "old-model.md").read_text()
    assert "Replayed from the seed ADR" in text and "quoted" in text and "it answered (no text)" in text
    assert "old-model (replayed)" in (results / "summary.md").read_text()


def test_shipped_replays_quote_the_adr_exactly():
    # The seed ADR sits beside the checkout (../shared/seeds), not in it.
    seed = next((Path(__file__).resolve().parents[3] / "shared" / "seeds").glob("000_*.txt"), None)
    replays = load_replays(known_scenarios={s.name: s for s in load_scenarios()})
    quoted = [r for r in replays.records if r.replay["kind"] == "quoted"]
    assert len(quoted) == 2
    if seed is not None:  # the seed copy is outside the repository; where present, the texts must be in it
        text = seed.read_text(encoding="utf-8")
        for record in quoted:
            reply = record.turns[0]["steps"][0]["reply"].replace("\n", "\\n")
            assert reply in text, reply
    reconstructed = [r for r in replays.records if r.replay["kind"] == "reconstructed"]
    assert reconstructed and all(r.replay["note"] for r in reconstructed)
    assert json.dumps([r.to_json() for r in replays.records])  # records are plain JSON like live ones


def test_modes_are_a_dimension_of_every_table_and_of_the_json(tmp_path):
    scenarios, results = setup(tmp_path)
    (scenario,) = load_scenarios(scenarios)
    with TranscriptWriter(results / "transcripts" / "m1.jsonl") as writer:
        for index, reply in enumerate(["It is 51.", "17 times 3 is 51.", "no idea"]):
            record = {**sample(scenario, index, reply), "mode": "grammar"}
            # Lazy grammar steps say where the grammar took over; here it took over the third reply only.
            record["turns"][0]["steps"][0].update(grammar="auto", grammar_from=0 if index == 2 else None)
            append(writer, record)
    out = write_reports(results, scenarios)
    table = (results / "m1.md").read_text()
    # Rows per scenario × mode, native first; a per-mode table; the trade-off against native in points.
    assert table.index("| arithmetic | native") < table.index("| arithmetic | grammar")
    assert "## Modes" in table and "grammar vs native (1 scenarios, 3 paired samples)" in table
    assert "all checks 67% → 67% (+0)" in table
    assert "| grammar took over" in table and "the grammar took over in 1/3 steps" in table
    summary = (results / "summary.md").read_text()
    assert "## The trade-off: what a grammar buys" in summary and "m1 · grammar" in summary
    assert out["models"]["m1"]["arithmetic"]["passed"] == 2 / 3
    assert out["models"]["m1 [grammar]"]["arithmetic"]["passed"] == 2 / 3
