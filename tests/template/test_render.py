"""harness.template.render against Hugging Face's own tooling, on every pinned template; plus the sandbox and the guards.

The reference is a real `PreTrainedTokenizerFast.apply_chat_template(..., tokenize=False)`, which prepares the
messages (drops None-valued keys, adds the tokenizer's special tokens) and then calls
`transformers.utils.chat_template_utils.render_jinja_template`. Comparing against the whole call, not only
render_jinja_template, also checks that our input preparation matches HF's.
"""

from __future__ import annotations

import copy
import functools
import re
from datetime import datetime

import pytest

import harness.template.render as render_module
from harness.template import probe
from harness.core.constants import TEMPLATES_DIR
from harness.core.errors import TemplateError, TemplateRaisedError
from harness.template.render import compile_template, render, template_variables

TEMPLATES = sorted(TEMPLATES_DIR.glob("*.jinja"))
TEMPLATE_IDS = [path.stem for path in TEMPLATES]
# Llama 3.x, Granite, gpt-oss and others print today's date via strftime_now; both renderers get this clock.
FROZEN_NOW = datetime(2024, 7, 26, 9, 30, 0)
BOS, EOS = "<s>", "</s>"


def _source(path) -> str:
    return path.read_text(encoding="utf-8")


def test_pinned_templates_are_present():
    # The llama.cpp 0.3.36 sdist ships 70 published templates; an empty directory would make the
    # parametrized tests below vanish silently instead of failing.
    assert len(TEMPLATES) >= 70, f"expected the pinned templates in {TEMPLATES_DIR}, found {len(TEMPLATES)}"


# ---------------------------------------------------------------------------------------------------------------
# Conversations rendered through both renderers. Each builder returns fresh objects (templates never share state).

def _user():
    return probe.probe_messages(with_call=False)


def _system_user():
    return [{"role": "system", "content": probe.PROBE_SYSTEM}, *_user()]


def _multi_turn():
    return [*_user(), {"role": "assistant", "content": "Which unit do you prefer?"},
            {"role": "user", "content": "Celsius."}]


def _call_with_content_none():
    # OpenAI's shape for a call-only turn; apply_chat_template drops the None key before rendering.
    messages = probe.probe_messages(with_call=True)
    messages[1]["content"] = None
    return messages


def _with_reasoning():
    # transformers copies reasoning_content to `thinking` (gpt-oss reads that name).
    return [*_user(), {"role": "assistant", "content": "Sunny.", "reasoning_content": "Check the forecast."},
            {"role": "user", "content": probe.PROBE_FOLLOW_UP}]


def _reasoning_under_other_names():
    # A final assistant turn whose reasoning comes as `reasoning` / `thinking`: templates read `reasoning_content`
    # (Qwen3, DeepSeek, ...) or `thinking` (gpt-oss) only because transformers copies it across.
    return [*_user(), {"role": "assistant", "content": "Sunny.", "reasoning": "The forecast says sun."}]


def _non_ascii():
    # Templates tojson the arguments: HF keeps non-ASCII as is (ensure_ascii=False) and does not escape <, >, &.
    messages = probe.probe_messages(with_call=True)
    messages[0]["content"] = "Météo à Zürich & <東京>?"
    messages[1]["tool_calls"][0]["function"]["arguments"] = {"location": "Zürich <東京> & 'Ōsaka'", "days": 2}
    return messages


def _tool_result_then_user():
    # The brief's literal shape: a user follow-up straight after the tool result, without the assistant's answer.
    return [message for message in probe.full_conversation() if message.get("content") != probe.PROBE_ANSWER]


