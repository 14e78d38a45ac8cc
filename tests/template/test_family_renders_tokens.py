"""The families of the JSON and special-token formats (Mistral, FireFunction, Functionary, Command R, Granite,
Apriel, Nemotron, Apertus, MiniMax-M1, GigaChat, DeepSeek, Kimi, Harmony) read what their templates render beyond
the one-call probe: two calls in one turn, awkward strings, nested arguments, reasoning. Plus the behaviours
specific to their custom modules (Functionary v3.2's >>> recipients, Harmony's channels, Kimi K3's sections,
DeepSeek's DSML typing)."""

import json

import pytest

from harness import families as registry
from harness.core.constants import ROOT
from harness.template.detect import cut_at_end_of_turn, reply_start, with_string_arguments
from harness.formats import deviations as dev
from harness.template.probe import PROBE_TOOL
from harness.template.render import render

# Every template here renders each call of a turn; GigaChat and gpt-oss render only the first (ONE_CALL_ONLY).
TEMPLATES = {
    "mistralai-Mistral-Nemo-Instruct-2407": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506": "mistral-call-id",
    "unsloth-mistral-Devstral-Small-2507": "mistral-args",
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral-args",
    "meetkai-functionary-medium-v3.1": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2": "functionary-v3.2",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command-r7b",
    "Cohere2MoE": "command-r7b",
    "CohereForAI-c4ai-command-r-plus-tool_use": "command-r-plus",
    "unsloth-Apriel-1.5": "apriel",
    "Apriel-1.6-15b-Thinker-fixed": "apriel",
    "NVIDIA-Nemotron-Nano-v2": "nemotron-v2",
    "Apertus-8B-Instruct": "apertus",
    "MiniMax-M1": "minimax-m1",
    "GigaChat3-10B-A1.8B": "gigachat3",
    "GigaChat3.1-10B-A1.8B": "gigachat3.1",
    "deepseek-ai-DeepSeek-V3.1": "deepseek-v3.1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek-r1",
    "deepseek-ai-DeepSeek-V3.2": "deepseek-v3.2",
    "deepseek-ai-DeepSeek-V4": "deepseek-v4",
    "deepseek-ai-DeepSeek-V4-Flash-0731": "deepseek-v4",
    "moonshotai-Kimi-K2": "kimi-k2",
    "Kimi-K3": "kimi-k3",
    "openai-gpt-oss-120b": "harmony",
    "llm-jp-llm-jp-4.1-8b-thinking": "llm-jp-harmony",
}
ONE_CALL_ONLY = {"GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B", "openai-gpt-oss-120b"}
# Templates that concatenate the arguments as a JSON string (the OpenAI wire shape) instead of a dict.
STRING_ARGUMENTS = {"meetkai-functionary-medium-v3.2"}
TWO_CALLS = [
    ("get_weather", {"location": "São Paulo", "days": 3}),
    ("search_notes", {"query": 'café "naïve" <b> & x', "limit": 5, "exact": True}),
]
NESTED = [("set_prefs", {"opts": {"units": "metric", "tags": ["a", "b"]}, "flag": False, "note": None})]


def _template(template_id):
    return (ROOT / "templates" / f"{template_id}.jinja").read_text(encoding="utf-8")


