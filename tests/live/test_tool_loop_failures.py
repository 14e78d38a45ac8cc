"""The tool loop's failure-mode behaviours, each through the real binding on a stand-in
GGUF with Qwen2.5's vocabulary and template, scripted to write the reply that provokes the behaviour. Each
test asserts what the behaviour changes, so it fails when the behaviour is removed. (Raising tools and failed
follow-ups are in test_tool_loop.py.)"""

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from ping_standin import CALL, ping_scenario, standin_chat  # noqa: E402
from harness.scripted import PROFILES, Script, Turn, Vocab  # noqa: E402

from harness.core.errors import GrammarRuntimeError  # noqa: E402
from harness.grammar import build_grammar  # noqa: E402
from harness.live.modes import GrammarPlan  # noqa: E402
from harness.storage.records import ModelRef, SampleRecord, ScenarioRef  # noqa: E402
from harness.evaluation.scoring import score_sample  # noqa: E402
from harness.live.tool_loop import first_prompt, run_sample  # noqa: E402

pytestmark = pytest.mark.needs_binding     # the stand-in runs in llama.cpp

@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """A stand-in with the real template and tokenizer, to render prompts and tokenize scripted replies."""
    return standin_chat(tmp_path_factory.mktemp("standin"), "probe", [Script("\n", (Vocab(PROFILES["qwen2.5"]).id("ok"),))])


def replying(probe, directory, name, sc, reply: str, special=True):
    """A stand-in that writes `reply` (tokenized as the real tokenizer does; repeats allowed) after the
    scenario's first prompt, whatever that prompt says: a position-keyed Turn."""
    from harness.backends.embedded.decoding import prompt_token_ids

    n = len(prompt_token_ids(probe.backend.llm, first_prompt(probe, sc)))
    ids = tuple(probe.backend.llm.tokenize(reply.encode("utf-8"), add_bos=False, special=special))
    return standin_chat(directory, name, [Turn(n, ids + (Vocab(PROFILES["qwen2.5"]).id("<|im_end|>"),))])


def verdicts_of(chat, sc, result):
    return score_sample(sc, SampleRecord(ModelRef("m"), ScenarioRef(sc.name, sc.hash), 0, 7, family=chat.family,
                                          turns=result["turns"]))


INVENTED = '<tool_call>{"name": "ping", "arguments": {"host": "a"}}</tool_call>'


def test_zero_parameter_tool_with_invented_arguments_runs_once_without_them(probe, tmp_path):
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong")
    chat = replying(probe, tmp_path, "invented", sc, INVENTED)
    result = run_sample(chat, sc, seed=7)
    (step,) = result["turns"][0]["steps"]
    assert step["reply"] == INVENTED
    (call,) = step["calls"]
    # Without the retry the call fails on the unknown parameter and nothing runs.
    assert call["executed"] and call["typed"] == {} and call["result"] == "pong"
    assert call["zero_arg_retry"]["invented"] == {"host": "a"} and result["executions"] == {"call00001": 1}
    verdicts = verdicts_of(chat, sc, result)
    assert "invented-arguments" in verdicts["findings"] and "zero-arg-retry" in verdicts["findings"]
    assert verdicts["valid_arguments"] is False  # the model's own call stays invalid: the retry is the loop's


def test_grammar_runtime_failure_is_retried_once_unconstrained(probe, tmp_path):
    # A real fault, not a mock: a trigger that fires on text the Hermes grammar refuses. (`<tool_call>"x` does
    # not fault here: <tool_call> is one token in Qwen2.5's vocabulary, so the trigger fires on it alone, the
    # grammar accepts it, and the gate resamples the quote from the mask. A trigger on a word of the reply
    # replays text the grammar cannot start with, which llama.cpp's own lazy sampler would abort on.)
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong")
    chat = replying(probe, tmp_path, "fault", sc, "Checking the relay.")
    lazy = build_grammar("hermes", sc.tool_schemas(), "auto", lazy=True)  # a lazy grammar's trigger, set wrong
    spec = dataclasses.replace(lazy, trigger_patterns=("relay",))
    from harness.backends.embedded.generate import generate

    with pytest.raises(GrammarRuntimeError, match="trigger fired"):  # the fault is real
        generate(chat.backend.llm, first_prompt(chat, sc), max_tokens=16, grammar=spec)
    result = run_sample(chat, sc, seed=7, mode="grammar", plan=GrammarPlan(spec, None))
    (step,) = result["turns"][0]["steps"]
    assert "trigger fired" in step["grammar_runtime_retry"] and step["reply"] == "Checking the relay."
    assert step["grammar_from"] is None  # the reply kept is the unconstrained one
    assert result["error"] is None and step["family"] == "hermes"
    assert "grammar-runtime-retry" in verdicts_of(chat, sc, result)["findings"]


