"""Tool-call grammars, checked with llama.cpp's own grammar machinery.

Every family's grammar for a realistic tool set (an enum, an integer, a nested object, an array, a boolean, a
number, a zero-argument tool) compiles in llama.cpp, accepts the family's canonical outputs and rejects its near
misses; texts the grammar accepts parse; lazy triggers switch the grammar on where llama.cpp does and never on
text the grammar would reject (that aborts the process). A vocabulary-only model (Qwen2's tokenizer) is loaded
once per session. Constrained generation on stand-in GGUFs: test_grammar_generation.py."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import requirements

requirements.binding()     # llama.cpp itself compiles and samples these grammars

from harness import families as registry
from harness.schema.arguments import tool_parameters, type_arguments
from harness.core.errors import FamilySpecError, GrammarError
from harness.formats import deviations as dev
from harness.formats.calls import ToolCall
from harness.formats.canonical import canonical_outputs
from harness.grammar import GENERIC, build_grammar
from harness.backends.embedded.grammar_check import GrammarChecker, TriggerHazard, trigger_start
from harness.scripted import llama_cpp_models


def function(name, properties=None, required=(), **extra):
    params = {"type": "object", "properties": properties or {}, "required": list(required)}
    return {"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": params,
                                             **extra}}


TOOLS = [
    function("get_weather", {"location": {"type": "string"},
                             "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                             "days": {"type": "integer"}}, ["location"]),
    function("get_time", {"timezone": {"type": "string"}}),
    function("search_notes", {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}}, ["query"]),
    function("create_event", {
        "title": {"type": "string"},
        "when": {"type": "object", "properties": {"date": {"type": "string"}, "hour": {"type": "integer"}},
                 "required": ["date"]},
        "attendees": {"type": "array", "items": {"type": "string"}},
        "priority": {"type": "number"},
        "private": {"type": "boolean"},
        "kind": {"type": "string", "enum": ["meeting", "call"]},
    }, ["title", "when"]),
    {"type": "function", "function": {"name": "ping", "description": "no parameters at all"}},
]
NESTED = ToolCall("create_event", {"title": "Lunch <with> Ana & co", "when": {"date": "2025-05-01", "hour": 12},
                                   "attendees": ["ana", "bo"], "priority": 0.5, "private": True, "kind": "meeting"})
PING = ToolCall("ping", {})
PARAMS = {t["function"]["name"]: tool_parameters(t) for t in TOOLS}

NAMES = registry.names()  # generic-json included
# Deviations in the text before a call: a lazy grammar leaves that text free.
BEFORE_THE_CALL = (dev.CALL_IN_REASONING, dev.TEXT_BEFORE_CALL)


def fam(name):
    return registry.get(name)


@pytest.fixture(scope="session")
def checker():
    return GrammarChecker(llama_cpp_models() / "ggml-vocab-qwen2.gguf")


@pytest.fixture(scope="session")
def specs():
    out = {}
    for name in NAMES:
        asked = None if name == GENERIC else name
        out[name] = {choice: build_grammar(asked, TOOLS, choice) for choice in ("auto", "required")}
        out[name]["lazy"] = build_grammar(asked, TOOLS, "auto", lazy=True)
    return out


def texts_of(name):
    """(label, calls, text) a family writes: its canonical outputs plus a nested-arguments and a no-arguments call."""
    family = fam(name)
    out = list(canonical_outputs(family))
    extra = [NESTED, PING] if family.multiple_calls else [NESTED]
    out.append(("nested arguments", extra, family.format(extra)))
    out.append(("zero-argument tool", [PING], family.format([PING])))
    return out


# --- every family -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_grammar_compiles_and_takes_the_familys_shape(name, specs, checker):
    auto, required, lazy = specs[name]["auto"], specs[name]["required"], specs[name]["lazy"]
    assert checker.compiles(required.gbnf) and checker.compiles(auto.gbnf)
    assert checker.compiles(lazy.gbnf, lazy.trigger_patterns)
    # "auto" holds from the first token for every family: no trigger to wait for.
    assert not auto.lazy and not auto.triggers and not required.lazy
    if name == GENERIC:  # call or answer object from the first token on: no marker announces a call
        assert not lazy.lazy
    else:
        assert lazy.lazy and lazy.triggers and {"{", "[", "```"} <= set(auto.openings)
    # Every registry family has a shape of its own: YAML ones from their pattern, Python ones from their module.
    assert auto.family == required.family == lazy.family == name


@pytest.mark.parametrize("name", NAMES)
def test_grammar_accepts_what_the_family_writes(name, specs, checker):
    auto, required, lazy = specs[name]["auto"], specs[name]["required"], specs[name]["lazy"]
    for label, _, text in texts_of(name):
        assert checker.check(auto.gbnf, text).accepted, (label, text)
        assert checker.check_gate(auto, text).accepted, (label, text)
        verdict = checker.check(lazy.gbnf, text, lazy.trigger_patterns)
        assert verdict.accepted and (verdict.triggered_at is not None or not lazy.lazy), (label, text, verdict)
        assert checker.check_gate(lazy, text) == verdict  # laziness in Python agrees with llama.cpp's
        if label != "text then call":
            assert checker.check(required.gbnf, text).accepted, (label, text)
    plain = checker.check(auto.gbnf, "17 times 3 is 51.")
    if name == GENERIC:
        # The answer is an object too, read back as the answer's text; prose is not let through.
        assert not plain.accepted
        answer = '{"response": "17 times 3 is 51."}'
        assert checker.check(auto.gbnf, answer).accepted and not checker.check(required.gbnf, answer).accepted
        assert fam(name).parse(answer).content == "17 times 3 is 51." and not fam(name).parse(answer).calls
    else:
        assert plain.accepted and checker.check(auto.gbnf, "\n 17 times 3 is 51.").accepted
        lazily = checker.check(lazy.gbnf, "17 times 3 is 51.", lazy.trigger_patterns)
        assert lazily.accepted and lazily.triggered_at is None
    assert not checker.check(required.gbnf, "17 times 3 is 51.").accepted


@pytest.mark.parametrize("name", NAMES)
def test_grammar_rejects_the_familys_near_misses(name, specs, checker):
    required, lazy = specs[name]["required"], specs[name]["lazy"]
    for miss in fam(name).near_misses:
        assert not checker.check(required.gbnf, miss.text).accepted, miss.text
        lazily = checker.check(lazy.gbnf, miss.text, lazy.trigger_patterns)
        assert checker.check_gate(lazy, miss.text).status == lazily.status, miss.text
        # Lazily, a near miss is plain text unless a trigger fires; once one fires it cannot complete, unless
        # what is wrong comes before the trigger (text before the trigger is never constrained).
        if not lazy.lazy:
            assert not lazily.accepted, (miss.text, lazily)
        elif lazily.triggered_at is None:
            assert lazily.accepted, (miss.text, lazily)
        elif lazily.accepted:
            assert miss.deviation in BEFORE_THE_CALL, (miss.text, lazily)


@pytest.mark.parametrize("name", NAMES)
def test_what_the_grammar_accepts_parses_as_a_valid_call(name, specs, checker):
    """Random edits of the family's outputs: every one the grammar still accepts is a call of an offered tool
    with arguments that fit its schema (the grammar is never looser than the parser and the schemas)."""
    family, required = fam(name), specs[name]["required"]
    rng = random.Random(name)
    pool = list('{}[]",:= \n<>/|_-.\'0123456789abcdefxyzTF')
    accepted = 0
    for label, _, text in texts_of(name):
        if label == "text then call":
            continue
        mutants = [text.replace("Paris", "Lyon")] if "Paris" in text else []
        for _ in range(8):
            chars = list(text)
            i = rng.randrange(len(chars))
            op = rng.choice(("insert", "delete", "replace", "space", "letter"))
            if op == "insert":
                chars.insert(i, rng.choice(pool))
            elif op == "delete":
                del chars[i]
            elif op == "replace":
                chars[i] = rng.choice(pool)
            elif op == "space":  # whitespace the grammar may allow
                chars.insert(i, rng.choice([" ", "\n", "\n  "]))
            else:  # a letter for a letter: inside a free string the grammar allows it
                letters = [k for k, c in enumerate(chars) if c.isalpha()]
                chars[rng.choice(letters)] = rng.choice("xyzQ")
            mutants.append("".join(chars))
        for mutant in mutants:
            if not checker.check(required.gbnf, mutant).accepted:
                continue
            accepted += 1
            result = family.parse(mutant)
            assert result.accepted, (mutant, result.deviation, result.detail)
            for call in result.calls:
                assert call.name in PARAMS and type_arguments(call.arguments, PARAMS[call.name]).ok, (mutant, call)
    assert accepted, "no edit kept the text in the grammar (whitespace and string edits should)"


# --- schemas --------------------------------------------------------------------------------------------

def generic_call(name, arguments, raw=None):
    return raw if raw is not None else json.dumps({"name": name, "arguments": arguments})


@pytest.mark.parametrize("text, ok", [
    (generic_call("get_weather", {"location": "Paris"}), True),  # optional properties left out
    (generic_call("get_weather", {"location": "Paris", "unit": "celsius", "days": 3}), True),
    (generic_call("get_weather", {"location": "Paris", "unit": "kelvin"}), False),  # enum
    (generic_call("get_weather", {"location": "Paris", "days": 2.5}), False),  # integer
    (generic_call("get_weather", {"location": "Paris", "days": "3"}), False),
    (generic_call("get_weather", {"unit": "celsius"}), False),  # required property missing
    (generic_call("get_weather", {"days": 3, "location": "Paris"}), False),  # the schema's property order
    (generic_call("get_weather", {"location": "Paris", "country": "FR"}), False),  # unknown property
    (generic_call("get_time", {"location": "Paris"}), False),  # another tool's arguments
    (generic_call("get_forecast", {"location": "Paris"}), False),  # not an offered tool
    (generic_call("ping", {}), True),
    (generic_call("ping", {"verbose": True}), False),  # invented arguments for a zero-parameter tool
    (generic_call("search_notes", {"query": "x", "limit": -1}), False),  # minimum >= 0 drops the minus sign
    (generic_call("create_event", {"title": "x", "when": {"date": "d", "hour": 9}, "attendees": [],
                                   "priority": -1.5e3, "private": False}), True),
    (generic_call("create_event", {"title": "x", "when": {"hour": 9}}), False),  # nested required property
    (generic_call("create_event", {"title": "x", "when": {"date": "d"}, "attendees": [1]}), False),  # item type
    (generic_call("create_event", {"title": "x", "when": {"date": "d"}, "private": "yes"}), False),
    ('{"name": "get_weather", "arguments": {"location": "Paris"}, "id": "1"}', False),
    ('{\n  "name": "get_weather",\n  "arguments": {\n    "location": "Par\\u00eds \\"x\\""\n  }\n}', True),
    ('{"name":"get_weather","arguments":{"location":"Paris"}}', True),
    ('{"name": "get_weather", "arguments": {"location": "Paris"}}\n\n', False),
])
def test_schema_constraints(text, ok, specs, checker):
    assert checker.check(specs[GENERIC]["required"].gbnf, text).accepted is ok


def test_schema_references_any_of_and_untyped_values(checker):
    tools = [function("plan", {
        "step": {"$ref": "#/$defs/step"},
        "mode": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["auto"]}]},
        "note": {"type": ["string", "null"]},
        "extra": {},
    }, ["step"])]
    tools[0]["function"]["parameters"]["$defs"] = {"step": {"type": "object", "properties": {"n": {"type": "integer"}},
                                                            "required": ["n"]}}
    gbnf = build_grammar(None, tools, "required").gbnf
    good = [{"step": {"n": 1}}, {"step": {"n": 1}, "mode": 3}, {"step": {"n": 1}, "mode": "auto", "note": None},
            {"step": {"n": 1}, "extra": {"any": [1, "two", {"three": False}]}}]
    bad = [{"step": {"n": "1"}}, {"step": {"n": 1}, "mode": "manual"}, {"step": {"n": 1}, "note": 5}]
    for args in good:
        assert checker.check(gbnf, generic_call("plan", args)).accepted, args
    for args in bad:
        assert not checker.check(gbnf, generic_call("plan", args)).accepted, args


def test_text_and_python_syntaxes_type_their_values(checker):
    xml = build_grammar("qwen-xml", TOOLS, "required").gbnf
    call = "<tool_call>\n<function=get_weather>\n<parameter=location>\n{}\n</parameter>\n{}</function>\n</tool_call>"
    assert checker.check(xml, call.format("Paris <b>1</b>", "")).accepted  # free text, markup included
    assert not checker.check(xml, call.format("Paris</parameter>", "")).accepted  # not the closing tag
    days = "<parameter=days>\n{}\n</parameter>\n"
    assert checker.check(xml, call.format("Paris", days.format(3))).accepted
    assert not checker.check(xml, call.format("Paris", days.format("three"))).accepted
    dsml = build_grammar("deepseek-v3.2", TOOLS, "required").gbnf
    p = '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="{}" string="{}">{}' \
        '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
    assert checker.check(dsml, p.format("location", "true", "Paris")).accepted
    assert not checker.check(dsml, p.format("location", "false", "Paris")).accepted  # a string is string="true"
    lfm2 = build_grammar("lfm2", TOOLS, "required").gbnf
    for args, ok in [("location='Paris', unit='celsius'", True), ('location="Paris", days=3', True),
                     ("location=Paris", False), ("location='Paris', unit='kelvin'", False),
                     ("location='Paris', days=True", False)]:
        text = f"<|tool_call_start|>[get_weather({args})]<|tool_call_end|>"
        assert checker.check(lfm2, text).accepted is ok, args
    gemma = build_grammar("gemma4", TOOLS, "required").gbnf
    assert checker.check(gemma, '<|tool_call>call:get_weather{days:3,location:<|"|>Paris<|"|>}<tool_call|>').accepted
    # Gemma's template writes keys sorted; the grammar holds it to that.
    assert not checker.check(gemma, '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>,days:3}<tool_call|>').accepted
    # A null is None, as the template prints it (and as the parser reads it); JSON's null is refused.
    nullable = [{"type": "function", "function": {"name": "set_nullable", "parameters": {
        "type": "object", "properties": {"value": {"type": ["string", "null"]}}, "required": ["value"]}}}]
    gemma = build_grammar("gemma4", nullable, "required").gbnf
    assert checker.check(gemma, "<|tool_call>call:set_nullable{value:None}<tool_call|>").accepted
    assert not checker.check(gemma, "<|tool_call>call:set_nullable{value:null}<tool_call|>").accepted


# --- lazy triggers --------------------------------------------------------------------------------------

JUNK = ['"', "xyz", "\n" * 12, "{{", "'", "<|", '\t{"', '"}']


@pytest.mark.parametrize("name", NAMES)
def test_triggers_never_fire_on_text_the_grammar_rejects(name, specs, checker):
    """llama.cpp replays the text from the trigger to the end of the token into the grammar and aborts the
    process if the grammar rejects it. checker.check raises TriggerHazard before that could happen."""
    auto = specs[name]["lazy"]
    for word in auto.triggers[:2]:
        for junk in JUNK:
            checker.check(auto.gbnf, "Hi " + word + junk, auto.trigger_patterns)
    text = texts_of(name)[0][2]
    for cut in range(1, len(text), 5):
        checker.check(auto.gbnf, text[:cut], auto.trigger_patterns)


def test_a_naive_trigger_word_is_caught_as_a_hazard(specs, checker):
    hermes = specs["hermes"]["lazy"]
    with pytest.raises(TriggerHazard):
        checker.check(hermes.gbnf, 'Hi <tool_call>"x"', ["<tool_call>"])
    # The harness's own patterns do not fire there, and do fire on a real call.
    assert checker.check(hermes.gbnf, 'Hi <tool_call>"x"', hermes.trigger_patterns).triggered_at is None


def test_the_grammar_takes_over_at_the_trigger(specs, checker):
    hermes = specs["hermes"]["lazy"]
    text = 'Let me check. <tool_call>\n{{"name": "get_weather", "arguments": {"location": "Paris"}}}\n</tool_call>'
    verdict = checker.check(hermes.gbnf, text, hermes.trigger_patterns)
    assert verdict.status == "rejected" and verdict.triggered_at == text.index("<tool_call>")
    assert (verdict.offset, verdict.token) == (text.index("{{"), "{{")  # the first token the grammar refuses


def test_whole_reply_families_trigger_only_at_the_start(specs, checker):
    llama3 = specs["llama3"]["lazy"]
    assert set(llama3.triggers) == {"<|python_tag|>", "{"}
    call = fam("llama3").format([ToolCall("get_weather", {"location": "Paris"})])
    assert checker.check(llama3.gbnf, call, llama3.trigger_patterns).triggered_at == 0
    assert checker.check(llama3.gbnf, "  \n" + call, llama3.trigger_patterns).triggered_at == 3
    # Mid-reply JSON is text: the call is the whole reply.
    assert checker.check(llama3.gbnf, "Sure! " + call, llama3.trigger_patterns).triggered_at is None


def test_generic_shape_is_a_call_or_an_answer_from_the_first_token(specs, checker):
    generic = specs[GENERIC]["auto"]
    call = generic_call("get_weather", {"location": "Paris"})
    assert checker.check(generic.gbnf, call).accepted
    assert checker.check_gate(generic, '{"response": "It is sunny."}').accepted
    # Seed 004's Gemma wrote a call as prose; SmolLM2 fences its JSON. Neither is let through.
    for text in ("Sure! " + call, "I will use get_weather{} for that.", "```json\n" + call + "\n```"):
        assert checker.check_gate(generic, text).status == "rejected", text
    broken = checker.check(generic.gbnf, '{"name": "get_weather", "arguments": {"location": "Paris"}')
    assert broken.status == "prefix"
    # A prompt that opened a reasoning block (a distill's `<think>`): free text to its close, then the same.
    assert generic.reasoning == (("<think>", "</think>"),)
    thought, prompt = "I should call it.\n</think>\n", "<|im_start|>assistant\n<think>\n"
    assert checker.check_gate(generic, thought + call, prompt).accepted
    assert checker.check_gate(generic, thought + call[:-1] + ", }", prompt).status == "rejected"
    # A block the reply opens itself is no way out of the JSON.
    assert checker.check_gate(generic, "<think>I should call it.</think>\n" + call).status == "rejected"


@pytest.mark.parametrize("name", [GENERIC, "hermes"])
def test_required_grammar_lets_a_reasoning_block_the_prompt_opened_close_first(name, specs, checker):
    required = specs[name]["required"]
    call = fam(name).format([ToolCall("get_time", {})])
    prompt = "<|im_start|>assistant\n<think>\n"
    assert required.root_for(prompt) != required.root == required.root_for("<|im_start|>assistant\n")
    assert checker.check_gate(required, "The user wants the time.\n</think>\n\n" + call, prompt).accepted
    assert checker.check_gate(required, "The user wants the time.\n</think>\n\nIt is noon.", prompt).status \
        == "rejected"
    assert checker.check_gate(required, call).accepted  # no block opened: the call from the first token


def test_gate_fires_no_trigger_inside_reasoning(specs, checker):
    hermes = specs["hermes"]["lazy"]
    call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    thinking = "<think>Maybe " + call + " would do.</think>The answer is 4."
    assert fam("hermes").parse(thinking).deviation == dev.CALL_IN_REASONING  # markup in reasoning is no call
    assert checker.check_gate(hermes, thinking) == checker.check_gate(hermes, "The answer is 4.")
    assert checker.check_gate(hermes, thinking).triggered_at is None
    after = "<think>I need the time.</think>\n" + call
    assert checker.check_gate(hermes, after).triggered_at == after.index("<tool_call>")
    opened = "I need the time.\n</think>\n\n" + call
    verdict = checker.check_gate(hermes, opened, prompt="<|im_start|>assistant\n<think>\n")
    assert verdict.accepted and verdict.triggered_at == opened.index("<tool_call>")
    # llama.cpp's own lazy sampler has no notion of reasoning: it fires inside the block.
    assert checker.check(hermes.gbnf, thinking, hermes.trigger_patterns).triggered_at == thinking.index("<tool_call>")


def test_gate_reads_long_replies_in_bounded_windows(specs, checker):
    hermes = specs["hermes"]["lazy"]
    prose = "Some <tool and <tool_cal text {\"name\": 1} >>> " * 600  # ~30k characters, no trigger
    assert checker.check_gate(hermes, prose).triggered_at is None
    call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    verdict = checker.check_gate(hermes, prose + call)
    assert verdict.accepted and verdict.triggered_at == len(prose.encode())


def test_families_whose_marker_also_opens_text_trigger_on_the_call(specs, checker):
    functionary = specs["functionary-v3.2"]["lazy"]
    assert checker.check(functionary.gbnf, ">>>all\nHello there.", functionary.trigger_patterns).triggered_at is None
    # The generation prompt already wrote `>>>`: the reply starts with the function's name.
    call = 'get_weather\n{"location": "Paris"}'
    assert checker.check(functionary.gbnf, call, functionary.trigger_patterns).accepted
    text = '>>>all\nLet me check.>>>get_weather\n{"location": "Paris"}'
    assert checker.check(functionary.gbnf, text, functionary.trigger_patterns).triggered_at == text.index(">>>get")
    harmony = specs["harmony"]["lazy"]
    text = ('<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary '
            'to=functions.get_weather <|constrain|>json<|message|>{"location": "Paris"}')
    assert checker.check(harmony.gbnf, text, harmony.trigger_patterns).accepted


def test_trigger_start_mirrors_llama_cpp():
    assert trigger_start([r"(?=<tool_call>)<tool_call>$"], b"hi <tool_call>") == 3
    assert trigger_start([r"^\s*(\{)$"], b"  {") == 2
    assert trigger_start([r"^\s*(\{)$"], b"a {") is None
    assert trigger_start([r"<tool_call>$"], b"<tool_call>\n") is None  # $ is the end of the buffer only


# --- fallbacks, errors --------------------------------------------------------------------------------

def test_no_tool_format_and_shapeless_families_get_the_generic_shape(monkeypatch):
    spec = build_grammar(None, TOOLS)
    assert (spec.family, spec.requested) == (GENERIC, None) and "no tool-call format" in spec.note
    harmony = registry.get("harmony")
    assert harmony.shape is not None  # declared in harness/families/harmony.py
    monkeypatch.setitem(registry.families(), "harmony", dataclasses.replace(harmony, shape=None))
    spec = build_grammar("harmony", TOOLS)
    assert (spec.family, spec.requested) == (GENERIC, "harmony") and "generic JSON shape" in spec.note
    assert registry.parse(spec.family, '{"response": "It is 51."}').content == "It is 51."


def test_bad_requests_fail_clearly():
    with pytest.raises(GrammarError, match="non-empty list"):
        build_grammar("hermes", [])
    with pytest.raises(GrammarError, match="usable name"):
        build_grammar("hermes", [{"type": "function", "function": {"name": "get weather"}}])
    with pytest.raises(GrammarError, match="unique"):
        build_grammar("hermes", [TOOLS[0], TOOLS[0]])
    with pytest.raises(GrammarError, match="tool_choice"):
        build_grammar("hermes", TOOLS, "none")
    with pytest.raises(FamilySpecError, match="unknown family"):
        build_grammar("no-such-family", TOOLS)
