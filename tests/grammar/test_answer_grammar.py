"""The "auto" grammar from the first token, checked with llama.cpp's own grammar machinery: every family's
grammar refuses an answer that opens like a call (marker-less JSON, a fence, a bracket, another family's
marker) or carries a call in a JSON dialect further on, and still takes a plain answer; a reasoning block opens
the reply only where the template knows the tag. (The family's calls themselves are accepted: test_grammar.py.)"""

from __future__ import annotations

import pytest
import requirements

requirements.binding()     # llama.cpp itself compiles and checks these grammars

from harness import families as registry  # noqa: E402
from harness.grammar import GENERIC, build_grammar  # noqa: E402
from harness.backends.embedded.grammar_check import GrammarChecker  # noqa: E402
from harness.scripted import llama_cpp_models  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_time", "description": "the time", "parameters": {
             "type": "object", "properties": {"timezone": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "get_weather", "description": "the weather", "parameters": {
             "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]
NAMES = [n for n in registry.names() if n != GENERIC]


def fam(name):
    return registry.get(name)


@pytest.fixture(scope="module")
def checker():
    return GrammarChecker(llama_cpp_models() / "ggml-vocab-qwen2.gguf")


@pytest.fixture(scope="module")
def specs():
    return {name: {choice: build_grammar(name, TOOLS, choice) for choice in ("auto", "required")} for name in NAMES}


# Replies that open like a call without being the family's call: each refused from its first token on.
CALL_LIKE = ['{"name": "get_time", "arguments": {}}', '```json\n{"name": "get_time", "arguments": {}}\n```',
             '[{"name": "get_time", "arguments": {}}]', ' \n {"name": "get_time", "arguments": {}}']
# Other families' openers (Hermes, Mistral, Llama 3), refused where they are not this family's own marker.
FOREIGN = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")


@pytest.mark.parametrize("name", NAMES)
def test_auto_grammar_refuses_an_answer_that_opens_like_a_call(name, specs, checker):
    """The model that writes its call without its marker (bare JSON, a fence) is constrained at once: the
    reply cannot be completed, and unless the family's call itself opens with free text (Kimi K3's response
    section) llama.cpp refuses the very first token."""
    auto = specs[name]["auto"]
    call_opens_with_text = checker.check(specs[name]["required"].gbnf, "Sure. ").status != "rejected"
    for text in CALL_LIKE:
        verdict = checker.check(auto.gbnf, text)
        assert not verdict.accepted, text
        first = text.index(text.strip()[0])
        # Where the family's own call opens so (Llama 3's bare JSON), the grammar reads on and refuses the
        # first thing that is not its call.
        if not call_opens_with_text and checker.check(specs[name]["required"].gbnf, text[first]).status == "rejected":
            assert verdict.status == "rejected" and verdict.offset <= first, (text, verdict)
    for opener in FOREIGN:
        if opener not in fam(name).markers and not call_opens_with_text:
            assert checker.check(auto.gbnf, opener + " hello").status == "rejected", opener
    # Prose first, then the call in another shape (Qwen2.5-Coder's reply once its opening fence was refused,
    # which the strict parser reads as the near miss fenced-json): refused where the prose is an answer.
    prose_then_call = 'Read the chunk:\n```json\n{"name": "get_time", "arguments": {}}\n```\nThat reads it.'
    assert fam(name).parse(prose_then_call).deviation
    if not call_opens_with_text:
        assert checker.check(auto.gbnf, prose_then_call).status == "rejected"
    # The call key quoted half JSON, half Python (Qwen2.5-Coder's next way around, once "name" was refused):
    # a near miss the parser names, refused in prose as well.
    mixed = 'You would call:\n```json\n{"name\': \'get_time\', \'arguments\': {}}\n```'
    assert fam(name).parse(mixed).deviation
    if not call_opens_with_text:
        assert checker.check(auto.gbnf, mixed).status == "rejected"
    # Doubled braces with a blank before the key (qwen2.5-coder-1.5b's way past a refused `{{"`): named, refused.
    doubled = 'Call it so: {{ "name": "get_time", "arguments": {} }}'
    assert fam(name).parse(doubled).deviation
    if not call_opens_with_text:
        assert checker.check(auto.gbnf, doubled).status == "rejected"
    # An answer holding JSON that is no call, or a code fence, is still an answer.
    assert checker.check(auto.gbnf, 'I would send {"city": "Paris"} to it.').accepted
    assert checker.check(auto.gbnf, "Run this:\n```python\nprint(1)\n```").accepted



def test_reasoning_opens_the_reply_only_where_the_template_knows_the_tag(checker):
    call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    thought = "<think>The user wants the time.</think>\n"
    plain = build_grammar("hermes", TOOLS, "auto")
    thinking = build_grammar("hermes", TOOLS, "auto", template="{{ '<think>' }}{{ messages }}")
    # A model whose template never heard of <think> may not escape the grammar through one.
    assert checker.check(plain.gbnf, thought + call).status == "rejected"
    for text in (thought + call, thought + "It is noon.", call, "It is noon."):
        assert checker.check(thinking.gbnf, text).accepted, text
    # After the block, the answer is held to the same openings.
    assert checker.check(thinking.gbnf, thought + '{"name": "get_time", "arguments": {}}').status == "rejected"


def test_the_no_brace_answer_refuses_every_call_attempt_the_judge_recognises(checker):
    """The judge names a call attempt by its structure (harness.formats.attempts): an object whose name key names
    an offered tool. Every such attempt opens an object, and the no-brace answer holds no brace: so whatever
    spelling the judge would call an attempt, that grammar's plain answer cannot hold it (the two cannot drift
    apart), where the refusal list lets the spellings it does not name through."""
    from tests.evaluation.test_call_attempts import BRACKETED, SEEN, TOOLS as NAMES_SEEN
    from harness.formats.attempts import call_attempt

    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
             for n in NAMES_SEEN]
    leaked = []
    for name in ("hermes", "mistral"):
        no_brace = build_grammar(name, tools, "auto", answer="no-brace")
        listed = build_grammar(name, tools, "auto")
        for text, _ in SEEN:
            assert call_attempt(text, NAMES_SEEN)
            assert not checker.check(no_brace.gbnf, text).accepted, (name, text)
            leaked += [text] if checker.check(listed.gbnf, text).accepted else []
        # The one shape the judge reads as an attempt that no brace opens: a list written with keys. The no-brace
        # design lets it through (measured on results/grammar-designs.md), the refusal list too.
        for text, _ in BRACKETED:
            assert call_attempt(text, NAMES_SEEN) and checker.check(no_brace.gbnf, text).accepted, (name, text)
    assert leaked      # the refusal list is what the no-brace design exists to replace: it lets some through


def test_an_unknown_answer_rule_is_refused_with_the_list():
    from harness.grammar import GrammarError

    with pytest.raises(GrammarError, match="refusal-list, no-brace"):
        build_grammar("hermes", TOOLS, "auto", answer="nope")


@pytest.mark.parametrize("family", [None, GENERIC])
def test_json_or_text_takes_the_bare_call_or_a_plain_answer_and_nothing_that_opens_like_a_call(family, checker):
    """json-or-text: the generic JSON call for every model, or plain text held to the plain answer's rules. A
    model that wants to call has the bare object as its one way (no fence, no list, no family marker, no
    call spelling further on); one that wants to answer answers in words, not in a {"response"} object."""
    from harness.families import parse

    spec = build_grammar(family, TOOLS, "auto", generic_answer="text")
    assert spec.family == GENERIC
    call = '{"name": "get_weather", "arguments": {"location": "Paris"}}'
    assert checker.check(spec.gbnf, call).accepted
    assert parse(GENERIC, call).calls[0].name == "get_weather"
    for answer in ("It is sunny in Paris.", "  The time is noon.", "Use get_weather (it takes a location)."):
        assert checker.check(spec.gbnf, answer).accepted, answer
        read = parse(GENERIC, answer)
        assert not read.calls and read.deviation is None and read.content == answer.strip()
    for text in [*CALL_LIKE[1:], '{"response": "sunny"}', "<tool_call>", 'Sure: {"name": "get_time"}',
                 "Sure: {{ \"name\": 1 }}", '{"name": "get_weather", "arguments": {}}']:
        assert checker.check(spec.gbnf, text).status == "rejected", text     # the last: location is required
    # "required" is the call alone, as under the envelope.
    assert spec.tool_choice == "auto"
    assert build_grammar(family, TOOLS, "required", generic_answer="text").gbnf == \
        build_grammar(family, TOOLS, "required").gbnf


@pytest.mark.parametrize("family", [None, GENERIC])
def test_object_or_text_takes_the_call_the_answer_object_or_text_without_a_brace(family, checker):
    """envelope-or-text-own's grammar: a model that opens with a brace (after a tool result's JSON) may still
    answer, in {"response"}; its text holds no brace at all, so no call in any spelling hides in prose."""
    from harness.families import parse

    spec = build_grammar(family, TOOLS, "auto", generic_answer="object-or-text")
    for ok in ('{"name": "get_weather", "arguments": {"location": "Paris"}}', '{"response": "sunny"}',
               "It is sunny in Paris.", "  Use get_weather (it takes a location)."):
        assert checker.check(spec.gbnf, ok).accepted, ok
    assert parse(GENERIC, '{"response": "sunny"}').content == "sunny"
    for text in [*CALL_LIKE[1:], "<tool_call>", 'Sure: {"name ": "get_time"}', "Sure: {x}", "a } b {",
                 '{"response": 3}', '{"name": "get_weather", "arguments": {}}']:
        assert checker.check(spec.gbnf, text).status == "rejected", text
    assert build_grammar(family, TOOLS, "required", generic_answer="object-or-text").gbnf == \
        build_grammar(family, TOOLS, "required").gbnf


def test_an_unknown_generic_answer_is_refused_with_the_list():
    from harness.grammar import GrammarError

    with pytest.raises(GrammarError, match="object, text"):
        build_grammar(None, TOOLS, "auto", generic_answer="prose")