THOUGHT = ('<think>Maybe <tool_call>{"name": "ping", "arguments": {}}</tool_call> would help, but the relay '
           'status is known already.</think>The relay is up.')


def test_a_reply_cut_inside_its_think_block_is_written_again_with_room(probe, tmp_path):
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong",
                       sampling="sampling: {max_tokens: 12}\n")
    chat = replying(probe, tmp_path, "thinker", sc, THOUGHT)
    result = run_sample(chat, sc, seed=7)
    (step,) = result["turns"][0]["steps"]
    # Without the larger budget the reply stops 12 tokens in, inside the think block, and gives no answer.
    assert step["thinking_budget_retry"]["max_tokens"] == 12 and step["finish_reason"] == "stop"
    assert step["reply"] == THOUGHT and step["completion_tokens"] > 12
    # The call written inside the thinking is never a call.
    assert step["calls"] == [] and result["executions"] == {}
    verdicts = verdicts_of(chat, sc, result)
    assert step["parse"]["content"] == "The relay is up." and step["parse"]["calls"] == []
    assert "thinking-budget-retry" in verdicts["findings"] and verdicts["parsed"] is False
    assert verdicts["turns"][0]["calls"] == []


def test_fallback_retries_a_native_near_miss_held_to_a_call_and_keeps_both_attempts(probe, tmp_path):
    bare = '{"name": "ping", "arguments": {}}'  # Qwen2.5-Coder's habit: the call without its <tool_call> tags
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong",
                       sampling="sampling: {temperature: 0, max_tokens: 64}\n")
    chat = replying(probe, tmp_path, "bare", sc, bare)
    native = run_sample(chat, sc, seed=7)
    (step,) = native["turns"][0]["steps"]
    assert step["reply"] == bare and step["parse"]["deviation"] and native["executions"] == {}
    result = run_sample(chat, sc, seed=7, mode="fallback")
    (step,) = result["turns"][0]["steps"]
    assert step["fallback_from"]["reply"] == bare and step["grammar"] == "required"
    assert step["grammar_from"] == 0 and "grammar_from" not in step["fallback_from"]
    assert step["parse"]["calls"] == [{"name": "ping", "arguments": {}}] and step["parse"]["deviation"] is None
    assert result["executions"] == {"call00001": 1}
    verdicts = verdicts_of(chat, sc, result)
    assert verdicts["parsed"] and verdicts["right_tool"] and "native-fallback" in verdicts["findings"]


def test_fallback_leaves_a_plain_answer_alone_even_where_the_case_expects_a_call(probe, tmp_path):
    """An app cannot tell a plain answer from a refusal to call: fallback decides from what the app sees, never
    from the case's expected call, so the answer stands (and fails the case's checks, as it should)."""
    answer = "The relay is probably fine."  # no call at all, where the scenario needs ping
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong",
                       sampling="sampling: {temperature: 0, max_tokens: 64}\n")
    assert sc.turns[0].expect.expects_call      # the answer key says a call is due; fallback must not read it
    chat = replying(probe, tmp_path, "answer", sc, answer)
    result = run_sample(chat, sc, seed=7, mode="fallback")
    (step,) = result["turns"][0]["steps"]
    assert step["reply"] == answer and "fallback_from" not in step and result["executions"] == {}


def test_fallback_retries_a_call_spelled_off_as_an_attempt(probe, tmp_path):
    """A key written "name " is no spelling the Hermes parser lists, but it calls an offered tool: the app sees
    a call that failed, so fallback writes it again held to a call."""
    spelled = '{"name ": "ping", "arguments": {}}'
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong",
                       sampling="sampling: {temperature: 0, max_tokens: 64}\n")
    chat = replying(probe, tmp_path, "spelled", sc, spelled)
    result = run_sample(chat, sc, seed=7, mode="fallback")
    (step,) = result["turns"][0]["steps"]
    assert step["fallback_from"]["reply"] == spelled and step["grammar"] == "required"
    assert step["parse"]["calls"] == [{"name": "ping", "arguments": {}}] and result["executions"] == {"call00001": 1}


