"""The runtime-conformance corpus: every detected template gets replies written from its own render, whose strict
parse is what each case claims; user case files are checked with file:line errors."""

import pytest

from harness.core.errors import HarnessError
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.suites.runtime_conformance.corpus_file import cases_from_file
from harness.pins.sources import load_sources, resolve_template

SOURCES = load_sources()
CORPORA = {t: build_corpus(resolve_template(t, SOURCES)) for t in SOURCES.templates}
DETECTED = [t for t, c in CORPORA.items() if c.family]


def test_every_detected_template_has_cases_and_the_others_say_why():
    assert len(DETECTED) >= 55
    for template, corpus in CORPORA.items():
        if corpus.family:
            assert len(corpus.cases) >= 9, (template, corpus.skipped)
        else:
            assert corpus.cases == [] and "no family detected" in corpus.skipped[0][1]


@pytest.mark.parametrize("template", DETECTED)
def test_call_cases_read_as_their_calls_and_near_misses_do_not(template):
    cases = {c.name: c for c in CORPORA[template].cases}
    expect = {name: c.expect for name, c in cases.items()}
    if "one-call" in cases:
        one = expect["one-call"]
        assert one["deviation"] is None and [c["name"] for c in one["calls"]] == ["get_weather"]
    if "zero-arguments" in cases:
        assert expect["zero-arguments"]["deviation"] is None and len(expect["zero-arguments"]["calls"]) == 1
    # typed-arguments is kept as the template renders it, even where its own parser then refuses it (Gemma 4
    # writes null as None, LFM2.5 a nested dict as JSON inside a Python call): the runtime gets that text too.
    if "two-calls" in cases:
        assert [c["name"] for c in expect["two-calls"]["calls"]] == ["get_weather", "get_time"]
    if "near-miss-unclosed" in cases:
        assert expect["near-miss-unclosed"]["deviation"] and not expect["near-miss-unclosed"]["calls"]
    assert expect["history-answer"]["calls"] == [] if "history-answer" in cases else True
    # The corpus's prompts are spread apart so several replies fit one scripted model. Every case is asked with
    # tool_choice auto but prose-required, whose point is the required one.
    for case in cases.values():
        assert case.reply and case.variants[0] == ("required" if case.name == "prose-required" else "auto")
    # The cases users report: text after a call and a call in reasoning left open are refused by the strict
    # parser with their named deviations; prose stays prose where a call is required.
    if "text-after-call" in cases:
        assert expect["text-after-call"]["deviation"] and not expect["text-after-call"]["calls"]
    if "reasoning-unclosed-call" in cases:
        assert not expect["reasoning-unclosed-call"]["calls"], expect["reasoning-unclosed-call"]
    assert expect["prose-required"]["calls"] == [] and cases["prose-required"].variants == ("required",)


def test_replies_come_from_the_template():
    hermes = {c.name: c for c in CORPORA["Qwen-Qwen2.5-7B-Instruct"].cases}
    assert hermes["one-call"].reply == \
        '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'
    assert hermes["near-miss-unclosed"].reply.endswith("}}") and hermes["near-miss-unclosed"].expect["deviation"]
    assert hermes["near-miss-foreign-markers"].reply.startswith("[TOOL_CALLS]")
    assert hermes["near-miss-bare-json"].expect["deviation"] == "bare-json"
    qwen3 = {c.name: c for c in CORPORA["Qwen-Qwen3-0.6B"].cases}
    assert qwen3["reasoning-then-call"].template_kwargs == {"enable_thinking": True}
    assert qwen3["reasoning-then-call"].expect["reasoning"] and qwen3["reasoning-then-call"].expect["calls"]
    left_open = qwen3["reasoning-unclosed-call"]
    assert "</think>" not in left_open.reply and "<tool_call>" in left_open.reply
    assert left_open.expect["deviation"] == "call-in-reasoning"
    assert hermes["text-after-call"].reply == hermes["one-call"].reply + "\nI asked for the forecast."
    twice = hermes["history-same-id"].messages
    assert [c["id"] for c in twice[1]["tool_calls"]] == ["call00001", "call00001"]



