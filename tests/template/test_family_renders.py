"""The families of the markup formats (GLM-style tags, MiniMax, Seed-OSS, Hy3, Solar Open, LFM2, Gemma 4,
MiniCPM 5, Muse Glimmer's ATEM) read what their templates render beyond the one-call probe: two calls in one
turn, awkward strings and nested arguments. Plus the behaviours specific to the custom modules."""

import json
from pathlib import Path

import pytest

from harness import families as registry
from harness.core.constants import ROOT
from harness.template.detect import cut_at_end_of_turn, reply_start
from harness.formats import deviations as dev
from harness.template.probe import PROBE_TOOL
from harness.template.render import render

TEMPLATES = {
    "GLM-4.6": "glm", "GLM-4.7-Flash": "glm", "inclusionai-ling-3.0-flash": "glm", "Spark2.5": "glm",
    "poolside-Laguna-S-2.1": "glm", "poolside-Laguna-XS-2.1": "glm", "poolside-Laguna-XS.2": "glm",
    "MiniMax-M2": "minimax-m2", "MiniMax-M3": "minimax-m3", "ByteDance-Seed-OSS": "seed-oss",
    "tencent-Hy3": "hy3", "upstage-Solar-Open-100B": "solar-open", "LFM2.5-8B-A1B": "lfm2",
    "google-gemma-4-31B-it": "gemma4", "google-gemma-4-31B-it-interleaved": "gemma4",
    "openbmb-MiniCPM5-1B": "minicpm5", "muse-glimmer": "atem",
}
TWO_CALLS = [
    ("get_weather", {"location": "São Paulo", "days": 3}),
    ("search_notes", {"query": 'café "naïve" <b> & x', "limit": 5, "exact": True}),
]
NESTED = [("set_prefs", {"opts": {"units": "metric", "tags": ["a", "b"]}, "flag": False})]
# Families whose syntax carries types; MiniMax-M3 carries structure with text leaves; the others return every
# value as the text they wrote.
TYPED = {"solar-open", "lfm2", "gemma4"}
TEXT_TREES = {"minimax-m3"}


def _messages(calls):
    turn = [{"role": "user", "content": "Weather in São Paulo, and search my notes."}]
    if calls:
        turn.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call0000{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls, 1)]})
    return turn


def _rendered_reply(template_id, calls):
    template = (ROOT / "templates" / f"{template_id}.jinja").read_text(encoding="utf-8")
    kwargs = {"tools": [PROBE_TOOL], "bos_token": "<s>", "eos_token": "</s>"}
    prompt = render(template, _messages(None), add_generation_prompt=True, **kwargs)
    history = render(template, _messages(calls), **kwargs)
    start = reply_start(prompt, history)
    return prompt[:start], cut_at_end_of_turn(history[start:], "</s>")


def _as_text(value):
    # What text families may hold for a value: the template writes JSON or Python notation for non-strings.
    if isinstance(value, str):
        return {value}
    return {json.dumps(value, ensure_ascii=False), str(value)}


def _text_tree(value):
    if isinstance(value, dict):
        return {k: _text_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_text_tree(v) for v in value]
    return value if isinstance(value, str) else json.dumps(value)


def _check(family, got, want):
    assert [c.name for c in got] == [name for name, _ in want]
    for call, (_, args) in zip(got, want):
        if family in TYPED:
            assert call.arguments == args
        elif family in TEXT_TREES:
            assert call.arguments == _text_tree(args)
        else:
            assert set(call.arguments) == set(args)
            for key, value in args.items():
                assert call.arguments[key] in _as_text(value), (key, call.arguments[key])


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_two_calls_as_the_template_renders_them(template_id):
    family = TEMPLATES[template_id]
    prompt, reply = _rendered_reply(template_id, TWO_CALLS)
    result = registry.get(family).parse(reply, prompt)
    assert result.accepted, (reply, result.deviation, result.detail)
    _check(family, result.calls, TWO_CALLS)


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_nested_arguments_as_the_template_renders_them(template_id):
    family = TEMPLATES[template_id]
    prompt, reply = _rendered_reply(template_id, NESTED)
    result = registry.get(family).parse(reply, prompt)
    assert result.accepted, (reply, result.deviation, result.detail)
    if family in TYPED | TEXT_TREES:
        _check(family, result.calls, NESTED)
    else:
        assert json.loads(result.calls[0].arguments["opts"].replace("'", '"')) == NESTED[0][1]["opts"]