def test_fallback_after_a_result_never_forces_another_call(probe, tmp_path):
    """The stand-in calls ping, then after the result writes the same call as bare JSON (Qwen2.5-Coder's
    habit). The native near miss is retried under the call-or-answer grammar, not held to a call: the brace is
    refused from the first token, the turn ends without another call, and the tool ran once."""
    from harness.backends.embedded.decoding import prompt_token_ids
    from harness.grammar.plan import grammar_plan

    bare = '{"name": "ping", "arguments": {}}'
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong", max_steps=3,
                       sampling="sampling: {temperature: 0, max_tokens: 64}\n")
    end = Vocab(PROFILES["qwen2.5"]).id("<|im_end|>")
    ids = lambda text: tuple(probe.backend.llm.tokenize(text.encode(), add_bos=False, special=True))  # noqa: E731
    first = len(prompt_token_ids(probe.backend.llm, first_prompt(probe, sc)))
    calling = standin_chat(tmp_path, "calls", [Turn(first, ids(CALL) + (end,))])
    second = run_sample(calling, sc, seed=7)["turns"][0]["steps"][1]["prompt_tokens"]  # after the result
    chat = standin_chat(tmp_path, "bare-after", [Turn(first, ids(CALL) + (end,)), Turn(second, ids(bare) + (end,))])
    assert run_sample(chat, sc, seed=7)["turns"][0]["steps"][1]["reply"] == bare  # natively: the near miss
    # The family-shaped design: the retry is held to the family's call or an answer that opens like none.
    family = grammar_plan("hermes", sc, chat.template, "refusal-list")
    result = run_sample(chat, sc, seed=7, mode="fallback", plan=family)
    steps = result["turns"][0]["steps"]
    assert steps[0]["reply"] == CALL and "fallback_from" not in steps[0]
    assert steps[1]["fallback_from"]["reply"] == bare and steps[1]["grammar"] == "auto"
    # Held to a call, this retry would call again (and again, to the step limit).
    assert steps[1]["grammar_refused"] >= 1 and not steps[1]["reply"].lstrip().startswith("{")
    assert steps[1]["calls"] == [] and len(steps) == 2 and result["executions"] == {"call00001": 1}
    findings = verdicts_of(chat, sc, result)["findings"]
    assert "step-limit" not in findings and "native-fallback" in findings
    # Under the bare-call designs the object is the design's own call: the retry reads the near miss as the call
    # it is, a repeat of the one whose result the turn holds, which is not run again.
    result = run_sample(chat, sc, seed=7, mode="fallback", plan=grammar_plan("hermes", sc, chat.template,
                                                                             "json-or-text-own"))
    steps = result["turns"][0]["steps"]
    assert steps[1]["fallback_from"]["reply"] == bare and steps[1]["reply"] == bare
    assert result["executions"] == {"call00001": 1}
    findings = verdicts_of(chat, sc, result)["findings"]
    assert "step-limit" not in findings and "repeated-call-after-result" in findings


def test_native_example_shows_the_templates_own_call_and_samples_without_a_grammar(probe, tmp_path):
    """The native-example design: no grammar; the probe call as the template renders it opens the system message
    and the conversation stays as the template takes it. The reply is read by the model's own parser."""
    from harness.backends.embedded.decoding import prompt_token_ids
    from harness.grammar.plan import grammar_plan
    from harness.live.tool_loop import opening_messages, render_prompt

    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong",
                       sampling="sampling: {temperature: 0, max_tokens: 64}\n")
    example = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'
    plan = grammar_plan("hermes", sc, probe.template, "native-example", example)
    assert plan.spec is None and plan.family == "hermes" and plan.to_json("grammar")["variant"] == "native-example"
    prompt = render_prompt(probe, sc, opening_messages(sc) + [{"role": "user", "content": sc.turns[0].user}], plan)
    assert example in prompt and prompt.index(example) < prompt.index("Ping the relay.")
    n = len(prompt_token_ids(probe.backend.llm, prompt))
    ids = tuple(probe.backend.llm.tokenize(CALL.encode(), add_bos=False, special=True))
    chat = standin_chat(tmp_path, "example", [Turn(n, ids + (Vocab(PROFILES["qwen2.5"]).id("<|im_end|>"),))])
    result = run_sample(chat, sc, seed=7, mode="grammar", plan=plan)
    (step,) = result["turns"][0]["steps"]
    assert step["reply"] == CALL and "grammar" not in step and "grammar_refused" not in step
    assert step["parse"]["calls"] == [{"name": "ping", "arguments": {}}] and result["executions"] == {"call00001": 1}