CASES = {
    "user": lambda: dict(messages=_user()),
    "system_user": lambda: dict(messages=_system_user()),
    "user_generation_prompt": lambda: dict(messages=_user(), add_generation_prompt=True),
    "multi_turn": lambda: dict(messages=_multi_turn(), add_generation_prompt=True),
    "probe_call": lambda: dict(messages=probe.probe_messages(with_call=True)),
    "probe_call_tools": lambda: dict(messages=probe.probe_messages(with_call=True), tools=probe.probe_tools()),
    "probe_prompt_tools": lambda: dict(messages=_user(), tools=probe.probe_tools(), add_generation_prompt=True),
    "tools_empty_list": lambda: dict(messages=_user(), tools=[], add_generation_prompt=True),
    "full": lambda: dict(messages=probe.full_conversation()),
    "full_tools": lambda: dict(messages=probe.full_conversation(), tools=probe.probe_tools(),
                               add_generation_prompt=True),
    "tool_result_then_user": lambda: dict(messages=_tool_result_then_user(), tools=probe.probe_tools()),
    "enable_thinking_false": lambda: dict(messages=_user(), add_generation_prompt=True, enable_thinking=False),
    "enable_thinking_true": lambda: dict(messages=_user(), add_generation_prompt=True, enable_thinking=True),
    "call_content_none": lambda: dict(messages=_call_with_content_none(), tools=probe.probe_tools()),
    "reasoning_content": lambda: dict(messages=_with_reasoning(), add_generation_prompt=True),
    "reasoning_other_names": lambda: dict(messages=_reasoning_under_other_names()),
    "thinking_name": lambda: dict(messages=[*_user(), {"role": "assistant", "content": "Sunny.",
                                                       "thinking": "The forecast says sun."}]),
    "non_ascii_tojson": lambda: dict(messages=_non_ascii(), tools=probe.probe_tools()),
    "no_special_tokens": lambda: dict(messages=_user(), add_generation_prompt=True, bos_token=None, eos_token=None),
    "documents": lambda: dict(messages=_user(), add_generation_prompt=True,
                              documents=[{"title": "Forecast", "text": "Rain on Thursday."}]),
    "llama_variables": lambda: dict(messages=_user(), tools=probe.probe_tools(), add_generation_prompt=True,
                                    builtin_tools=["wolfram_alpha"], tools_in_user_message=False,
                                    date_string="01 Jan 2025"),
}


@functools.cache
def _hf_tokenizer(bos_token, eos_token):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    named = (("bos_token", bos_token), ("eos_token", eos_token))
    specials = {name: token for name, token in named if token is not None}
    vocab = {"[UNK]": 0, **{token: index for index, token in enumerate(specials.values(), start=1)}}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="[UNK]")), **specials)


def _hf_render(template, messages, *, tools=None, add_generation_prompt=False, bos_token=BOS, eos_token=EOS, **kwargs):
    tokenizer = _hf_tokenizer(bos_token, eos_token)
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                         add_generation_prompt=add_generation_prompt, **kwargs)


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(render_module, "_now", lambda: FROZEN_NOW)
    try:
        import transformers.utils.chat_template_utils as chat_template_utils
    except ImportError:
        return  # only our renderer runs; the fidelity tests skip themselves

    class FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz=None):
            return FROZEN_NOW

    # HF's strftime_now calls the module's `datetime.now()` at render time, so patching the module name freezes it.
    monkeypatch.setattr(chat_template_utils, "datetime", FrozenDatetime)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("path", TEMPLATES, ids=TEMPLATE_IDS)
def test_render_matches_transformers(path, case, frozen_clock):
    pytest.importorskip("transformers", reason="transformers (test-only dependency) is needed as the reference")
    pytest.importorskip("tokenizers", reason="tokenizers is needed to build the reference tokenizer")
    template = _source(path)
    ours_inputs, theirs_inputs = CASES[case](), CASES[case]()
    ours_inputs.setdefault("bos_token", BOS)
    ours_inputs.setdefault("eos_token", EOS)
    untouched = copy.deepcopy(ours_inputs)
    try:
        expected = _hf_render(template, **theirs_inputs)
    except Exception as hf_error:  # noqa: BLE001 -- whatever HF raises, we must raise too
        with pytest.raises(TemplateError) as ours:
            render(template, **ours_inputs)
        assert str(hf_error) in str(ours.value), f"HF failed with {hf_error!r}, we with {ours.value!r}"
    else:
        assert render(template, **ours_inputs) == expected
    assert ours_inputs == untouched, "render must not modify the caller's messages, tools or variables"


