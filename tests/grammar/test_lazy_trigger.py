"""The lazy-trigger design (harness.grammar.lazy): free text until a trigger fires, then a call held to the tools'
schemas. Checked with llama.cpp's own grammar machinery on a vocabulary-only model (Qwen2's tokenizer, as the
Qwen2.5-Coder models write), through GrammarGate as generation uses it and through llama.cpp's own lazy sampler
(GrammarChecker.check raises TriggerHazard where a trigger fires on text the grammar refuses: an abort)."""

from __future__ import annotations

import pytest
import requirements

requirements.binding()     # llama.cpp itself compiles the grammar and reads the trigger patterns

from harness import families as registry  # noqa: E402
from harness.backends.embedded.grammar_check import GrammarChecker  # noqa: E402
from harness.formats import deviations as dev  # noqa: E402
from harness.grammar import GENERIC  # noqa: E402
from harness.grammar.lazy import build_lazy_trigger  # noqa: E402
from harness.scripted import llama_cpp_models  # noqa: E402

TOOLS = [
    {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                      "required": ["query"]}},
    {"name": "math.hypot", "parameters": {"type": "object", "properties": {"x": {"type": "integer"},
                                                                         "y": {"type": "integer"}},
                                          "required": ["x", "y"]}},
]
CALL = '{"name": "search", "arguments": {"query": "weather"}}'
HYPOT = '{\n  "name": "math.hypot",\n  "arguments": {\n    "x": 4,\n    "y": 5\n  }\n}'


@pytest.fixture(scope="module")
def checker():
    return GrammarChecker(llama_cpp_models() / "ggml-vocab-qwen2.gguf")


@pytest.fixture(scope="module")
def hermes():
    return build_lazy_trigger("hermes", TOOLS)


@pytest.fixture(scope="module")
def generic():
    return build_lazy_trigger(None, TOOLS)


def test_the_grammar_builds_for_hermes_and_for_a_model_without_a_family(hermes, generic, checker):
    assert hermes.family == "hermes" and hermes.lazy and "<tool_call>" in hermes.triggers
    assert set(hermes.held_triggers) == {"```json", "```", "``json", "``", "{"}
    # generic-json's own call is the bare object: only a fenced one is another spelling there.
    assert generic.family == GENERIC and generic.requested is None and generic.lazy
    assert "{" in generic.triggers and "{" not in generic.held_triggers and "```json" in generic.held_triggers
    for spec in (hermes, generic):
        assert checker.compiles(spec.gbnf, spec.trigger_patterns)
        assert spec.tool_choice == "auto" and not spec.openings  # free text until a trigger: no answer rules


# (reply, where the grammar takes over, the trigger word recorded, held in another spelling than hermes's own)
FIRES = [
    ("<tool_call>\n" + CALL + "\n</tool_call>", 0, "<tool_call>", False),
    ("Let me look that up. <tool_call>\n" + CALL + "\n</tool_call>", 21, "<tool_call>", False),
    ("```json\n" + CALL + "\n```", 0, "```json", True),
    ("```\n" + CALL + "\n```", 0, "```", True),
    ("``\n" + CALL + "\n``", 0, "``", True),               # two backticks, as a committed reply fenced it
    (CALL, 0, "{", True),
    ("  \n" + HYPOT, 3, "{", True),                       # after leading blanks, the object indented
    ("```json\n" + HYPOT + "\n```", 0, "```json", True),
    ("{\"name\": \"search\", \"arguments\": {\"query\": \"a\"}}\n" + CALL, 0, "{", True),  # two calls
]


@pytest.mark.parametrize("text,at,word,held", FIRES)
def test_hermes_triggers_fire_on_each_spelling_and_hold_the_call(text, at, word, held, hermes, checker):
    verdict = checker.check_gate(hermes, text)
    assert verdict.accepted and verdict.triggered_at == at, verdict
    # llama.cpp's own lazy sampler agrees, and no trigger fires on text the grammar refuses (that would abort).
    assert checker.check(hermes.gbnf, text, hermes.trigger_patterns) == verdict
    assert hermes.trigger_word(text, at) == word and (word in hermes.held_triggers) == held


