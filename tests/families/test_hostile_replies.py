"""Hostile replies: every family's parser answers with a result, never an exception, and what JSON or
Python's limits cannot hold (deep nesting, NaN, 1e999, 5000-digit integers, duplicate keys, bytes, sets, ...) is
rejected with a named deviation. Parametrized over the registry, so a new family is held to it too."""

import json
import re

import pytest

from harness import families as registry
from harness.schema.arguments import type_arguments
from harness.formats import deviations as dev
from harness.formats.calls import ToolCall
from harness.formats.deviations import has_json_call_object

FAMILIES = registry.families()
NAMES = list(FAMILIES)
NUMBER = 123456789
CALL = [ToolCall("get_weather", {"location": "Paris", "days": NUMBER})]
SCHEMA = {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}}}


def _nested(depth):
    return "[" * depth + "]" * depth


def _result(family, text):
    result = family.parse(text)
    assert result.deviation is None or result.deviation in dev.ALL, result.deviation
    json.dumps(result.to_json(), allow_nan=False)  # a transcript can always be written
    json.dumps([c.to_json() for c in result.calls], ensure_ascii=False).encode()  # as UTF-8, if the reply could be
    return result


def _typed(family) -> bool:
    """Whether the family reads `days` as a value (JSON, Python, typed markup) rather than keeping its text."""
    return isinstance(family.parse(family.format(CALL)).calls[0].arguments["days"], int)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("text", ["[" * 5000, "{" * 5000, '{"a":' * 5000, '[{"name": "f", "arguments": ' * 3000])
def test_deep_unmarked_text_is_a_result(name, text):
    family = FAMILIES[name]
    _result(family, text)
    for marker in family.markers:
        assert not _result(family, marker + text).accepted


# The family's own value for `days` replaced by a literal no parser may hand on as a value: the deviation a JSON
# reader names, and what a family with a call syntax of its own may name instead (Python's parser stops at 200
# brackets and 4300 digits and reads NaN as a name; Gemma 4's syntax has no NaN).
HOSTILE = {
    "deep list": (_nested(5000), dev.NESTING_TOO_DEEP, {dev.NOT_PYTHON_CALL}),
    "list deeper than the limit": (_nested(150), dev.NESTING_TOO_DEEP, set()),
    "5000 digits": ("1" * 5000, dev.NUMBER_TOO_LONG, {dev.NOT_PYTHON_CALL}),
    "NaN": ("NaN", dev.NON_FINITE_NUMBER, {dev.NOT_PYTHON_CALL, dev.MALFORMED_CALL}),
    "Infinity": ("Infinity", dev.NON_FINITE_NUMBER, {dev.NOT_PYTHON_CALL, dev.MALFORMED_CALL}),
    "-Infinity": ("-Infinity", dev.NON_FINITE_NUMBER, {dev.NOT_PYTHON_CALL, dev.MALFORMED_CALL}),
    "1e999": ("1e999", dev.NON_FINITE_NUMBER, set()),
    "-1e999": ("-1e999", dev.NON_FINITE_NUMBER, set()),
}
JSON_FAMILIES = [n for n in NAMES if '"location": "Paris"' in FAMILIES[n].format(CALL)]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("label", HOSTILE)
def test_values_json_cannot_hold_are_named(name, label):
    family = FAMILIES[name]
    literal, named, own_syntax = HOSTILE[label]
    result = _result(family, family.format(CALL).replace(str(NUMBER), literal))
    if name in JSON_FAMILIES:
        assert not result.accepted and result.deviation == named, (result.deviation, result.detail)
    elif _typed(family):
        assert not result.accepted and result.deviation in {named, *own_syntax}, (result.deviation, result.detail)
    elif result.accepted:
        # A text family keeps the value as written; typing it by the schema is an error, not a crash.
        days = result.calls[0].arguments["days"]
        assert days == literal or days.strip() == literal
        assert not type_arguments(result.calls[0].arguments, SCHEMA).ok