def test_strftime_now_reads_the_clock_so_dates_are_frozen_in_both(frozen_clock):
    pytest.importorskip("transformers", reason="transformers (test-only dependency) is needed as the reference")
    llama = _source(TEMPLATES_DIR / "meta-llama-Llama-3.1-8B-Instruct.jinja")
    ours = render(llama, _user(), bos_token=BOS, eos_token=EOS)
    assert "Today Date: 26 Jul 2024" in ours
    assert ours == _hf_render(llama, _user())
    assert render("{{ strftime_now('%Y-%m-%d') }}", _user()) == "2024-07-26"


def test_unfrozen_clock_gives_today():
    before = datetime.now().strftime("%Y-%m-%d")
    rendered = render("{{ strftime_now('%Y-%m-%d') }}", _user())
    assert rendered in {before, datetime.now().strftime("%Y-%m-%d")}  # either side of midnight


# ---------------------------------------------------------------------------------------------------------------
# The probe shapes through every template. Failures are recorded, not hidden: each template below rejects the
# probe for the stated reason, under transformers exactly as under our renderer (test_render_matches_transformers).

PROBE_FAILURES = {
    # Both Kimi templates record call ids with list.append, which Jinja's immutable sandbox (HF's) refuses.
    "Kimi-K2-Instruct": "access to attribute 'append' of 'list' object is unsafe",
    "Kimi-K2-Thinking": "access to attribute 'append' of 'list' object is unsafe",
    # Functionary v3.2 concatenates arguments as text: it needs them as a JSON string, not a dict.
    "meetkai-functionary-medium-v3.2": 'can only concatenate str (not "dict") to str',
    # Firefunction v2 reads its own `functions` variable, not `tools`.
    "fireworks-ai-llama-3-firefunction-v2": "'functions' is undefined",
    # llama.cpp's own template applies tojson to a `map` result, which is a list in llama.cpp's engine but a
    # generator in Jinja.
    "llama-cpp-deepseek-r1": "Object of type generator is not JSON serializable",
}
FULL_CONVERSATION_FAILURES = {
    **PROBE_FAILURES,
    # Gemma 2 has no system role and says so.
    "google-gemma-2-2b-it": "System role not supported",
}
# Without the assistant's answer between the tool result and the follow-up, these reject the conversation.
FOLLOW_UP_AFTER_RESULT_FAILURES = {
    **FULL_CONVERSATION_FAILURES,
    "Mistral-Small-3.2-24B-Instruct-2506": "conversation roles must alternate",
    "mistralai-Ministral-3-14B-Reasoning-2512": "conversation roles must alternate",
    "mistralai-Mistral-Nemo-Instruct-2407": "conversation roles must alternate",
}


def _expect(template, messages, failures, name, **kwargs):
    if name in failures:
        with pytest.raises(TemplateError, match=re.escape(failures[name])):
            render(template, messages, tools=probe.probe_tools(), bos_token=BOS, eos_token=EOS, **kwargs)
        return None
    return render(template, messages, tools=probe.probe_tools(), bos_token=BOS, eos_token=EOS, **kwargs)


@pytest.mark.parametrize("path", TEMPLATES, ids=TEMPLATE_IDS)
def test_probe_renders(path, frozen_clock):
    out = _expect(_source(path), probe.probe_messages(with_call=True), PROBE_FAILURES, path.stem)
    if out is not None:
        assert probe.PROBE_USER in out


