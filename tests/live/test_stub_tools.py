"""The stub tools a live sample calls: arguments are typed as the reading family's template writes them."""

from harness import families
from harness.evaluation.scenario_files import load_scenarios
from harness.formats.calls import ToolCall
from harness.live.tool_loop import StubTools

SCENARIO = """\
name: s
description: d
tools:
  - name: invite
    description: Invite people.
    parameters:
      type: object
      properties:
        people: {type: array, items: {type: string}}
        online: {type: boolean}
      required: [people, online]
    returns: done
conversation:
  turns:
    - user: Invite Ana and Bo online.
      expect: {tool: invite}
"""


def test_a_python_notation_family_has_its_list_and_bool_typed_where_a_json_family_does_not(tmp_path):
    # MiniCPM 5's template writes a list or a bool argument with Python's str(): that is its format, not a slip.
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (scenario,) = load_scenarios(tmp_path)
    call = ToolCall("invite", {"people": "['Ana', 'Bo']", "online": "True"})
    python = StubTools(scenario).dispatch("call1", call, families.value_notation("minicpm5"))
    assert python["executed"] and python["typed"] == {"people": ["Ana", "Bo"], "online": True}
    json_family = StubTools(scenario).dispatch("call1", call, families.value_notation("hermes"))
    assert not json_family["executed"] and json_family["errors"]
