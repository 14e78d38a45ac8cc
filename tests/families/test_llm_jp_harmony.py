"""LLM-jp 4.1's Harmony dialect: its parser reads what its template renders and what its tokenizer's blank after
each special token makes of it (llama.cpp's test-chat replies), several calls per turn; gpt-oss' header is refused
by it as `harmony-dialect`, and its header by gpt-oss' parser, each under that name."""

import re

import pytest

from harness import families as registry
from harness.core.constants import ROOT
from harness.formats import deviations as dev
from harness.formats.canonical import canonical_outputs
from harness.template.detect import detect
from harness.template.probe import PROBE_TOOL
from harness.template.render import render

TEMPLATE_ID = "llm-jp-llm-jp-4.1-8b-thinking"
PROMPT = "<|start|>user<|message|>hi<|end|><|start|>assistant"
SPECIAL = re.compile(r"(<\|(?:start|channel|message|constrain|end|call|return)\|>)(?=[^<])")


def detokenized(text: str) -> str:
    """The text as a detokenizer prints its tokens: a blank after each special token text follows."""
    return SPECIAL.sub(r"\1 ", text)


def _calls(result):
    return [(c.name, c.arguments) for c in result.calls]


def test_detection_names_the_family_from_the_templates_own_call():
    found = detect((ROOT / "templates" / f"{TEMPLATE_ID}.jinja").read_text(encoding="utf-8"))
    assert found.status == "detected" and found.family == "llm-jp-harmony", found.reason
    assert found.rendered_call.startswith(" to=functions.get_weather<|channel|>commentary <|constrain|> json")


def test_the_templates_training_turn_reads_as_reasoning_and_every_call():
    # The last assistant message without a generation prompt: the turn as the model is trained to write it.
    calls = [("get_weather", {"location": "Paris", "days": 3}), ("get_time", {"timezone": "Europe/Paris"})]
    messages = [{"role": "user", "content": "Weather and time in Paris?"},
                {"role": "assistant", "thinking": "Two lookups.", "tool_calls": [
                    {"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}]
    template = (ROOT / "templates" / f"{TEMPLATE_ID}.jinja").read_text(encoding="utf-8")
    history = render(template, messages, tools=[PROBE_TOOL], conversation_start_date="2026-01-01")
    start = history.rindex("<|end|>", 0, history.index("<|channel|>analysis")) + len("<|end|>")
    reply = history[start:]
    assert reply.startswith("<|start|>assistant<|channel|>analysis<|message|>Two lookups.<|end|>")
    assert reply.count("<|end|><|start|>assistant to=functions.") == 2 and reply.endswith("<|call|>")
    family = registry.get("llm-jp-harmony")
    for text in (reply, detokenized(reply)):
        result = family.parse(text)
        assert result.accepted, (text, result.deviation, result.detail)
        assert _calls(result) == calls and result.reasoning == "Two lookups." and result.content == ""


@pytest.mark.parametrize("reply, calls, reasoning, content", [
    # llama.cpp's test-chat replies for this template, as its detokenizer prints them.
    ("<|channel|> final<|message|> Hello, world!\nWhat's up?", [], None, "Hello, world!\nWhat's up?"),
    ("<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant to=functions.special_function"
     '<|channel|> commentary <|constrain|>  json<|message|> {"arg1": 1}',
     [("special_function", {"arg1": 1})], "I'm\nthinking", ""),
    ("<|channel|> analysis<|message|> I'm\nthinking<|end|>"
     '<|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> {"arg1": 1}'
     '<|end|><|start|> assistant to=functions.special_function<|channel|> commentary <|constrain|>  json<|message|> '
     '{"arg1": 2}',
     [("special_function", {"arg1": 1}), ("special_function", {"arg1": 2})], "I'm\nthinking", ""),
])
def test_replies_with_the_tokenizers_blank_after_each_special_token(reply, calls, reasoning, content):
    result = registry.get("llm-jp-harmony").parse(reply, PROMPT)
    assert result.deviation is None and _calls(result) == calls, (result.deviation, result.detail)
    assert (result.reasoning, result.content) == (reasoning, content)


def test_every_canonical_output_reads_in_either_rendering():
    family = registry.get("llm-jp-harmony")
    for label, calls, text in canonical_outputs(family):
        for spelt in (text, detokenized(text)):
            result = family.parse(spelt)
            assert result.accepted, (label, spelt, result.deviation, result.detail)
            assert _calls(result) == [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize("reader, writer", [("llm-jp-harmony", "harmony"), ("harmony", "llm-jp-harmony")])
def test_each_dialects_calls_are_the_others_named_near_miss(reader, writer):
    parser = registry.get(reader)
    for label, _, text in canonical_outputs(registry.get(writer)):
        for spelt in ((text, detokenized(text)) if writer == "llm-jp-harmony" else (text,)):
            result = parser.parse(spelt, PROMPT)
            assert not result.calls and result.deviation == dev.HARMONY_DIALECT, (label, spelt, result.deviation)
            assert result.content, label


@pytest.mark.parametrize("reply, deviation", [
    # llama.cpp reads the recipient in the channel header too; this template never writes it there.
    ('<|channel|> commentary to=functions.special_function<|message|> {"arg1": 1}', dev.HARMONY_DIALECT),
    # gpt-oss' role-header call without a constraint: its parser reads it, this template always writes one.
    (' to=functions.get_weather<|channel|>commentary<|message|>{"location": "Paris"}', dev.HARMONY_DIALECT),
    # The blank after <|channel|> and <|constrain|> but not after <|message|>: neither rendering of the tokens.
    (' to=functions.get_weather<|channel|> commentary <|constrain|>  json<|message|>{"location": "Paris"}',
     dev.MALFORMED_CALL),
    (' to=functions.get_weather<|channel|>analysis <|constrain|> json<|message|>{"location": "Paris"}',
     dev.ANALYSIS_CHANNEL_CALL),
])
def test_what_llama_cpp_reads_and_the_template_never_writes_is_named(reply, deviation):
    result = registry.get("llm-jp-harmony").parse(reply, PROMPT)
    assert not result.calls and result.deviation == deviation, (result.deviation, result.detail)


def test_a_mixed_reply_says_where_the_blanks_differ():
    result = registry.get("llm-jp-harmony").parse(
        ' to=functions.get_weather<|channel|> commentary <|constrain|> json<|message|>{"location": "Paris"}', PROMPT)
    assert result.deviation == dev.MALFORMED_CALL and "not after others" in result.detail
