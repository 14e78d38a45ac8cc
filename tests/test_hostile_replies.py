"""Hostile replies (issue 8): every family's parser answers with a result, never an exception, in time linear in
the reply."""

import json

import pytest

from harness.families import deviations as dev
from harness.families.deviations import _has_json_call_object


def test_finding_a_bare_call_decodes_each_character_a_bounded_number_of_times(monkeypatch):
    decoded = []
    raw_decode = json.JSONDecoder.raw_decode

    def counting(self, s, idx=0):
        decoded.append(len(s) - idx)
        return raw_decode(self, s, idx)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counting)
    text = '{"a": [1, 2} ' * 300 + "{" * 3000 + '{"a": 1} ' * 300 + '{"name": "f", "arguments": {}}'
    assert _has_json_call_object(text)
    assert sum(decoded) <= 4 * len(text)


@pytest.mark.parametrize("text", [
    'Sure: {"result": [{"name": "f", "arguments": {}}] oops',
    '{"say": "}{", "x": [ {"tool_name": "f"} ]',
    '[[{"function": {"name": "f"}}]]',
    "```json\n\n  \n[{\"name\": \"f\", \"arguments\": {}}]\n```",
])
def test_bare_calls_inside_broken_or_nested_json_are_still_found(text):
    assert _has_json_call_object(text)
    assert dev.classify_unmarked(text, (), ()) in (dev.BARE_JSON, dev.FENCED_JSON)