@pytest.mark.parametrize("name", NAMES)
def test_nesting_written_in_the_familys_own_syntax_is_bounded(name):
    family = FAMILIES[name]
    deep = []
    for _ in range(149):
        deep = [deep]
    result = _result(family, family.format([ToolCall("get_weather", {"location": "Paris", "days": deep})]))
    assert not result.accepted or isinstance(result.calls[0].arguments["days"], str), name
    if not result.accepted:
        assert result.deviation == dev.NESTING_TOO_DEEP


def test_the_json_families_are_the_ones_the_issue_counts():
    assert len(JSON_FAMILIES) >= 22


@pytest.mark.parametrize("name", JSON_FAMILIES)
def test_duplicate_argument_key_is_named(name):
    family = FAMILIES[name]
    text = family.format(CALL).replace('"location": "Paris"', '"location": "Paris", "location": "Rome"')
    result = _result(family, text)
    assert not result.accepted and result.deviation == dev.DUPLICATE_KEY, result.detail


NAMED_OBJECT_FAMILIES = [n for n in JSON_FAMILIES if re.search(r'"\w+": "get_weather"', FAMILIES[n].format(CALL))]


@pytest.mark.parametrize("name", NAMED_OBJECT_FAMILIES)
def test_name_key_twice_is_named(name):
    family = FAMILIES[name]
    text = re.sub(r'\{"(\w+)": "get_weather"', r'{"\1": "get_time", "\1": "get_weather"', family.format(CALL), count=1)
    result = _result(family, text)
    assert not result.accepted and result.deviation == dev.DUPLICATE_KEY, result.detail


@pytest.mark.parametrize("name", JSON_FAMILIES)
def test_half_a_surrogate_pair_is_named_a_whole_one_is_read(name):
    # "\ud83d" alone decodes to a str no UTF-8 file takes: the transcript write of the call raised.
    family = FAMILIES[name]
    result = _result(family, family.format(CALL).replace('"Paris"', '"\\ud83d"'))
    assert not result.accepted and result.deviation == dev.LONE_SURROGATE, result.detail
    result = _result(family, family.format(CALL).replace('"Paris"', '"\\ud83d\\ude00"'))
    assert result.accepted and result.calls[0].arguments["location"] == "\U0001f600"


LFM2_VALUES = {
    "b'x'": dev.NON_JSON_VALUE,
    "{1, 2}": dev.NON_JSON_VALUE,
    "(1, 2)": dev.NON_JSON_VALUE,
    "1j": dev.NON_JSON_VALUE,
    "...": dev.NON_JSON_VALUE,
    "{1: 2}": dev.NON_JSON_VALUE,
    "{[1]: 2}": dev.NON_JSON_VALUE,  # literal_eval raised TypeError: unhashable
    "{(1, 2): 3}": dev.NON_JSON_VALUE,
    "{'a': {1}}": dev.NON_JSON_VALUE,
    "1e999": dev.NON_FINITE_NUMBER,
    "-1e999": dev.NON_FINITE_NUMBER,
    "0x" + "f" * 20000: dev.NUMBER_TOO_LONG,  # an int no json.dumps can print
    "{'a': 1, 'a': 2}": dev.DUPLICATE_KEY,
    '"\ud800"': dev.NOT_PYTHON_CALL,  # UnicodeEncodeError in ast.parse
    '"\\ud800"': dev.LONE_SURROGATE,  # an escape: the source parses, the str cannot be written as UTF-8
    "-" * 3000 + "1": dev.NESTING_TOO_DEEP,  # RecursionError in ast.parse
}


@pytest.mark.parametrize("value", LFM2_VALUES, ids=lambda v: v[:12])
def test_lfm2_reads_only_json_values(value):
    result = _result(FAMILIES["lfm2"], f"<|tool_call_start|>[get_weather(days={value})]<|tool_call_end|>")
    assert not result.accepted and result.deviation == LFM2_VALUES[value], result.detail


