"""Every family parses its own canonical outputs, rejects its near misses by name, and no family reads
another family's outputs (the cross-family rejection matrix)."""

import pytest

from harness import families as registry
from harness.families import deviations as dev
from harness.families.canonical import canonical_outputs

FAMILIES = registry.families()
NAMES = list(FAMILIES)


def _same(calls, expected):
    return [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in expected]


def _same_as_text(calls, expected):
    # Text families (XML, key/value) return every value as written, i.e. as a string.
    def norm(v):
        return v if isinstance(v, str) else __import__("json").dumps(v, ensure_ascii=False)

    return [(c.name, {k: norm(v) for k, v in c.arguments.items()}) for c in calls] == [
        (c.name, {k: norm(v) for k, v in c.arguments.items()}) for c in expected
    ]


@pytest.mark.parametrize("name", NAMES)
def test_canonical_outputs_round_trip(name):
    family = FAMILIES[name]
    for label, calls, text in canonical_outputs(family):
        result = family.parse(text)
        assert result.accepted, f"{name} rejects its own {label}: {text!r}: {result.deviation} {result.detail}"
        assert _same(result.calls, calls) or _same_as_text(result.calls, calls), (label, result.calls)


@pytest.mark.parametrize("name", NAMES)
def test_every_family_has_near_misses(name):
    assert len(FAMILIES[name].near_misses) >= 2, f"{name} needs at least two near misses in its YAML/module"


@pytest.mark.parametrize("name", NAMES)
def test_near_misses_rejected_with_their_name(name):
    family = FAMILIES[name]
    for miss in family.near_misses:
        result = family.parse(miss.text)
        assert not result.accepted, f"{name} accepted near miss {miss.text!r}"
        assert result.deviation == miss.deviation, (miss.text, result.deviation, result.detail)
        assert result.deviation in dev.ALL


@pytest.mark.parametrize("reader", NAMES)
def test_no_family_reads_another_familys_outputs(reader):
    parser = FAMILIES[reader]
    for writer in NAMES:
        if writer == reader:
            continue
        for label, _, text in canonical_outputs(FAMILIES[writer]):
            result = parser.parse(text)
            assert not result.accepted, f"{reader} accepts {writer}'s {label}: {text!r}"
        for miss in FAMILIES[writer].near_misses:
            assert not parser.parse(miss.text).accepted, f"{reader} accepts {writer}'s near miss {miss.text!r}"


def test_plain_text_is_no_call_and_no_deviation():
    for family in FAMILIES.values():
        result = family.parse("17 times 3 is 51.")
        assert result.calls == [] and result.deviation is None and result.content == "17 times 3 is 51."


def test_markup_inside_reasoning_is_not_a_call():
    hermes = FAMILIES["hermes"]
    text = '<think>maybe <tool_call>{"name": "x", "arguments": {}}</tool_call></think>The answer is 4.'
    result = hermes.parse(text)
    assert result.calls == [] and result.content == "The answer is 4."
    assert "tool_call" in result.reasoning and result.deviation == dev.CALL_IN_REASONING


def test_reasoning_opened_by_the_prompt():
    hermes = FAMILIES["hermes"]
    call = hermes.format(canonical_outputs(hermes)[0][1])
    result = hermes.parse("I should call the tool.\n</think>\n\n" + call, prompt="<|im_start|>assistant\n<think>\n")
    assert result.accepted and result.reasoning == "I should call the tool."


def test_markup_inside_an_argument_string_is_not_a_second_call():
    hermes = FAMILIES["hermes"]
    text = '<tool_call>\n{"name": "echo", "arguments": {"text": "</tool_call><tool_call>"}}\n</tool_call>'
    result = hermes.parse(text)
    assert result.accepted and len(result.calls) == 1
    assert result.calls[0].arguments["text"] == "</tool_call><tool_call>"
