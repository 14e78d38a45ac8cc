"""`harness parse --tools`: what typing did is said (coerced strings, union branches), and a tool file that
cannot be used is a clear error (exit 2), never a traceback or a fetch."""

import json

from tests.cli.test_cli_contract import QWEN3, run

HERMES_CALL = ('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": "3", '
               '"options": {"units": {"metric": "true"}}}}\n</tool_call>')
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "required": ["location"], "properties": {
        "location": {"type": "string"}, "days": {"type": "integer"},
        "options": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {
            "units": {"type": "object", "properties": {"metric": {"type": "boolean"}}}}}]}}}}}]


def parse(tmp_path, tools, reply=HERMES_CALL):
    path = tmp_path / "tools.json"
    path.write_text(tools if isinstance(tools, str) else json.dumps(tools), encoding="utf-8")
    return run("parse", "--template", QWEN3, "--enable-thinking", "false", "--tools", str(path), "--json",
               stdin=reply)


def test_a_string_read_as_a_number_in_a_json_family_is_a_finding_not_a_silent_repair(tmp_path):
    code, out, err = parse(tmp_path, TOOLS)
    data = json.loads(out)
    assert code == 1, err
    assert data["calls"][0]["arguments"] == {"location": "Paris", "days": 3, "options": {"units": {"metric": True}}}
    assert data["findings"] == [{"name": "string-coerced-arguments", "call": 0,
                                 "detail": "written as strings and read as JSON: days, options.units.metric"}]
    assert data["branches"] == [{"call": 0, "path": "options", "keyword": "anyOf", "branch": 1, "type": "object"}]
    code, out, _ = parse(tmp_path, TOOLS, HERMES_CALL.replace('"3"', "3").replace('"true"', "true"))
    assert code == 0 and json.loads(out)["findings"] == []


def test_a_tool_file_that_cannot_be_used_exits_2_with_the_reason(tmp_path):
    def params(parameters):
        return [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]

    deep = '[{"function": {"name": "t", "parameters": ' + '{"properties": {"x": ' * 900 + "{}" + "}}" * 900 + "}}]"
    cases = {
        "never fetched": params({"properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}}),
        "loops back": params({"$ref": "#"}),
        "not a readable JSON file": deep,
        "deeper than 64": params(json.loads("{}".join(['{"properties": {"x": ' * 100, "}}" * 100]))),
        "required must be a list": params({"properties": {"a": {}}, "required": "sxyz"}),
        "defined twice": TOOLS + TOOLS,
        "non-empty string": [{"function": {"name": ["get_weather"]}}],
        "backtracking": params({"properties": {"a": {"pattern": "(a)\\1"}}}),
    }
    for reason, tools in cases.items():
        code, _, err = parse(tmp_path, tools)
        assert code == 2 and reason in err and "Traceback" not in err, (reason, err)


def test_minicpm5_values_are_read_in_the_python_notation_its_template_writes(tmp_path):
    # An object, not the anyOf above: there the text fits the string branch as written and stays text.
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"},
                                         "options": {"type": "object", "properties": {"units": {
                                             "type": "object", "properties": {"metric": {"type": "boolean"}}}}}}}}}]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools), encoding="utf-8")
    reply = ('<function name="get_weather"><param name="location">Paris</param><param name="days">3</param>'
             "<param name=\"options\">{'units': {'metric': True}}</param></function>")
    code, out, err = run("parse", "--template", "openbmb-MiniCPM5-1B", "--enable-thinking", "false",
                         "--tools", str(path), "--json", stdin=reply)
    data = json.loads(out)
    assert code == 0, err
    assert data["calls"][0]["arguments"] == {"location": "Paris", "days": 3, "options": {"units": {"metric": True}}}
    assert data["findings"] == []
    # JSON's `true` is not what that template writes: read, and named.
    code, out, _ = run("parse", "--template", "openbmb-MiniCPM5-1B", "--enable-thinking", "false",
                       "--tools", str(path), "--json", stdin=reply.replace("{'units': {'metric': True}}",
                                                                           '{"units": {"metric": true}}'))
    data = json.loads(out)
    assert code == 1 and data["calls"][0]["arguments"]["options"] == {"units": {"metric": True}}
    assert data["findings"] == [{"name": "json-notation-arguments", "call": 0,
                                 "detail": "JSON where the template writes Python's str(): options"}]
