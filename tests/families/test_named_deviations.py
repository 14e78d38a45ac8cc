"""Replies peer parsers read and ours refuses, each under a deviation of its own rather than malformed-call."""

from pathlib import Path

import pytest

from harness.families import ToolCall, all_markers, detectable, get, load_table
from harness.formats import deviations as dev
from harness.template.render import render

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def _rendered_call(template: str, arguments: dict, opens: str, closes: str) -> str:
    call = {"type": "function", "function": {"name": "set_nullable", "arguments": arguments}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    rendered = render((TEMPLATES / template).read_text(), messages)
    return rendered[rendered.rindex(opens):rendered.rindex(closes) + len(closes)]


def test_gemma4_reads_null_as_its_template_prints_it():
    reply = _rendered_call("google-gemma-4-31B-it.jinja", {"value": None, "more": [None, {"a": None}]},
                           "<|tool_call>", "<tool_call|>")
    # The official template prints a None argument through `{{ argument }}`: Python's None.
    assert reply == "<|tool_call>call:set_nullable{more:[None,{a:None}],value:None}<tool_call|>"
    parsed = get("gemma4").parse(reply)
    assert parsed.accepted, (parsed.deviation, parsed.detail)
    assert parsed.calls[0].arguments == {"value": None, "more": [None, {"a": None}]}
    assert get("gemma4").format(parsed.calls) == reply


def test_gemma4_json_null_is_named():
    # llama.cpp's test-chat expects this reply to read as {"value": null}; the template never writes it.
    parsed = get("gemma4").parse("<|tool_call>call:set_nullable{value:null}<tool_call|>")
    assert not parsed.accepted and parsed.deviation == dev.JSON_NULL


def test_harmony_call_on_the_analysis_channel_is_named():
    reply = '<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{"location": "Paris"}<|call|>'
    parsed = get("harmony").parse(reply, "<|start|>assistant")
    assert not parsed.accepted and parsed.deviation == dev.ANALYSIS_CHANNEL_CALL
    role_form = ' to=functions.get_weather<|channel|>analysis json<|message|>{"location": "Paris"}<|call|>'
    assert get("harmony").parse(role_form, "<|start|>assistant").deviation == dev.ANALYSIS_CHANNEL_CALL


def test_bare_json_follows_the_familys_own_name_key(tmp_path):
    # A family keyed {"tool": ..., "args": ...}: its call object without markers is its bare-json near miss,
    # whatever the three keys the shared classifier knows (name, function, tool_name).
    (tmp_path / "toolkey.yaml").write_text(
        'name: toolkey\nlabel: T\ndetail: d\nmarkers: ["<call>"]\ncall: "<call>{object}</call>"\n'
        "object: {name_key: tool, arguments_key: args}\n", encoding="utf-8")
    family = load_table(tmp_path, "not_a_package")["toolkey"]
    assert family.parse('<call>{"tool": "get_weather", "args": {}}</call>').accepted
    parsed = family.parse('{"tool": "get_weather", "args": {"location": "Paris"}}')
    assert parsed.deviation == dev.BARE_JSON
    assert family.parse('```json\n{"tool": "get_weather", "args": {}}\n```').deviation == dev.FENCED_JSON
    assert family.parse('{"colour": "red"}').deviation is None


CALL = [ToolCall("get_weather", {"location": "Paris", "days": 3})]
# Every family whose parameters are markup closed by a tag, and the closing tag after the first value.
CLOSED_PARAMETERS = {
    "atem": "</atem:parameter>", "deepseek-v3.2": "</｜DSML｜parameter>", "deepseek-v4": "</｜DSML｜parameter>",
    "glm": "</arg_value>", "hy3": "</arg_value:opensource>", "kimi-k3": "<|close|>argument<|sep|>",
    "minicpm5": "</param>", "minimax-m2": "</parameter>", "qwen-xml": "</parameter>", "seed-oss": "</parameter>",
}


@pytest.mark.parametrize("name", CLOSED_PARAMETERS)
def test_a_broken_closing_tag_never_lets_a_value_swallow_the_next_parameter(name):
    family = get(name)
    text = family.format(CALL)
    closing = CLOSED_PARAMETERS[name]
    at = text.index(closing, text.index("Paris"))
    broken = text[:at] + closing[:-1] + "5" + text[at + len(closing):]
    parsed = family.parse(broken)
    assert not parsed.accepted and parsed.deviation == dev.MARKUP_IN_VALUE, (parsed.deviation, parsed.calls)


# A reply of these is a sequence of their own messages from the first token: text before is refused as such.
MESSAGES_FROM_THE_START = {"atem", "harmony", "kimi-k3", "llm-jp-harmony"}


@pytest.mark.parametrize("name", sorted(detectable()))
def test_another_familys_call_before_a_valid_call_is_named(name):
    family = get(name)
    own = family.format(CALL)
    for other, foreign in detectable().items():
        if other == name or not any(m in all_markers() for m in foreign.markers):
            continue  # functionary-v3.2's `>>>` is punctuation, never foreign (ordinary answers hold it)
        text = foreign.format(CALL)
        parsed = family.parse(f"{text}\n{own}")
        assert not parsed.accepted, (other, parsed.content)
        if name not in MESSAGES_FROM_THE_START and not any(m in text for m in family.markers):
            assert parsed.deviation == dev.FOREIGN_MARKERS, (other, parsed.deviation)
