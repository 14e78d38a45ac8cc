"""Every family parses its own canonical outputs, rejects its near misses by name, and no detectable family
reads another family's outputs (the cross-family rejection matrix); generic-json, registered but not
detectable, overlaps them only where documented."""

import json

import pytest

from harness import families as registry
from harness.formats import deviations as dev
from harness.formats.canonical import canonical_outputs

FAMILIES = registry.families()
NAMES = list(FAMILIES)
DETECTABLE = list(registry.detectable())
GENERIC = "generic-json"


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
    # A family's test cases are its canonical outputs (made by its formatter) and its near misses: a
    # registered family without near misses would be held to nothing but its own round trip.
    assert len(FAMILIES[name].near_misses) >= 2, f"{name} needs at least two near misses in its YAML/module"


@pytest.mark.parametrize("name", NAMES)
def test_near_misses_rejected_with_their_name(name):
    family = FAMILIES[name]
    for miss in family.near_misses:
        result = family.parse(miss.text)
        assert not result.accepted, f"{name} accepted near miss {miss.text!r}"
        assert result.deviation == miss.deviation, (miss.text, result.deviation, result.detail)
        assert result.deviation in dev.ALL


@pytest.mark.parametrize("reader", DETECTABLE)
def test_no_family_reads_another_familys_outputs(reader):
    parser = FAMILIES[reader]
    for writer in DETECTABLE:
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


def test_generic_json_is_registered_but_never_detected():
    generic = registry.get(GENERIC)
    assert not generic.detectable and GENERIC not in registry.detectable()
    for _, calls, text in canonical_outputs(generic):
        assert generic.parse(text).accepted
        for name, other in registry.detectable().items():
            assert not other.parse(text).accepted, (name, text)
    for miss in generic.near_misses:
        result = generic.parse(miss.text)
        assert not result.accepted and result.deviation == miss.deviation, miss.text
    # The documented overlap: it reads other families' bare-JSON near misses, and nothing else of theirs.
    for name, other in registry.detectable().items():
        for _, _, text in canonical_outputs(other):
            assert not generic.parse(text).accepted, (name, text)
        for miss in other.near_misses:
            if generic.parse(miss.text).accepted:
                assert set(json.loads(miss.text)) == {"name", "arguments"}, (name, miss.text)
                assert miss.deviation in (dev.BARE_JSON, dev.MISSING_KEY), (name, miss.text)


def test_generic_answer_object_is_read_exactly_and_never_as_a_call():
    generic = registry.get(GENERIC)
    answer = generic.parse('  {"response": "Lisbon, on 3 May."}\n')
    assert (answer.content, answer.calls, answer.deviation) == ("Lisbon, on 3 May.", [], None)
    assert generic.format([], "It is 51.") == '{"response": "It is 51."}'
    for name, other in registry.detectable().items():
        assert not other.parse('{"response": "It is 51."}').accepted, name
    # Anything but exactly one string under "response" is not an answer: the call parser names it.
    for text in ('{"response": 51}', '{"response": "a", "response": "b"}', '{"response": "a", "name": "x"}',
                 '{"answer": "a"}', '{"response": "a"} Done.'):
        result = generic.parse(text)
        assert result.deviation is not None and not result.calls, (text, result)
    fenced = '```json\n{"response": "a"}\n```'  # text, kept as written: never unwrapped into "a"
    assert generic.parse(fenced).content == fenced


def test_a_reply_without_a_family_is_text_with_call_shapes_named():
    # A chat without tools: thinking text never counts as a call, call-shaped text outside it is named.
    text = '<think>{"name": "ping", "arguments": {}}</think>The relay is up.'
    parse = registry.parse(None, text)
    assert parse.deviation is None and parse.content == "The relay is up." and parse.reasoning
    assert registry.parse(None, '{"name": "ping", "arguments": {}}').deviation is not None