def test_lfm2_still_reads_python_literals_json_has():
    text = "<|tool_call_start|>[a.b.get_weather(x=[1, -2.5, {'k': None}], y=True, z=+3)]<|tool_call_end|>"
    result = _result(FAMILIES["lfm2"], text)
    assert result.accepted and result.calls[0].name == "a.b.get_weather"
    assert result.calls[0].arguments == {"x": [1, -2.5, {"k": None}], "y": True, "z": 3}


def test_lfm2_function_name_of_thousands_of_attributes_is_a_result():
    # ast.unparse recursed once per attribute.
    _result(FAMILIES["lfm2"], "<|tool_call_start|>[" + "a." * 3000 + "b(x=1)]<|tool_call_end|>")


def test_finding_a_bare_call_decodes_each_character_a_bounded_number_of_times(monkeypatch):
    decoded = []
    raw_decode = json.JSONDecoder.raw_decode

    def counting(self, s, idx=0):
        decoded.append(len(s) - idx)
        return raw_decode(self, s, idx)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counting)
    text = '{"a": [1, 2} ' * 300 + "{" * 3000 + '{"a": 1} ' * 300 + '{"name": "f", "arguments": {}}'
    assert has_json_call_object(text)
    assert sum(decoded) <= 4 * len(text)


@pytest.mark.parametrize("text", [
    'Sure: {"result": [{"name": "f", "arguments": {}}] oops',
    '{"say": "}{", "x": [ {"tool_name": "f"} ]',
    '[[{"function": {"name": "f"}}]]',
    "```json\n\n  \n[{\"name\": \"f\", \"arguments\": {}}]\n```",
])
def test_bare_calls_inside_broken_or_nested_json_are_still_found(text):
    assert has_json_call_object(text)
    assert dev.classify_unmarked(text, (), ()) in (dev.BARE_JSON, dev.FENCED_JSON)


def test_lfm2_prints_no_syntax_warnings(recwarn):
    # `1if` made ast.parse print "SyntaxWarning: invalid decimal literal" into every report that re-parsed it.
    assert _result(FAMILIES["lfm2"], "<|tool_call_start|>[f(a=1if 1 else 2)]<|tool_call_end|>").deviation
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


@pytest.mark.parametrize("text, deviation", [
    ('{"response": ' + "[" * 5000 + "]" * 5000 + "}", "nesting-too-deep"),
    ('{"response": "a", "response": "b"}', "duplicate-key"),
    ('{"response": NaN}', "non-finite-number"),
])
def test_generic_json_answer_object_is_read_by_the_same_bounded_reader(text, deviation):
    # generic-json's answer object is read before its call pattern: the sweeps above only reach the calls.
    parsed = registry.parse("generic-json", text)
    assert (parsed.calls, parsed.deviation) == ([], deviation)


@pytest.mark.parametrize("text, named", [
    # Qwen2.5-Coder under the answer grammar: a call key quoted half JSON, half Python, in prose and a fence.
    ("You would call:\n```json\n{\"name': 'file_chunks', 'arguments': {\"source\": 'a.py'}}\n```", True),
    ("Use `read_note`: {\"name': 'read_note', 'arguments': {\"title\": 'locker'}}", True),
    ("{'function\": \"f\"}", True),
    # Other keys quoted so are some answer's text, not a call.
    ("It printed {\"response': 'ok'} and stopped.", False),
    ('It printed {"name": and nothing else.', False),
])
def test_a_call_key_in_mixed_quotes_is_named_python_literals(text, named):
    assert dev.classify_unmarked(text, (), ()) == (dev.PYTHON_LITERALS if named else None)
    for name in ("hermes", "llama3", "mistral"):
        assert bool(registry.parse(name, text).deviation) is named, name