def _turn(calls, content="", **extra):
    turn = [{"role": "user", "content": "Weather in São Paulo, and search my notes."}]
    if calls is not None:
        message = {"role": "assistant", "content": content, "tool_calls": [
            {"id": f"call0000{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls, 1)]}
        turn.append({**message, **extra})
    return turn


def _rendered(template_id, calls, content="", end_of_turn=True, **variables):
    """(generation prompt, prompt up to the reply, the reply as the template renders it)."""
    template = _template(template_id)
    kwargs = {"tools": [PROBE_TOOL], "bos_token": "<s>", "eos_token": "</s>", **variables}
    prompt = render(template, _turn(None), add_generation_prompt=True, **kwargs)
    messages = _turn(calls, content)
    if template_id in STRING_ARGUMENTS:
        messages = with_string_arguments(messages)
    history = render(template, messages, **kwargs)
    start = reply_start(prompt, history)
    reply = history[start:]
    # A family whose messages end before its turn does (Harmony's <|end|>) says where the turn ends.
    ends = getattr(registry.get(TEMPLATES[template_id]).parser, "turn_ends", None) if template_id in TEMPLATES else None
    return prompt, prompt[:start], cut_at_end_of_turn(reply, "</s>", ends) if end_of_turn else reply


def _calls(result):
    return [(c.name, c.arguments) for c in result.calls]


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_two_calls_as_the_template_renders_them(template_id):
    _, prompt, reply = _rendered(template_id, TWO_CALLS)
    result = registry.get(TEMPLATES[template_id]).parse(reply, prompt)
    assert result.accepted, (reply, result.deviation, result.detail)
    assert _calls(result) == (TWO_CALLS[:1] if template_id in ONE_CALL_ONLY else TWO_CALLS)


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_nested_arguments_and_null_as_the_template_renders_them(template_id):
    # JSON families and the typed markup families (DSML, Kimi K3) give back the values as written, typed.
    _, prompt, reply = _rendered(template_id, NESTED)
    result = registry.get(TEMPLATES[template_id]).parse(reply, prompt)
    assert result.accepted, (reply, result.deviation, result.detail)
    assert _calls(result) == NESTED


def test_firefunction_reads_its_template_given_the_functions_variable():
    # The template takes tools as a `functions` JSON string (and a `datetime`), not `tools`; detection supplies
    # them as llama.cpp did (tools-as-functions), and its calls are the firefunction family's.
    template = _template("fireworks-ai-llama-3-firefunction-v2")
    variables = {"functions": json.dumps([PROBE_TOOL["function"]]), "datetime": "2026-01-01",
                 "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    prompt = render(template, _turn(None), **variables)
    history = render(template, _turn(TWO_CALLS), **variables)
    reply = cut_at_end_of_turn(history[reply_start(prompt, history) :], "<|eot_id|>")
    assert reply.startswith(" functools[")
    result = registry.get("firefunction").parse(reply)
    assert result.accepted and _calls(result) == TWO_CALLS


def test_functionary_v32_prompt_opens_the_recipient():
    full_prompt, prompt, reply = _rendered("meetkai-functionary-medium-v3.2", TWO_CALLS[:1], content="Let me check.")
    assert full_prompt.endswith(">>>") and reply.startswith("all\nLet me check.>>>get_weather\n")
    result = registry.get("functionary-v3.2").parse(reply, prompt)
    assert result.accepted and result.content == "Let me check." and _calls(result) == TWO_CALLS[:1]


def test_functionary_v32_text_channel_is_content():
    family = registry.get("functionary-v3.2")
    result = family.parse("all\nIt is sunny, no tool needed.", prompt="assistant<|end_header_id|>\n\n>>>")
    assert result.calls == [] and result.deviation is None and result.content == "It is sunny, no tool needed."
    # Without the prompt's >>>, a Python prompt in prose is prose.
    assert family.parse("Type >>> 1 + 1 to try.").deviation is None
    after = family.parse('get_weather\n{"location": "Paris"}>>>all\nDone.', prompt=">>>")
    assert after.deviation == dev.TRAILING_TEXT


def test_harmony_analysis_is_reasoning_and_the_call_is_read():
    template = _template("openai-gpt-oss-120b")
    kwargs = {"tools": [PROBE_TOOL], "bos_token": "<|startoftext|>", "eos_token": "<|return|>"}
    full_prompt = render(template, _turn(None), add_generation_prompt=True, **kwargs)
    history = render(template, _turn(TWO_CALLS[:1], thinking="The user wants the forecast."), **kwargs)
    start = reply_start(full_prompt, history)
    reply = history[start : history.index("<|call|>", start) + len("<|call|>")]
    assert "<|channel|>analysis<|message|>The user wants the forecast.<|end|>" in reply
    result = registry.get("harmony").parse(reply, full_prompt[:start])
    assert result.accepted and result.reasoning == "The user wants the forecast." and result.content == ""
    assert _calls(result) == TWO_CALLS[:1]


def test_harmony_answers_and_preambles_are_content():
    harmony = registry.get("harmony")
    prompt = "<|start|>user<|message|>hi<|end|><|start|>assistant"
    answer = harmony.parse("<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>51",
                           prompt)
    assert answer.calls == [] and answer.deviation is None and answer.content == "51" and answer.reasoning == "Simple."
    # The recipient in the channel header, as gpt-oss writes it, and in the role header, as the template renders it.
    for header in ("<|channel|>commentary to=functions.get_time <|constrain|>json", " to=functions.get_time<|channel|>commentary json"):
        result = harmony.parse(f"<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant{header}<|message|>{{}}",
                               prompt)
        assert result.accepted and result.content == "Checking." and _calls(result) == [("get_time", {})]
    assert harmony.parse("<|channel|>analysis<|message|>Still thinking", prompt).deviation == dev.UNCLOSED_REASONING
    builtin = harmony.parse("<|channel|>analysis to=python code<|message|>print(1)", prompt)
    assert builtin.deviation == dev.MALFORMED_CALL


def test_kimi_k3_reasoning_and_prompt_opened_sections():
    family = registry.get("kimi-k3")
    messages_extra = {"reasoning_content": "Two lookups."}
    template = _template("Kimi-K3")
    for thinking in (True, False):
        kwargs = {"tools": [PROBE_TOOL], "bos_token": "", "eos_token": "<|im_end|>", "thinking": thinking}
        prompt = render(template, _turn(None), add_generation_prompt=True, **kwargs)
        history = render(template, _turn(TWO_CALLS, "On it.", **messages_extra), **kwargs)
        start = reply_start(prompt, history)
        reply = cut_at_end_of_turn(history[start:], "<|im_end|>")
        result = family.parse(reply, prompt[:start])
        assert result.accepted, (reply, result.deviation, result.detail)
        assert _calls(result) == TWO_CALLS and result.content == "On it."
        assert result.reasoning == ("Two lookups." if thinking else None)


def test_kimi_k3_answer_without_tools_is_content():
    result = registry.get("kimi-k3").parse("Easy.<|close|>think<|sep|><|open|>response<|sep|>It is 51."
                                           "<|close|>response<|sep|><|close|>message<|sep|>",
                                           prompt='<|open|>message role="assistant"<|sep|><|open|>think<|sep|>')
    assert result.calls == [] and result.deviation is None
    assert result.content == "It is 51." and result.reasoning == "Easy."


def test_dsml_values_are_typed_by_the_string_attribute():
    family = registry.get("deepseek-v3.2")
    param = '<｜DSML｜parameter name="{}" string="{}">{}</｜DSML｜parameter>'
    text = "\n".join([
        "<｜DSML｜function_calls>", '<｜DSML｜invoke name="f">',
        param.format("a", "true", "3"), param.format("b", "false", "3"),
        param.format("c", "true", ' spaced "quote" '), param.format("d", "false", '{"k": [true, null]}'),
        "</｜DSML｜invoke>", "</｜DSML｜function_calls>"])
    (call,) = family.parse(text).calls
    assert call.arguments == {"a": "3", "b": 3, "c": ' spaced "quote" ', "d": {"k": [True, None]}}
    # V3.2's block is not V4's.
    assert registry.get("deepseek-v4").parse(text).deviation == dev.MALFORMED_CALL


def test_dsml_thinking_mode_keeps_reasoning_apart():
    for template_id, family in (("deepseek-ai-DeepSeek-V3.2", "deepseek-v3.2"), ("deepseek-ai-DeepSeek-V4", "deepseek-v4")):
        template = _template(template_id)
        kwargs = {"tools": [PROBE_TOOL], "bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
                  "thinking": True}
        prompt = render(template, _turn(None), add_generation_prompt=True, **kwargs)
        assert prompt.endswith("<think>")
        history = render(template, _turn(TWO_CALLS, reasoning_content="Two lookups."), **kwargs)
        start = reply_start(prompt, history)
        reply = cut_at_end_of_turn(history[start:], "<｜end▁of▁sentence｜>")
        result = registry.get(family).parse(reply, prompt[:start])
        assert result.accepted and result.reasoning == "Two lookups." and _calls(result) == TWO_CALLS


def test_command_r7b_thinking_is_reasoning():
    template = _template("Cohere2MoE")
    kwargs = {"tools": [PROBE_TOOL], "bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"}
    prompt = render(template, _turn(None), add_generation_prompt=True, **kwargs)
    history = render(template, _turn(TWO_CALLS, reasoning_content="I will call both."), **kwargs)
    start = reply_start(prompt, history)
    reply = cut_at_end_of_turn(history[start:], "<|END_OF_TURN_TOKEN|>")
    result = registry.get("command-r7b").parse(reply, prompt[:start])
    assert result.accepted and result.reasoning == "I will call both." and _calls(result) == TWO_CALLS
    assert [c.id for c in result.calls] == ["0", "1"]


def test_apriel_16_reasoning_ends_at_begin_final_response():
    # The generation prompt opens the reasoning with "Here are my reasoning steps:".
    full_prompt, _, _ = _rendered("Apriel-1.6-15b-Thinker-fixed", TWO_CALLS)
    assert full_prompt.endswith("Here are my reasoning steps:\n")
    reply = ('I need two tools.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "get_time", "arguments": {}}]'
             "</tool_calls>")
    result = registry.get("apriel").parse(reply, full_prompt)
    assert result.accepted and result.reasoning == "I need two tools." and _calls(result) == [("get_time", {})]


def test_ministral_think_block_is_reasoning():
    template = _template("mistralai-Ministral-3-14B-Reasoning-2512")
    kwargs = {"tools": [PROBE_TOOL], "bos_token": "<s>", "eos_token": "</s>"}
    prompt = render(template, _turn(None), add_generation_prompt=True, **kwargs)
    thinking = [{"type": "thinking", "thinking": "Check the forecast."}]
    history = render(template, _turn(TWO_CALLS[:1], content=thinking), **kwargs)
    start = reply_start(prompt, history)
    reply = cut_at_end_of_turn(history[start:], "</s>")
    assert reply.startswith("[THINK]Check the forecast.[/THINK][TOOL_CALLS]")
    result = registry.get("mistral-args").parse(reply, prompt[:start])
    assert result.accepted and result.reasoning == "Check the forecast." and _calls(result) == TWO_CALLS[:1]


def test_mistral_call_id_keeps_the_id():
    _, prompt, reply = _rendered("Mistral-Small-3.2-24B-Instruct-2506", TWO_CALLS)
    result = registry.get("mistral-call-id").parse(reply, prompt)
    assert [c.id for c in result.calls] == ["call00001", "call00002"]


def test_templates_are_present():
    missing = [t for t in [*TEMPLATES, "fireworks-ai-llama-3-firefunction-v2"]
               if not (ROOT / "templates" / f"{t}.jinja").is_file()]
    assert not missing