# Once the trigger fired, a reply that leaves the call is refused, at the first token that leaves it (the
# offset of that token in Qwen2's tokenization).
LEAVES = [
    ('{"name": "delete_all", "arguments": {}}', 10),                                 # no offered tool
    ('```json\n{"name": "search"}\n```', 24),                                        # no arguments
    ('{"name": "search", "arguments": {"q": "x"}}', 35),                             # not the tool's parameter
    ('{"name": "math.hypot", "arguments": {"x": "4", "y": 5}}', 41),                 # a string for an integer
    ("```json\n" + CALL + "\n``` Done!", 65),                                        # text after the fence
    ('{"name ": "search", "arguments": {"query": "x"}}', 6),                          # the blank in the key
    ("<tool_call>\n" + CALL.replace("search", "find") + "\n</tool_call>", 22),      # hermes's own: unknown tool
]


@pytest.mark.parametrize("text,where", LEAVES)
def test_after_a_trigger_a_reply_that_leaves_the_call_is_refused(text, where, hermes, checker):
    verdict = checker.check_gate(hermes, text)
    assert verdict.status == "rejected" and verdict.triggered_at is not None, verdict
    assert verdict.offset == where, verdict


# Plain text, and the spellings the triggers do not fire on (they stay free text, read by the judge as near misses).
QUIET = [
    "The hypotenuse is 6.4.",
    "I cannot help with that: no tool fits.",
    "Here you go: " + CALL,                               # an object after text: not at the start
    "<tools>\n" + CALL + "\n</tools>",
    "Sure:\n```json\n" + CALL + "\n```",
    "```python\nprint(1)\n```",                            # a fence tagged otherwise
    "{{\"name\": \"search\", \"arguments\": {}}}",        # doubled braces
    "{'name': 'search', 'arguments': {'query': 'x'}}",    # Python quotes
    '{"Name": "search", "Arguments": {"query": "x"}}',
    '{"type": "function", "function": {"name": "search", "parameters": {"query": "x"}}}',
    '{"response": "It is sunny."}',
    "",
]


@pytest.mark.parametrize("text", QUIET)
def test_no_trigger_fires_on_plain_text_or_other_spellings(text, hermes, checker):
    verdict = checker.check_gate(hermes, text)
    assert verdict.accepted and verdict.triggered_at is None, verdict
    assert checker.check(hermes.gbnf, text, hermes.trigger_patterns) == verdict


def test_without_a_family_the_bare_object_is_the_own_call_and_a_fence_is_held(generic, checker):
    bare = checker.check_gate(generic, "\n" + CALL)
    assert bare.accepted and bare.triggered_at == 1
    assert generic.trigger_word("\n" + CALL, 1) == "{" and "{" not in generic.held_triggers
    assert registry.parse(GENERIC, CALL, "").accepted                   # generic-json reads it: a strict call
    fenced = "```json\n" + CALL + "\n```"
    verdict = checker.check_gate(generic, fenced)
    assert verdict.accepted and verdict.triggered_at == 0 and generic.trigger_word(fenced, 0) in generic.held_triggers
    assert checker.check_gate(generic, "The answer is 5.").triggered_at is None
    refused = checker.check_gate(generic, '{"name": "search", "arguments": {}}')   # query is required
    assert refused.status == "rejected" and refused.triggered_at == 0


def test_a_fenced_call_is_a_hermes_near_miss_and_labelled_held(hermes, checker):
    """What the strict parser makes of the held call: the near miss, never a call; the trigger word labels it."""
    fenced = "```json\n" + CALL + "\n```"
    assert checker.check_gate(hermes, fenced).accepted
    parse = registry.parse("hermes", fenced, "")
    assert not parse.accepted and not parse.calls and parse.deviation == dev.FENCED_JSON
    assert hermes.trigger_word(fenced, 0) in hermes.held_triggers
    own = "<tool_call>\n" + CALL + "\n</tool_call>"
    assert registry.parse("hermes", own, "").accepted and hermes.trigger_word(own, 0) not in hermes.held_triggers
    assert hermes.trigger_word(fenced, None) is None
