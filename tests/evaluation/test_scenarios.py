"""Scenario files: the shipped ones load, and every schema problem names file, line and field."""

import textwrap

import pytest

from harness.core.errors import ScenarioError
from harness.evaluation.scenarios import DEFAULT_SAMPLING
from harness.evaluation.scenario_files import load_scenarios

LIBRARY = """\
tools:
  - name: get_time
    description: Get the time.
    parameters: {type: object, properties: {}}
    returns: {time: "14:37"}
    evidence: ["14:37"]
  - name: file_chunks
    description: Read chunks.
    parameters:
      type: object
      properties:
        source: {type: string}
        start: {type: integer}
        end: {type: integer}
      required: [source, start, end]
    returns: {chunks: []}
"""

GOOD = """\
name: demo
description: A demo.
tools: [get_time, file_chunks]
conversation:
  turns:
    - user: What time is it?
      expect:
        tool: get_time
        arguments: {}
        uses_tool_result: true
"""


def write(tmp_path, scenario: str, library: str = LIBRARY):
    (tmp_path / "library").mkdir(exist_ok=True)
    (tmp_path / "library" / "tools.yaml").write_text(library)
    (tmp_path / "demo.yaml").write_text(textwrap.dedent(scenario))
    return tmp_path


def error_of(tmp_path, scenario, library=LIBRARY) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenarios(write(tmp_path, scenario, library))
    return str(info.value)


def test_shipped_scenarios_cover_the_issue():
    names = {s.name for s in load_scenarios()}
    assert {"arithmetic", "file-chunks", "memory-search", "greeting", "get-time", "name-recall", "seeded-fact",
            "failing-tool", "kg-query", "seeded-history"} <= names


def test_every_declared_tool_is_poked_by_a_scenario_that_expects_it():
    from harness.evaluation.scenario_files import declared_tools

    expected = {t.expect.tool for s in load_scenarios() for t in s.turns if t.expect.tool}
    assert set(declared_tools()) <= expected


def test_shipped_expectations_as_the_issue_states():
    by_name = {s.name: s for s in load_scenarios()}
    chunks = by_name["file-chunks"].turns[0]
    assert chunks.user == "Show me chunks 0 through 2 of the indexed file imprint/chat.py."
    assert chunks.expect.arguments["start"] == 0 and chunks.expect.arguments["end"] == 2
    assert by_name["arithmetic"].turns[0].expect.no_tool and "51" in by_name["arithmetic"].turns[0].expect.any_of
    recall = by_name["name-recall"]
    assert len(recall.turns) == 2 and "Priya" in recall.turns[1].expect.all_of
    assert by_name["failing-tool"].tool("send_email").raises
    assert by_name["get-time"].tool("get_time").parameters["properties"] == {}


def test_every_promise_of_a_shipped_scenario_is_a_check():
    """Descriptions say what a scenario is for; each "must" is an expect field (the loader refuses a
    description that promises one), and the reports write the fields out (harness.reports.tables)."""
    by_name = {s.name: s for s in load_scenarios()}
    # Promises a scenario once made in its description and never checked: a search for alex, a greeting answered.
    assert by_name["memory-search"].turns[0].expect.arguments == {"query": "alex"}
    assert by_name["greeting"].turns[0].expect.wants_answer
    assert [s.name for s in by_name.values() if s.call_due] == [
        "failing-tool", "file-chunks", "get-time", "kg-query", "memory-search", "seeded-fact"]


def test_a_description_that_promises_a_check_is_refused(tmp_path):
    message = error_of(tmp_path, GOOD.replace("A demo.", "A demo. The answer must give the time."))
    assert "demo.yaml:2: description" in message and "`expect` field" in message


def test_checks_and_description_leave_the_hash_alone(tmp_path):
    """Checks change freely: a refined check re-scores the recorded transcripts instead of orphaning them."""
    (base,) = load_scenarios(write(tmp_path, GOOD))
    (refined,) = load_scenarios(write(tmp_path, GOOD.replace("A demo.", "Another demo.").replace(
        "uses_tool_result: true", "uses_tool_result: true\n        answer_contains: {any_of: ['14:37']}")))
    assert refined.turns[0].expect.wants_answer and base.hash == refined.hash


def test_a_good_file_loads_with_defaults(tmp_path):
    (scenario,) = load_scenarios(write(tmp_path, GOOD))
    assert scenario.sampling == DEFAULT_SAMPLING
    assert scenario.tool("get_time").result_message() == '{"time": "14:37"}'
    assert scenario.turns[0].expect.expects_call is True


def test_hash_follows_what_the_model_sees_not_the_expectations(tmp_path):
    (base,) = load_scenarios(write(tmp_path, GOOD))
    (other_expectation,) = load_scenarios(write(tmp_path, GOOD.replace("uses_tool_result: true", "no_tool: false")))
    (other_prompt,) = load_scenarios(write(tmp_path, GOOD.replace("What time is it?", "Time?")))
    assert base.hash == other_expectation.hash
    assert base.hash != other_prompt.hash


@pytest.mark.parametrize("edit, where, words", [
    (("description: A demo.\n", ""), ":1: (document)", "missing field 'description'"),
    (("tool: get_time", "tool: get_weather"), ":8: conversation.turns.0.expect.tool", "not one of the scenario's tools"),
    (("arguments: {}", "arguments: {timezone: UTC}"), ":9: conversation.turns.0.expect.arguments",
     "unknown parameter 'timezone'"),
    (("    - user: What time is it?\n", "    - user: What time is it?\n      colour: red\n"),
     ":7: conversation.turns.0.colour", "unknown field"),
    (("tools: [get_time, file_chunks]", "tools: [get_time, nope]"), ":3: tools.1", "not in library"),
    (("name: demo", "name: Demo Scenario"), ":1: name", "lower-case"),
    (("conversation:", "sampling: {temperature: hot}\nconversation:"), ":4: sampling.temperature", "must be"),
])
def test_errors_name_file_line_and_field(tmp_path, edit, where, words):
    message = error_of(tmp_path, GOOD.replace(*edit))
    assert f"demo.yaml{where}" in message and words in message, message


def test_uses_tool_result_needs_evidence(tmp_path):
    scenario = GOOD.replace("tool: get_time", "tool: file_chunks").replace("arguments: {}", "arguments: {start: 0}")
    message = error_of(tmp_path, scenario)
    assert "demo.yaml:10: conversation.turns.0.expect.uses_tool_result" in message and "evidence" in message


def test_library_errors_name_the_library(tmp_path):
    message = error_of(tmp_path, GOOD, LIBRARY.replace("    returns: {chunks: []}\n", ""))
    assert "tools.yaml:7: tools.1" in message and "exactly one of 'returns'" in message


def test_seeded_history_gets_nine_character_ids(tmp_path):
    scenario = GOOD.replace("conversation:\n", """conversation:
  history:
    - {role: user, content: "time?"}
    - {role: assistant, content: "", tool_calls: [{name: get_time, arguments: {}}]}
    - {role: tool, name: get_time, content: "14:37"}
""")
    (loaded,) = load_scenarios(write(tmp_path, scenario))
    call_id = loaded.history[1]["tool_calls"][0]["id"]
    assert call_id == "hist00001" and len(call_id) == 9 and loaded.history[2]["tool_call_id"] == call_id