def test_bare_close_tag_opens_a_reply_without_reasoning():
    # GLM-4.7-Flash, Spark2.5 and MiniMax-M3 render a turn without reasoning as `</think>` + the answer.
    result = registry.get("glm").parse("</think>The answer is 4.")
    assert result.content == "The answer is 4." and result.reasoning is None and result.deviation is None
    result = registry.get("minimax-m3").parse("<mm:think>Easy.</mm:think>4.")
    assert result.reasoning == "Easy." and result.content == "4."


def test_gemma4_values_are_typed_by_their_syntax():
    text = '<|tool_call>call:f{a:<|"|>3<|"|>,b:3,c:-2.5e3,d:[true,false],e:{}}<tool_call|>'
    (call,) = registry.get("gemma4").parse(text).calls
    assert call.arguments == {"a": "3", "b": 3, "c": -2500.0, "d": [True, False], "e": {}}


def test_gemma4_reasoning_channel_is_kept_apart():
    text = '<|channel>thought\nNeed the weather.<channel|><|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'
    result = registry.get("gemma4").parse(text)
    assert result.accepted and result.reasoning == "Need the weather."


def test_gemma4_null_is_none_as_its_template_prints_it():
    # tests/families/test_named_deviations.py renders it through the official template.
    assert registry.get("gemma4").parse("<|tool_call>call:f{a:None}<tool_call|>").calls[0].arguments == {"a": None}
    assert registry.get("gemma4").parse("<|tool_call>call:f{a:null}<tool_call|>").deviation == dev.JSON_NULL


def test_minicpm5_cdata_is_markup_not_value():
    text = '<function name="f"><param name="code"><![CDATA[if a < b:\n    pass]]></param></function>'
    (call,) = registry.get("minicpm5").parse(text).calls
    assert call.arguments == {"code": "if a < b:\n    pass"}


def test_minimax_m3_list_of_items_and_mismatched_close():
    family = registry.get("minimax-m3")
    ns = "]<]minimax[>["
    call = f'{ns}<tool_call>\n{ns}<invoke name="f">{ns}<xs>{ns}<item>1{ns}</item>{ns}<item>2{ns}</item>{ns}</xs>{ns}</invoke>\n{ns}</tool_call>'
    assert family.parse(call).calls[0].arguments == {"xs": ["1", "2"]}
    broken = call.replace(f"{ns}</xs>", f"{ns}</ys>")
    assert family.parse(broken).deviation == dev.MALFORMED_CALL


def test_atem_reasoning_then_answer_is_no_call():
    text = " to=self<|message|>No tool needed.<|eom|><|start|>assistant to=user<|message|>It is 4."
    result = registry.get("atem").parse(text)
    assert result.calls == [] and result.deviation is None
    assert result.reasoning == "No tool needed." and result.content == "It is 4."


def test_atem_reasoning_then_call():
    call = registry.get("atem").format([registry.ToolCall("get_time", {"timezone": "UTC"})])
    result = registry.get("atem").parse(" to=self<|message|>Check the time.<|eom|><|start|>assistant" + call)
    assert result.accepted and result.reasoning == "Check the time." and result.calls[0].name == "get_time"


def test_lfm2_template_writes_unescaped_strings_which_are_not_python():
    # LFM2.5's template quotes a string value as '...' without escaping: a value with a quote or a newline is
    # rendered as text Python cannot read, so the family rejects it (reported, not repaired).
    prompt, reply = _rendered_reply("LFM2.5-8B-A1B", [("note", {"text": "it's"})])
    assert reply == "<|tool_call_start|>[note(text='it's')]<|tool_call_end|>"
    assert registry.get("lfm2").parse(reply, prompt).deviation == dev.NOT_PYTHON_CALL


def test_templates_are_present():
    missing = [t for t in TEMPLATES if not Path(ROOT / "templates" / f"{t}.jinja").is_file()]
    assert not missing