@pytest.mark.parametrize("path", TEMPLATES, ids=TEMPLATE_IDS)
def test_full_conversation_renders(path, frozen_clock):
    out = _expect(_source(path), probe.full_conversation(), FULL_CONVERSATION_FAILURES, path.stem,
                  add_generation_prompt=True)
    if out is not None:
        for text in (probe.PROBE_SYSTEM, probe.PROBE_USER, "rain", probe.PROBE_ANSWER, probe.PROBE_FOLLOW_UP):
            assert text in out, f"{text!r} missing from the render"


@pytest.mark.parametrize("path", TEMPLATES, ids=TEMPLATE_IDS)
def test_follow_up_right_after_tool_result(path, frozen_clock):
    # Why full_conversation() carries the assistant's answer to the tool result: the Mistral templates demand it.
    name = path.stem
    if "alternate" in FOLLOW_UP_AFTER_RESULT_FAILURES.get(name, ""):
        with pytest.raises(TemplateRaisedError, match="(?i)conversation roles must alternate"):
            render(_source(path), _tool_result_then_user(), tools=probe.probe_tools())
    else:
        _expect(_source(path), _tool_result_then_user(), FOLLOW_UP_AFTER_RESULT_FAILURES, name)


def test_probe_shapes():
    assert len(probe.PROBE_CALL_ID) == 9 and probe.PROBE_CALL_ID.isalnum()
    call_turn = probe.probe_messages(with_call=True)[1]
    assert call_turn["content"] == "" and call_turn["tool_calls"][0]["id"] == probe.PROBE_CALL_ID
    assert call_turn["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": probe.PROBE_CALL["arguments"]}
    assert isinstance(probe.PROBE_CALL["arguments"]["days"], int)
    schema = probe.PROBE_TOOL["function"]["parameters"]
    assert schema["required"] == ["location"] and schema["properties"]["days"]["type"] == "integer"
    tool_turn = probe.full_conversation()[3]
    assert tool_turn == {"role": "tool", "tool_call_id": probe.PROBE_CALL_ID, "name": "get_weather",
                         "content": probe.PROBE_RESULT}
    # Set aside the call and its result (as Mistral's alternation check does) and user and assistant alternate.
    roles = [m["role"] for m in probe.full_conversation()[1:] if m["role"] != "tool" and "tool_calls" not in m]
    assert roles == ["user", "assistant", "user"]
    first = probe.full_conversation()
    first[2]["tool_calls"][0]["function"]["arguments"]["days"] = 99
    assert probe.full_conversation()[2]["tool_calls"][0]["function"]["arguments"]["days"] == 3


# ---------------------------------------------------------------------------------------------------------------
# Sandbox, errors and runaway guards.

@pytest.mark.parametrize("escape", [
    "{{ ''.__class__.__mro__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ raise_exception.__globals__['os'] }}",
    "{{ lipsum.__globals__['os'] }}",
    "{{ self.__init__.__globals__ }}",
    "{{ messages.__class__.__subclasses__() }}",
    "{% set ns = namespace(_hidden=1) %}",
])
def test_attribute_escapes_are_refused(escape):
    with pytest.raises(TemplateError, match="sandbox refused.*(unsafe|underscore)"):
        render(escape, _user())


def test_a_lone_unsafe_attribute_is_inert():
    # The sandbox returns an Undefined for an unsafe attribute; it prints as nothing and raises once used (above).
    assert render("[{{ raise_exception.__globals__ }}|{{ messages.__class__ }}]", _user()) == "[|]"


def test_template_cannot_mutate_its_inputs():
    messages = _user()
    with pytest.raises(TemplateError, match="'append' of 'list' object is unsafe"):
        render("{% set _ = messages.append({'role': 'system'}) %}", messages)
    with pytest.raises(TemplateError, match="unsafe"):
        render("{% set _ = messages[0].update({'content': 'x'}) %}", messages)
    assert messages == _user()


def test_raise_exception_message_surfaces_with_line():
    with pytest.raises(TemplateRaisedError) as raised:
        render("line one\n{{ raise_exception('Conversation roles must alternate') }}", _user())
    assert raised.value.template_message == "Conversation roles must alternate"
    assert str(raised.value) == "template raised at line 2: Conversation roles must alternate"