def test_told_once_tells_the_tools_in_its_preamble_alone(probe, tmp_path):
    """envelope-or-text-told-once: told's preamble and grammar, and the template is not given the tools, so they
    are told once (the template's own tools block, and its call instructions, are left out), in grammar mode and
    in fallback's held retry alike."""
    from harness.grammar.plan import grammar_plan
    from harness.live.tool_loop import opening_messages, render_prompt

    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong")
    messages = opening_messages(sc) + [{"role": "user", "content": sc.turns[0].user}]
    told = grammar_plan("hermes", sc, probe.template, "envelope-or-text-told")
    once = grammar_plan("hermes", sc, probe.template, "envelope-or-text-told-once")
    assert (once.preamble, once.required_preamble, once.spec.gbnf) == (told.preamble, told.required_preamble,
                                                                        told.spec.gbnf)
    both, alone = render_prompt(probe, sc, messages, told), render_prompt(probe, sc, messages, once)
    assert "<tools>" in both and "<tools>" not in alone and "<tool_call>" not in alone
    assert both.count('"ping"') == 2 and alone.count('"ping"') == 1 and alone.index(once.preamble) < alone.index(
        "Ping the relay.")
    retry = render_prompt(probe, sc, messages, once, required=True)
    assert "<tools>" not in retry and once.required_preamble in retry
    assert once.to_json("grammar")["template_tools"] is False and "template_tools" not in told.to_json("grammar")
    # A template without a tool format is never given the tools: there the design is told's, said as told's.
    assert grammar_plan(None, sc, None, "envelope-or-text-told-once").template_tools


def test_native_example_without_a_call_format_is_a_grammar_error(tmp_path):
    from harness.grammar import GrammarError
    from harness.grammar.plan import grammar_plan

    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong")
    with pytest.raises(GrammarError, match="has none"):
        grammar_plan(None, sc, "{{ x }}", "native-example", "x")


@pytest.mark.parametrize("reply,trigger,held", [
    ('```json\n{"name": "ping", "arguments": {}}\n```', "```json", True),
    ('{"name": "ping", "arguments": {}}', "{", True),
    (CALL, "<tool_call>", False),
])
def test_lazy_trigger_records_which_trigger_fired_and_labels_a_call_held_in_another_spelling(reply, trigger, held,
                                                                                                probe, tmp_path):
    """The lazy-trigger design through the tool loop: the step records the trigger that fired and whether the call
    it opened is in another spelling than the family's. A fenced or bare object stays a near miss to the strict
    parser (nothing runs); the family's own call runs."""
    from harness.grammar.plan import grammar_plan
    from harness.live.tool_loop import opening_messages, render_prompt
    from harness.backends.embedded.decoding import prompt_token_ids

    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong",
                       sampling="sampling: {temperature: 0, max_tokens: 64}\n")
    plan = grammar_plan("hermes", sc, probe.template, "lazy-trigger")
    prompt = render_prompt(probe, sc, opening_messages(sc) + [{"role": "user", "content": sc.turns[0].user}], plan)
    n = len(prompt_token_ids(probe.backend.llm, prompt))
    ids = tuple(probe.backend.llm.tokenize(reply.encode(), add_bos=False, special=True))
    chat = standin_chat(tmp_path, "lazy", [Turn(n, ids + (Vocab(PROFILES["qwen2.5"]).id("<|im_end|>"),))])
    result = run_sample(chat, sc, seed=7, mode="grammar", plan=plan)
    step = result["turns"][0]["steps"][0]
    assert step["reply"] == reply and step["grammar"] == "auto" and step["grammar_from"] == 0
    assert step["grammar_trigger"] == trigger and step["grammar_held"] is held
    if held:
        assert step["calls"] == [] and step["parse"]["deviation"] in ("fenced-json", "bare-json")
        assert result["executions"] == {}
    else:
        assert step["parse"]["calls"] == [{"name": "ping", "arguments": {}}] and result["executions"] == {"call00001": 1}
