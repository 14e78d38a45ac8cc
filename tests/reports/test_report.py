"""`harness report` from transcripts alone: tables, intervals, replays, template comparison, determinism."""

import json
from pathlib import Path

from harness.reports.report import write_reports
from harness.reports.rates import rate_cell
from harness.reports.tables import collect
from harness.evaluation.replays import load_replays
from harness.evaluation.scenario_files import load_scenarios
from harness.storage.records import record_from_json
from harness.storage.transcript_writer import TranscriptWriter

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
    assert names == ["heatmap.png", "m1.1.html", "m1.md", "report.html", "summary.md"]
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
  - model: new-model
    family: hermes
    scenario: arithmetic
    kind: reconstructed
    reply: '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    quote: the description
    note: written by us from the description
described_only:
  - {model: old-model, scenario: arithmetic, what: it answered, why: no text}
"""
    scenarios, results = setup(tmp_path, replays)
    collected = collect(results, scenarios, replays=True)
    frame = collected.samples
    replayed = frame[frame["replayed"]]
    # Only the verbatim quote is scored; the reconstructed reply is an illustration with no verdict at all.
    assert len(replayed) == 1 and replayed["deviations"].iloc[0] == ["double-braces"]
    assert "new-model" not in set(frame["model"])
    assert collected.illustrations == [{"model": "new-model", "scenario": "arithmetic", "family": "hermes",
                                        "reply": '<tool_call> {"name": "get_time", "arguments": {}} </tool_call>',
                                        "reading": "calls get_time", "quote": "the description",
                                        "note": "written by us from the description"}]
    write_reports(results, scenarios, plot=False, replays=True)
    text = (results / "old-model.md").read_text()
    assert "Quoted by the seed ADR" in text and "it answered (no text)" in text
    illustration = (results / "new-model.md").read_text()
    assert "illustrations, not scored" in illustration and "%" not in illustration
    summary = (results / "summary.md").read_text()
    # The quote has a table of its own, not a row among the live models' rates.
    quoted = summary[summary.index("## Quoted by the seed ADR"):]
    assert "| old-model " in quoted and "old-model" not in summary[:summary.index("## Quoted by the seed ADR")]
    assert "new-model (arithmetic)" in quoted and "| new-model" not in summary


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
    # Compared only where the grammar wrote a step: the third sample (the other two ran the same text).
    assert "## Modes" in table and "grammar vs native: over the 1 of 3 paired samples where the grammar" in table
    assert "no call made 0% → 100% (+100); expected answer 0% → 0% (+0); all checks 0% → 0% (+0)" in table
    assert "| grammar took over" in table and "| 1/3 steps" in table
    summary = (results / "summary.md").read_text()
    assert "## The trade-off: what a grammar buys" in summary and "m1 · grammar" in summary
    assert out["models"]["m1"]["arithmetic"]["passed"] == 2 / 3
    assert out["models"]["m1 [grammar]"]["arithmetic"]["passed"] == 2 / 3


def test_a_grammar_from_the_first_token_is_counted_by_what_it_refused(tmp_path):
    """A grammar that holds from the first token always "took over"; whether it acted is whether it refused
    a sampled token. The per-mode table says in how many steps it did, and only those are compared."""
    scenarios, results = setup(tmp_path)
    (scenario,) = load_scenarios(scenarios)
    with TranscriptWriter(results / "transcripts" / "m1.jsonl") as writer:
        for index, reply in enumerate(["It is 51.", "17 times 3 is 51.", "no idea"]):
            record = {**sample(scenario, index, reply), "mode": "grammar", "grammar": {"lazy": False}}
            record["turns"][0]["steps"][0].update(grammar="auto", grammar_from=0,
                                                   grammar_refused=2 if index == 2 else 0)
            append(writer, record)
    write_reports(results, scenarios)
    table = (results / "m1.md").read_text()
    assert "| grammar acted" in table and "| 1/3 steps" in table
    assert "grammar vs native: over the 1 of 3 paired samples where the grammar" in table


TIME_SCENARIO = """\
name: get-time
description: time
tools:
  - name: get_time
    description: time
    parameters: {type: object, properties: {}}
    returns: {time: "14:37"}
    evidence: ["14:37"]