def test_syntax_error_names_the_line():
    with pytest.raises(TemplateError, match=r"syntax error at line 3: .*"):
        compile_template("ok\n{{ messages }}\n{% if %}\n")
    with pytest.raises(TemplateError, match="syntax error at line 2"):
        render("ok\n{% for m in messages %}", _user())


def test_runtime_error_names_the_line():
    with pytest.raises(TemplateError, match=r"render failed at line 3: UndefinedError: 'nothing' is undefined"):
        render("a\nb\n{{ nothing.at_all }}", _user())


@pytest.mark.parametrize("runaway", [
    "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxx{% endfor %}{% endfor %}",
    "{{ 'a' * 10**10 }}",
    "{{ [1] * 10**10 }}",
    "{{ 2 ** 1000000000000 }}",  # Jinja's ** is left-associative: 2 ** 10**12 would be (2**10)**12
    "{% set ns = namespace(v='ab') %}{% for i in range(64) %}{% set ns.v = ns.v ~ ns.v %}{% endfor %}",
    "{% set ns = namespace(v='ab') %}{% for i in range(64) %}{% set ns.v = ns.v + ns.v %}{% endfor %}",
    "{{ '%0999999999d' % 1 }}",
    "{{ 'x'.ljust(10**10) }}",
])
def test_runaway_output_is_stopped(runaway):
    with pytest.raises(TemplateError, match="render stopped"):
        render(runaway, _user())


def test_runaway_time_is_stopped(monkeypatch):
    monkeypatch.setattr(render_module, "MAX_RENDER_SECONDS", 0.3)
    with pytest.raises(TemplateError, match="longer than 0.3 s"):
        render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", _user())


def test_unbounded_recursion_is_an_error():
    with pytest.raises(TemplateError, match="recursion"):
        render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", _user())


def test_guards_do_not_apply_to_ordinary_arithmetic():
    assert render("{{ 'ab' * 3 }}|{{ 2 ** 10 }}|{{ '%05d' % 7 }}|{{ 7 % 2 }}|{{ 'x'.ljust(3) }}.", _user()) == \
        "ababab|1024|00007|1|x  ."


def test_bad_inputs_are_template_errors():
    with pytest.raises(TemplateError, match="empty conversation"):
        render("{{ messages }}", [])
    with pytest.raises(TemplateError, match="message 0 must be a dict"):
        render("{{ messages }}", ["hello"])
    with pytest.raises(TemplateError, match="tool 0 must be a JSON-schema dict"):
        render("{{ tools }}", _user(), tools=[print])
    with pytest.raises(TemplateError, match="continue_final_message"):
        render("{{ messages }}", _user(), continue_final_message=True)
    with pytest.raises(TemplateError, match="must be a string"):
        compile_template(None)


def test_variables_follow_hf():
    probe_template = ("{{ tools is none }}|{{ tools|length if tools is not none }}|{{ documents is none }}|"
                      "{{ bos_token is defined }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ custom }}")
    assert render(probe_template, _user()) == "True||True|True||False|"
    assert render(probe_template, _user(), tools=[], bos_token=None, eos_token="</s>", add_generation_prompt=True,
                  custom=7) == "False|0|True|False|</s>|True|7"


def test_tojson_keeps_html_and_unicode_and_takes_hf_options():
    out = render("{{ {'b': '<&>', 'a': 'é'}|tojson }}|"
                 "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}", _user())
    assert out == '{"b": "<&>", "a": "é"}|{"a":2,"b":1}'


def test_generation_block_renders_its_body():
    assert render("{% generation %}{{ messages[0].content }}{% endgeneration %}!", _user()) == probe.PROBE_USER + "!"


def test_compiled_templates_are_cached_and_variables_listed():
    source = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ tools }}"
    assert compile_template(source) is compile_template(source)
    assert template_variables(source) == {"bos_token", "messages", "tools"}
