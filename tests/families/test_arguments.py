import pytest

from harness.families import value_notation
from harness.schema.arguments import tool_parameters, type_arguments

TOOL = {
    "type": "function",
    "function": {
        "name": "file_chunks",
        "parameters": {
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "start": {"type": "integer"},
                "end": {"type": "integer"},
                "mode": {"type": "string", "enum": ["text", "code"]},
                "ratio": {"type": "number"},
                "flags": {"type": "array"},
            },
            "required": ["source", "start"],
        },
    },
}
PARAMS = tool_parameters(TOOL)


def test_strings_for_non_string_parameters_are_read_as_json():
    # Live, Llama 3.2 1B wrote "start": "0".
    typed = type_arguments({"source": "imprint/chat.py", "start": "0", "end": "2"}, PARAMS)
    assert typed.ok and typed.arguments == {"source": "imprint/chat.py", "start": 0, "end": 2}
    assert typed.coerced == ["start", "end"]


def test_a_string_parameter_keeps_a_numeric_looking_string():
    typed = type_arguments({"source": "42", "start": 1}, PARAMS)
    assert typed.ok and typed.arguments["source"] == "42" and typed.coerced == []


def test_wrong_type_missing_and_unknown_are_errors_the_model_can_read():
    typed = type_arguments({"start": "zero", "project": "chat", "mode": "prose"}, PARAMS)
    assert not typed.ok
    message = typed.error_message()
    assert "parameter 'start' must be integer" in message
    assert "unknown parameter 'project'" in message
    assert "parameter 'mode' must be one of ['text', 'code']" in message
    assert "missing required parameter 'source'" in message


def test_booleans_are_not_integers_and_integral_floats_are():
    assert not type_arguments({"source": "a", "start": True}, PARAMS).ok
    typed = type_arguments({"source": "a", "start": 2.0, "ratio": "0.5", "flags": "[1, 2]"}, PARAMS)
    assert typed.ok and typed.arguments["ratio"] == 0.5 and typed.arguments["flags"] == [1, 2]


SEED_PARAMS = {"type": "object", "properties": {"source": {"type": "string"}, "flags": {"type": "array"},
                                                "exact": {"type": "boolean"}, "limit": {"type": ["integer", "null"]}}}


def test_python_notation_is_an_error_named_for_its_parameter_never_read():
    typed = type_arguments({"source": "None", "flags": "['x']", "exact": "True", "limit": "None"}, SEED_PARAMS)
    assert typed.python_notation == ["flags", "exact", "limit"]
    assert typed.arguments == {"source": "None"} and typed.coerced == []
    assert "parameter 'exact' must be boolean, got \"True\" (Python notation; JSON is due)" in typed.errors


def test_text_that_is_neither_json_nor_a_python_literal_is_a_plain_type_error():
    typed = type_arguments({"exact": "yes", "flags": "'x'"}, SEED_PARAMS)
    assert typed.python_notation == [] and len(typed.errors) == 2