def test_harmony_calls_after_its_analysis_channel_and_a_malformed_call_stays_in_the_history_as_sent():
    """gpt-oss has no thinking switch: its reasoning-then-call reply is an analysis message, then the call on the
    commentary channel, read as reasoning and one call. The malformed-history case keeps the cut-short arguments
    as the string a client sends; a template that cannot render them says so instead."""
    harmony = {c.name: c for c in CORPORA["openai-gpt-oss-120b"].cases}
    thought = harmony["reasoning-then-call"]
    assert thought.template_kwargs == {} and thought.reply.startswith("<|channel|>analysis<|message|>")
    assert thought.reply.index("<|end|>") < thought.reply.index("to=functions.get_weather")
    assert thought.expect["reasoning"] and [c["name"] for c in thought.expect["calls"]] == ["get_weather"]
    assert thought.expect["deviation"] is None
    hermes = {c.name: c for c in CORPORA["Qwen-Qwen2.5-7B-Instruct"].cases}
    broken = hermes["history-malformed-call"]
    assert broken.messages[1]["tool_calls"][0]["function"]["arguments"] == '{"location": "Par'
    assert broken.expect["calls"] == [] and broken.reply == "My call was cut short; let me ask again."
    # Appended after the older cases: their prompts (and padding) are what they were.
    names = [c.name for c in CORPORA["Qwen-Qwen2.5-7B-Instruct"].cases]
    assert names[-1] == "history-malformed-call" and names.index("history-same-id") == len(names) - 2
    # A template that iterates the arguments as a mapping refuses them in words; one that renders no call (LFM2)
    # cannot be given them (its history writes calls in the family's format, from JSON arguments).
    why = {t: dict(c.skipped)["history-malformed-call"] for t, c in CORPORA.items()
           if c.family and "history-malformed-call" in dict(c.skipped)}
    assert all("refuses the conversation" in w or "renders no call" in w for w in why.values()), why
    assert "refuses the conversation" in why["Qwen3-Coder"] and "renders no call" in why["LFM2-8B-A1B"]
    assert len(why) < len(DETECTED) / 2


def test_a_reasoning_block_the_prompt_closed_is_not_closed_again_in_the_reply():
    # DeepSeek V3.2 without thinking prompts `<think></think>` but renders a past answer as `</think>` + text.
    v32 = {c.name: c for c in CORPORA["deepseek-ai-DeepSeek-V3.2"].cases}
    assert v32["history-answer"].reply == "Sunny, then cloudy, then rain."
    assert v32["one-call"].reply.startswith("\n\n<｜DSML｜function_calls>")
    # MiniMax-M3's prompt closes nothing: its bare `</mm:think>` is the reply's own "no reasoning" prefix.
    m3 = {c.name: c for c in CORPORA["MiniMax-M3"].cases}
    assert m3["history-answer"].reply == "</mm:think>Sunny, then cloudy, then rain."

def test_case_files_are_read_with_their_errors_located(tmp_path):
    ref = resolve_template("Qwen-Qwen2.5-7B-Instruct", SOURCES)
    good = tmp_path / "cases.yaml"
    good.write_text("- name: hello\n  messages: [{role: user, content: Hi}]\n  reply: Hello there.\n")
    corpus = cases_from_file(good, ref)
    assert [(c.name, c.expect["content"]) for c in corpus.cases] == [("hello", "Hello there.")]
    bad = tmp_path / "bad.yaml"
    bad.write_text("- name: hello\n  messages: [{role: user, content: Hi}]\n  reply: x\n- name: two\n  reply: y\n"
                   "  colour: red\n")
    with pytest.raises(HarnessError, match=r"bad.yaml:4: 1: missing messages; unknown colour"):
        cases_from_file(bad, ref)
