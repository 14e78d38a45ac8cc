"""Detection tells apart the templates that lack half of a tool format: calls render but `tools` is never read
(DeepSeek V3.1, R1-Distill-Qwen: detected, the tool list placed where the model card says), tools are read but no
call renders (Granite 3.3: declared from the template's own instruction), and neither (`no tools`, its reason
naming both halves)."""

import json

import pytest

from harness.pins.sources import resolve_template
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.live.opening import template_chat
from harness.live.tool_loop import _render
from harness.template.conformance import check_template
from harness.template.detect import detect, detect_declared
from harness.template.probe import probe_tools
from harness.template.system_tools import FIRST_USER, SYSTEM, place, placement_for

CALLS_WITHOUT_TOOLS = {"deepseek-ai-DeepSeek-V3.1": ("deepseek-v3.1", SYSTEM),
                       "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("deepseek-r1", FIRST_USER)}
NEITHER = ["HuggingFaceTB-SmolLM3-3B", "gguf-smollm2-135m-instruct-q4_1", "google-gemma-2-2b-it",
           "llama-cpp-rwkv-world", "microsoft-Phi-3.5-mini-instruct"]


def _found(template_id):
    ref = resolve_template(template_id)
    return ref, detect_declared(ref.text, ref.bos_token or "", ref.eos_token or "")


@pytest.mark.parametrize("template_id", sorted(CALLS_WITHOUT_TOOLS))
def test_a_rendered_call_is_detected_though_tools_are_never_read(template_id):
    family, message = CALLS_WITHOUT_TOOLS[template_id]
    _, found = _found(template_id)
    assert (found.family, found.status, found.reads_tools) == (family, "detected", False)
    assert "does not read the `tools` variable" in found.reason
    [finding] = [f for f in found.findings if f["name"] == "tools-in-system-prompt"]
    assert found.tool_placement.message == message and found.tool_placement.source in finding["detail"]
    assert found.to_json()["tool_placement"]["family"] == family
    assert "get_weather" in finding["wording"] and "<｜tool▁calls▁begin｜>" in finding["wording"]


@pytest.mark.parametrize("template_id", NEITHER)
def test_no_tools_says_both_halves_are_missing(template_id):
    _, found = _found(template_id)
    assert found.status == "no tools" and found.tool_placement is None
    assert "reads neither `tools`" in found.reason and "`tool_calls`" in found.reason


def test_granite_33_is_declared_from_its_own_instruction():
    ref, found = _found("ibm-granite-granite-3.3-2B-Instruct")
    assert (found.family, found.status) == ("granite", "declared")
    assert found.declared["evidence"].split('"')[1] in ref.text   # the quoted instruction is the template's own
    assert "respond only with <|tool_call|>" in found.reason
    assert found.tool_placement is None                          # it reads tools itself


def test_the_r1_llama_distill_is_declared_and_placed_like_its_qwen_sibling():
    _, found = _found("deepseek-ai-DeepSeek-R1-Distill-Llama-8B")
    assert (found.family, found.status) == ("deepseek-r1", "declared")
    assert detect(resolve_template("deepseek-ai-DeepSeek-R1-Distill-Llama-8B").text).status == "no tools"
    assert found.tool_placement is placement_for("deepseek-r1")
    assert "content is null" in found.reason
    family, prompt, source = found.reading_family()      # the forced-open <think> is the reply's to close
    assert (family, source) == ("deepseek-r1", "declared") and prompt.endswith("<｜Assistant｜><think>\n")


def test_deepseek_v31_prompt_carries_the_model_cards_tool_block_after_the_system_prompt():
    chat, _, found = template_chat("deepseek-ai-DeepSeek-V3.1")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]
    prompt = _render(chat, messages, probe_tools())
    head, tail = prompt.split("<｜User｜>", 1)
    assert head.startswith("<｜begin▁of▁sentence｜>Be brief.\n\n## Tools\nYou have access to the following tools:\n\n### get_weather\n")
    assert "Parameters: " + json.dumps(probe_tools()[0]["function"]["parameters"]) in head
    assert "IMPORTANT: ALWAYS adhere to this exact format for tool use:" in head and "get_weather" not in tail
    assert _render(chat, messages, None) == prompt.replace(head, "<｜begin▁of▁sentence｜>Be brief.")


def test_r1_distill_prompt_opens_the_first_user_message_with_the_tools():
    chat, _, _ = template_chat("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
    prompt = _render(chat, [{"role": "user", "content": "Weather?"}], probe_tools())
    assert prompt.startswith("<｜begin▁of▁sentence｜><｜User｜>You can call any of the following function tools")
    assert '"name": "get_weather"' in prompt and prompt.count("<｜User｜>") == 1
    assert "```\n<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n\nWeather?<｜Assistant｜>" in prompt


def test_place_leaves_messages_alone_without_tools_and_never_mutates():
    placement = placement_for("deepseek-v3.1")
    messages = [{"role": "user", "content": "hi"}]
    assert place(placement, messages, None) is messages and place(None, messages, probe_tools()) is messages
    placed = place(placement, messages, probe_tools())
    assert placed[0]["role"] == "system" and messages == [{"role": "user", "content": "hi"}]


def test_a_family_without_card_wording_says_live_runs_offer_no_tools():
    # A template of our own: renders a Hermes call, never reads tools.
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}"
                "<tool_call>\n{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}\n"
                "</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    found = detect(template)
    assert (found.family, found.tool_placement) == ("hermes", None)
    [finding] = found.findings
    assert finding["name"] == "tools-in-system-prompt" and "live runs offer no tools" in finding["detail"]


@pytest.mark.parametrize("template_id", ["deepseek-ai-DeepSeek-V3.1", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
                                         "ibm-granite-granite-3.3-2B-Instruct"])
def test_the_runtime_corpus_writes_each_call_in_the_family_and_offers_the_tools(template_id):
    ref = resolve_template(template_id)
    corpus = build_corpus(ref)
    [one] = [c for c in corpus.cases if c.name == "one-call"]
    assert [c["name"] for c in one.expect["calls"]] == ["get_weather"] and one.expect["deviation"] is None
    names = {c.name for c in corpus.cases}
    assert {"two-calls", "zero-arguments", "typed-arguments", "near-miss-foreign-markers"} <= names


def test_conformance_rows_keep_the_verdicts_apart():
    rows = {t: check_template(resolve_template(t)) for t in ("deepseek-ai-DeepSeek-V3.1", "google-gemma-2-2b-it")}
    assert rows["deepseek-ai-DeepSeek-V3.1"]["status"] == "detected"
    assert rows["deepseek-ai-DeepSeek-V3.1"]["round_trips"] is True
    assert [f["name"] for f in rows["deepseek-ai-DeepSeek-V3.1"]["findings"]] == ["tools-in-system-prompt"]
    assert rows["google-gemma-2-2b-it"]["status"] == "no tools"


@pytest.mark.parametrize("template_id,written", [
    ("ibm-granite-granite-3.3-2B-Instruct", '<|tool_call|>[{"name": "get_weather", "arguments": {"location": "Paris"}}]'),
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}"),
])
def test_a_declared_template_shows_past_calls_as_the_family_writes_them(template_id, written):
    chat, _, _ = template_chat(template_id)
    assert chat.calls_in_content
    call = {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "sunny"}]
    assert written in _render(chat, messages, probe_tools())
    chat.calls_in_content = False
    assert written not in _render(chat, messages, probe_tools())