def test_the_seed_oss_and_minicpm5_templates_themselves_write_python_notation():
    """Why the finding exists: these templates render a past call's non-string values with Python's str(), so
    the models learn True and ['x'] where the parser and the schema expect JSON."""
    from pathlib import Path

    from harness.families import get
    from harness.template.render import render

    call = {"type": "function", "function": {"name": "grep", "arguments": {"flags": ["x"], "exact": True}}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    root = Path(__file__).resolve().parents[2] / "templates"
    cases = (("ByteDance-Seed-OSS.jinja", "seed-oss", "<seed:tool_call>", "<seed:eos>"),
             ("openbmb-MiniCPM5-1B.jinja", "minicpm5", "<function ", "<|im_end|>"))
    for template, family, opens, end_of_turn in cases:
        rendered = render((root / template).read_text(), messages)
        reply = rendered[rendered.rindex(opens):rendered.rindex(end_of_turn)]
        parsed = get(family).parse(reply)
        assert parsed.accepted, (family, parsed.deviation, parsed.detail)
        typed = type_arguments(parsed.calls[0].arguments, SEED_PARAMS)
        assert typed.python_notation == ["flags", "exact"], (family, parsed.calls[0].arguments)
        # MiniCPM 5's notation is its format (its peers read it back); Seed-OSS's peers keep the text.
        typed = type_arguments(parsed.calls[0].arguments, SEED_PARAMS, value_notation(family))
        if family == "minicpm5":
            assert typed.ok and typed.arguments == {"flags": ["x"], "exact": True} and not typed.json_notation
        else:
            assert typed.python_notation == ["flags", "exact"]


def test_a_python_notation_family_reads_what_its_template_writes_and_names_json_spelling():
    # The runtime corpus's typed-arguments reply, as the MiniCPM 5 template renders it (both peers read it so).
    args = {"title": "x", "attendees": "['Ana', 'Bo']", "details": "{'room': 12, 'online': False, 'notes': None}",
            "budget": "1250.5", "priority": "-3"}
    event = {"type": "object", "properties": {
        "title": {"type": "string"}, "attendees": {"type": "array", "items": {"type": "string"}},
        "details": {"type": "object", "properties": {"room": {"type": "integer"}, "online": {"type": "boolean"},
                                                     "notes": {"type": ["string", "null"]}}},
        "budget": {"type": "number"}, "priority": {"type": "integer"}}}
    typed = type_arguments(args, event, "python")
    assert typed.ok and typed.json_notation == []
    assert typed.arguments == {"title": "x", "attendees": ["Ana", "Bo"], "budget": 1250.5, "priority": -3,
                               "details": {"room": 12, "online": False, "notes": None}}
    # A string parameter keeps its text, literal-looking or not.
    assert type_arguments({"title": "['a']"}, event, "python").arguments == {"title": "['a']"}
    # JSON's true/null is not what str() writes: read, and listed by path.
    typed = type_arguments({"title": "x", "details": '{"online": true, "notes": null}'}, event, "python")
    assert typed.ok and typed.arguments["details"] == {"online": True, "notes": None}
    assert typed.json_notation == ["details"]
    # A set or tuple has no JSON type: it is not read.
    assert not type_arguments({"title": "x", "attendees": "('Ana',)"}, event, "python").ok


@pytest.mark.parametrize("text", ["[" * 5000, '{"a":' * 5000, "[" * 150 + "]" * 150, "NaN", "-Infinity", "1e999",
                                  '{"a": 1, "a": 2}', "1" * 5000])
def test_text_no_parser_would_read_as_json_stays_text_and_is_an_error(text):
    # json.loads raised RecursionError on the deep ones and read NaN, 1e999 (inf) and the later "a" silently.
    for key in ("flags", "ratio", "start"):
        typed = type_arguments({"source": "a", "start": 0, key: text}, PARAMS)
        assert not typed.ok and key not in typed.arguments and key not in typed.coerced


NESTED = {"type": "object", "properties": {
    "filters": {"type": "array", "items": {"type": "object", "properties": {
        "field": {"type": "string", "enum": ["name", "date"]}, "limit": {"type": "integer", "minimum": 1}},
        "required": ["field"], "additionalProperties": False}},
    "page": {"type": "integer", "minimum": 1},
}}


def test_nested_values_are_typed_by_the_whole_schema():
    good = type_arguments({"filters": [{"field": "name", "limit": 3}], "page": 1}, NESTED)
    assert good.ok and good.arguments == {"filters": [{"field": "name", "limit": 3}], "page": 1}
    bad = type_arguments({"filters": [{"field": "size"}, {"limit": "3"}, {"field": "date", "x": 1}],
                          "page": 0}, NESTED)
    assert not bad.arguments
    assert bad.errors == [
        "parameter 'filters'[0]['field']: 'size' is not one of ['name', 'date']",
        "parameter 'filters'[1]: 'field' is a required property",
        "parameter 'filters'[2]: Additional properties are not allowed ('x' was unexpected)",
        "parameter 'page': 0 is less than the minimum of 1",
    ]
    assert bad.coerced == ["filters[1].limit"]  # the leaf is typed by its schema, and the reading is listed


def test_a_nested_value_written_as_json_text_is_read_then_checked():
    typed = type_arguments({"filters": '[{"field": "nope"}]'}, NESTED)
    assert typed.coerced == ["filters"] and typed.errors == [
        "parameter 'filters'[0]['field']: 'nope' is not one of ['name', 'date']"]


def test_a_broken_tool_schema_is_named_not_raised():
    typed = type_arguments({"n": 1}, {"type": "object", "properties": {"n": {"type": "integer", "minimum": "x"}}})
    assert typed.errors and "not valid JSON Schema" in typed.errors[0]


TYPED_LEAVES = {"type": "object", "properties": {
    "number": {"type": "object", "properties": {"real": {"type": "number"}, "label": {"type": "string"}}},
    "rows": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"},
                                                                         "tags": {"type": "array"}}}},
    "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]},
    "either": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"n": {"type": "integer"}}}]},
    "ref": {"$ref": "#/$defs/point"},
}, "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}


def test_every_leaf_is_typed_by_its_schema_and_each_reading_is_listed():
    # MiniMax-M3's nested parameters carry every leaf as text.
    typed = type_arguments({"number": {"real": "1.5", "label": "2"}, "rows": [{"id": "1", "tags": '["a"]'}],
                            "pair": ["1", "true"], "ref": {"x": "4"}}, TYPED_LEAVES)
    assert typed.ok, typed.errors
    assert typed.arguments == {"number": {"real": 1.5, "label": "2"}, "rows": [{"id": 1, "tags": ["a"]}],
                               "pair": ["1", True], "ref": {"x": 4}}
    assert typed.coerced == ["number.real", "rows[0].id", "rows[0].tags", "pair[1]", "ref.x"]


def test_a_union_says_which_branch_typed_the_value():
    as_text = type_arguments({"either": '{"n": "2"}'}, TYPED_LEAVES)
    assert as_text.arguments == {"either": '{"n": "2"}'} and as_text.coerced == []
    assert as_text.branches == [{"path": "either", "keyword": "anyOf", "branch": 0, "type": "string"}]
    as_object = type_arguments({"either": {"n": "2"}}, TYPED_LEAVES)
    assert as_object.arguments == {"either": {"n": 2}} and as_object.coerced == ["either.n"]
    assert as_object.branches == [{"path": "either", "keyword": "anyOf", "branch": 1, "type": "object"}]


def test_nested_python_notation_is_named_by_its_path():
    typed = type_arguments({"rows": [{"id": 1, "tags": "['a']"}]}, TYPED_LEAVES)
    assert typed.python_notation == ["rows[0].tags"] and not typed.ok