conversation:
  turns:
    - user: What time is it?
      expect: {tool: get_time, arguments: {}, uses_tool_result: true}
"""


def test_call_due_and_no_call_samples_apart_and_fallback_shows_its_first_replies(tmp_path):
    scenarios, results = setup(tmp_path)
    (scenarios / "get-time.yaml").write_text(TIME_SCENARIO)
    time = next(s for s in load_scenarios(scenarios) if s.name == "get-time")
    fenced = '```json\n{"name": "get_time", "arguments": {}}\n```'
    call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    ran = {"name": "get_time", "executed": True, "executions": 1, "error": False, "result": '{"time": "14:37"}'}
    with TranscriptWriter(results / "transcripts" / "m1.jsonl") as writer:
        for mode in ("native", "fallback"):
            record = {**sample(time, 0, fenced), "mode": mode}
            if mode == "fallback":  # the fenced native reply, rewritten under the grammar into a call that ran
                record["turns"][0]["steps"] = [
                    {"reply": call, "prompt_tail": "", "calls": [ran], "grammar": "required", "finish_reason": "stop",
                     "fallback_from": {"reply": fenced, "prompt_tail": "", "finish_reason": "stop"}},
                    {"reply": "It is 14:37.", "prompt_tail": "", "calls": [], "finish_reason": "stop"}]
            append(writer, record)
    write_reports(results, scenarios, plot=False)
    summary = (results / "summary.md").read_text()
    call_due = summary[summary.index("### Call due (get-time)"):summary.index("### No call due (arithmetic)")]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in call_due.splitlines() if line.startswith("| m1")]
    rows = {row[1]: dict(zip(("call parsed", "intended tool", "right tool"), row[4:7])) for row in cells}
    # Native chose the right tool (intended) but wrote no call the parser reads; the fallback row scores the
    # rewrite, and its first replies are what the model wrote before it.
    none, one = "0/1 0% [0–79]", "1/1 100% [21–100]"
    assert rows["native"] == {"call parsed": none, "intended tool": one, "right tool": none}
    assert rows["fallback"] == {"call parsed": one, "intended tool": one, "right tool": one}
    assert rows["fallback, first replies"] == rows["native"]
    no_call = summary[summary.index("### No call due (arithmetic)"):summary.index("### All scenarios")]
    assert "2/3 67% [21–94]" in no_call and "get-time" not in no_call
    assert "*expected answer* covers 1 of 2 scenarios: arithmetic." in summary
    assert "| get-time   | yes        | turn 1: calls get_time first with no arguments; answers from get_time's result" in summary
    assert "calls no tool; answers in text of its own (not an echo of the user or of a tool message, ended before " \
           'the token limit), containing one of "51"' in summary


def test_a_sample_page_shows_what_the_grammar_refused_and_a_repeat_not_run_again():
    import re

    from harness.formats.calls import ParseResult
    from harness.reports.html_samples import _step_html

    step = {"reply": "<tool_call>…</tool_call>", "finish_reason": "stop", "completion_tokens": 9,
            "grammar": "auto", "grammar_from": 0, "grammar_refused": 2, "repeated_call_after_result": ["call00001"],
            "calls": [{"id": "call00002", "name": "ping", "executed": False, "repeat_of": "call00001",
                       "result": "pong"}]}
    html = _step_html(1, step, ParseResult("hermes", content=""), None, re.compile("(?!)"))
    assert "grammar auto from char 0, refused 2 tokens" in html
    assert "not run again: the result of call00001" in html
    # lazy-trigger: the trigger that fired, and a call held in another spelling than the family's, said so.
    held = {**step, "reply": "```json\n{}\n```", "grammar_trigger": "```json", "grammar_held": True}
    html = _step_html(1, held, ParseResult("hermes", content=""), None, re.compile("(?!)"))
    assert "grammar auto from char 0 at &#x27;```json&#x27;, a call held in another spelling than the family&#x27;s, " \
           "refused 2 tokens" in html
