"""Scoring from recorded raw replies alone, through the current parsers."""

import dataclasses

import pytest

from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scoring import arguments_match, score_sample, wilson

SCENARIOS = {s.name: s for s in load_scenarios()}

# Exact replies quoted by the seed ADR (live, on the Windows runtime).
LLAMA_FILE_CHUNKS = ('<|python_tag|>{"name": "file_chunks", "parameters": {"source": "imprint/chat.py", '
                     '"start": "0", "end": "2", "project": "chat"}}')
QWEN3_FILE_CHUNKS = ('<tool_call>\n{"name": "file_chunks", "arguments": {"source": "imprint/chat.py", '
                     '"start": 0, "end": 2}}\n</tool_call>')


def step(reply, calls=(), **extra):
    return {"reply": reply, "prompt_tail": "<|im_start|>assistant\n", "calls": list(calls), **extra}


def executed(name, error=False):
    return {"name": name, "executed": True, "executions": 1, "error": error}


def sample(family, *turns, replayed=False, mode="native"):
    return SampleRecord(ModelRef("m"), ScenarioRef("s", "h"), sample=0, seed=0, family=family, replayed=replayed,
                        mode=mode, turns=[{"steps": list(t)} for t in turns])


def test_llama_string_numbers_type_as_integers_but_an_invented_key_is_invalid():
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("llama3", [step(LLAMA_FILE_CHUNKS)], replayed=True))
    assert verdicts["parsed"] and verdicts["right_tool"]
    # "project" is not a parameter of file_chunks: the schema rejects the call (the ADR's tool had it).
    assert verdicts["valid_arguments"] is False and verdicts["expected_arguments"] is False
    assert {"invalid-arguments", "string-coerced-arguments"} <= set(verdicts["findings"])
    # A replay stops at the call: the answer is unknown, not wrong.
    assert verdicts["result_used"] is None and "step-limit" not in verdicts["findings"]


def test_python_notation_values_are_a_named_finding_and_invalid_arguments():
    # Seed-OSS's template writes a past value with Python's str(); a model that does the same writes None.
    reply = ('<seed:tool_call>\n<function=file_chunks>\n<parameter=source>imprint/chat.py</parameter>\n'
             '<parameter=start>0</parameter>\n<parameter=end>None</parameter>\n</function>\n</seed:tool_call>')
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("seed-oss", [step(reply)], replayed=True))
    assert verdicts["parsed"] and verdicts["right_tool"] and verdicts["valid_arguments"] is False
    assert {"invalid-arguments", "python-notation-arguments"} <= set(verdicts["findings"])


def test_minicpm5_python_notation_is_its_format_so_only_a_wrong_type_is_named():
    # MiniCPM 5's template writes non-strings with str() and its peers read them back: None is read, and is
    # then no integer.
    reply = ('<function name="file_chunks"><param name="source">imprint/chat.py</param>'
             '<param name="start">0</param><param name="end">None</param></function>')
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("minicpm5", [step(reply)], replayed=True))
    assert verdicts["parsed"] and verdicts["valid_arguments"] is False
    assert "invalid-arguments" in verdicts["findings"] and "python-notation-arguments" not in verdicts["findings"]


def test_qwen3_reply_is_right_in_every_way_that_applies():
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("hermes", [step(QWEN3_FILE_CHUNKS)], replayed=True))
    assert verdicts["parsed"] and verdicts["right_tool"] and verdicts["valid_arguments"]
    assert verdicts["expected_arguments"] and verdicts["passed"] and verdicts["findings"] == []


def test_nested_tool_list_shape_is_a_named_deviation_not_a_call():
    reply = '{"type": "function", "function": {"name": "file_chunks", "parameters": {"start": 0}}}'
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("llama3", [step(reply)], replayed=True))
    assert verdicts["parsed"] is False and verdicts["right_tool"] is False
    assert verdicts["deviations"] == ["nested-function-shape"] and verdicts["passed"] is False


def test_double_braces_are_text():
    reply = '<tool_call>\n{{"name": "file_chunks", "arguments": {"source": "imprint/chat.py"}}}\n</tool_call>'
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("hermes", [step(reply)]))
    assert verdicts["parsed"] is False and verdicts["deviations"] == ["double-braces"]
    # A live record that ended in text has an answer, and it does not use the (never run) tool's result.
    assert verdicts["result_used"] is False


def test_arithmetic_answered_directly_passes_and_a_tool_call_fails():
    direct = score_sample(SCENARIOS["arithmetic"], sample("hermes", [step("17 times 3 is 51.")]))
    assert direct["parsed"] and direct["right_tool"] and direct["answer"] and direct["passed"]
    called = score_sample(SCENARIOS["arithmetic"], sample("hermes", [
        step('<tool_call>\n{"name": "search", "arguments": {"query": "17*3"}}\n</tool_call>', [executed("search")]),
        step("The answer is 51.")]))
    assert called["parsed"] is False and called["right_tool"] is False and called["answer"] is True
    assert called["passed"] is False


def test_result_used_needs_the_tool_to_have_returned_and_the_answer_to_show_it():
    call = '<tool_call>\n{"name": "read_note", "arguments": {"title": "locker"}}\n</tool_call>'
    good = sample("hermes", [step(call, [executed("read_note")]), step("Your combination is 7-31-19.")])
    guessed = sample("hermes", [step(call, [executed("read_note")]), step("It is 1-2-3.")])
    assert score_sample(SCENARIOS["seeded-fact"], good)["result_used"] is True
    assert score_sample(SCENARIOS["seeded-fact"], guessed)["result_used"] is False
    assert score_sample(SCENARIOS["seeded-fact"], good)["passed"] is True


def test_invented_arguments_for_a_zero_parameter_tool():
    call = '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "UTC"}}\n</tool_call>'
    verdicts = score_sample(SCENARIOS["get-time"], sample("hermes", [step(call, []), step("It is 14:37.")]))
    assert "invented-arguments" in verdicts["findings"]
    assert verdicts["right_tool"] is True and verdicts["valid_arguments"] is False
    assert verdicts["expected_arguments"] is False


def test_name_recall_scores_the_second_turn_and_a_missing_turn_is_wrong():
    full = sample(None, [step("Nice to meet you, Priya!")], [step("You told me your name is Priya.")])
    assert score_sample(SCENARIOS["name-recall"], full)["answer"] is True
    forgot = sample(None, [step("Hello!")], [step("I don't know your name.")])
    assert score_sample(SCENARIOS["name-recall"], forgot)["answer"] is False
    cut = sample(None, [step("Hello!")])  # the run stopped after the first turn
    assert score_sample(SCENARIOS["name-recall"], cut)["answer"] is False


def test_without_family_a_call_cannot_parse_and_call_shaped_text_is_named():
    verdicts = score_sample(SCENARIOS["file-chunks"], sample(None, [step(QWEN3_FILE_CHUNKS)]))
    assert verdicts["parsed"] is False and "call-without-tools" in verdicts["findings"]


def test_rescoring_notices_a_parse_that_changed_since_the_run():
    recorded = step(QWEN3_FILE_CHUNKS, parse={"calls": [], "deviation": "invalid-json"})
    assert score_sample(SCENARIOS["file-chunks"], sample("hermes", [recorded]))["parse_changed"] is True


@pytest.mark.parametrize("got, want, ok", [
    ({"start": 0, "end": 2, "source": "imprint/chat.py"}, {"start": 0, "end": 2}, True),
    ({"subject": "Alex"}, {"subject": "alex"}, True),
    ({"start": 1}, {"start": 0}, False),
    ({"flag": 1}, {"flag": True}, False),
    ({}, {}, True),
    ({"timezone": "UTC"}, {}, False),
])
def test_arguments_match(got, want, ok):
    assert arguments_match(got, want) is ok


def test_wilson_interval():
    low, high = wilson(0, 10)
    assert low == 0.0 and 0.27 < high < 0.28
    low, high = wilson(5, 10)
    assert 0.23 < low < 0.24 and 0.76 < high < 0.77
    assert wilson(0, 0) == (0.0, 1.0)


def test_call_readable_counts_only_replies_that_tried_to_call():
    fenced = '```json\n{"name": "file_chunks", "arguments": {"source": "imprint/chat.py", "start": 0, "end": 2}}\n```'
    assert score_sample(SCENARIOS["file-chunks"], sample("hermes", [step(fenced)]))["call_readable"] is False
    assert score_sample(SCENARIOS["file-chunks"], sample("hermes", [step(QWEN3_FILE_CHUNKS)],
                                                          replayed=True))["call_readable"] is True
    assert score_sample(SCENARIOS["greeting"], sample("hermes", [step("Hello!")]))["call_readable"] is None


def test_text_past_an_end_of_turn_marker_is_not_the_answer():
    echo = "what did I tell you my name was<|im_end|>\n<|im_start|>user\nMy name is Priya.<|im_end|>"
    verdicts = score_sample(SCENARIOS["name-recall"], sample(None, [step("Hello.")], [step(echo)]))
    assert verdicts["answer"] is False and "past-end-of-turn" in verdicts["findings"]


def test_an_unread_call_shown_as_text_is_no_answer():
    bare = '{"name": "search", "arguments": {"query": "Priya", "limit": 10}}'
    verdicts = score_sample(SCENARIOS["name-recall"], sample("hermes", [step("Hi Priya!")], [step(bare)]))
    assert verdicts["answer"] is False and verdicts["deviations"] == ["bare-json"]


def test_an_errored_step_fails_every_check_it_reaches():
    # Gemma 270M, native seeded-history: the template raised on the tool turn; the reply is ''.
    raised = {"reply": "", "calls": [], "error": "render: template raised at line 1: Conversation roles must alternate"}
    verdicts = score_sample(SCENARIOS["seeded-history"], sample(None, [raised]))
    assert verdicts["parsed"] is False and verdicts["right_tool"] is False and verdicts["answer"] is False
    assert verdicts["passed"] is False and "generation-error" in verdicts["findings"]
    call_due = score_sample(SCENARIOS["file-chunks"], sample("hermes", [raised]))
    assert {k: call_due[k] for k in ("parsed", "intended_tool", "right_tool", "valid_arguments",
                                     "expected_arguments", "result_used")} == dict.fromkeys(
        ("parsed", "intended_tool", "right_tool", "valid_arguments", "expected_arguments", "result_used"), False)


def test_an_echo_of_the_user_is_no_answer():
    # Gemma 270M's second turn, repeating the first user message until the token limit.
    loop = "My name is Priya. mendatang\nMy name is Priya. mendatang\nMy name is Priya."
    echoed = score_sample(SCENARIOS["name-recall"], sample(None, [step("Nice to meet you!")], [step(loop)]))
    assert echoed["answer"] is False and "echoed-user" in echoed["findings"]
    recalled = score_sample(SCENARIOS["name-recall"], sample(None, [step("Hi!")], [step("Your name is Priya.")]))
    assert recalled["answer"] is True and "echoed-user" not in recalled["findings"]
    greeting_echo = score_sample(SCENARIOS["greeting"], sample(None, [step("Hi there! How are you today?")]))
    assert greeting_echo["answer"] is False and greeting_echo["passed"] is False


def test_an_answer_that_only_stopped_at_the_token_limit_is_no_answer():
    ramble = step("Hello! " + "I am fine. " * 40, finish_reason="length")
    verdicts = score_sample(SCENARIOS["greeting"], sample("hermes", [ramble]))
    assert verdicts["answer"] is False and "runaway-answer" in verdicts["findings"]
    # Closed by the template's end-of-turn marker, the answer ended; only the runtime went on.
    closed = step("Hello, doing well!<|im_end|>\n<|im_start|>user\nok" + " ok" * 40, finish_reason="length")
    assert score_sample(SCENARIOS["greeting"], sample("hermes", [closed]))["answer"] is True
    assert score_sample(SCENARIOS["greeting"], sample("hermes", [step("")]))["answer"] is False


READ_NOTE = '<tool_call>\n{"name": "read_note", "arguments": {"title": "locker"}}\n</tool_call>'
NOTE = '{"title": "locker", "text": "Gym locker 4412, combination 7-31-19."}'


def test_a_copy_of_the_tool_message_does_not_use_the_result():
    ran = {**executed("read_note"), "result": NOTE}
    # The text modes send the result as `Result of read_note: …`; Gemma copied it back, garbled or not.
    for copy in (f"Result of read_note: {NOTE}", 'Result of read_note: {"title": "locker", "text": "Gym locker '
                 '4412, combination 7-31-19"', NOTE):
        verdicts = score_sample(SCENARIOS["seeded-fact"], sample("hermes", [step(READ_NOTE, [ran]), step(copy)]))
        assert verdicts["result_used"] is False and "echoed-tool-message" in verdicts["findings"], copy
    used = score_sample(SCENARIOS["seeded-fact"], sample("hermes", [
        step(READ_NOTE, [ran]), step(f"Result of read_note: {NOTE}\nYour combination is 7-31-19.")]))
    assert used["result_used"] is True


def test_a_turn_that_must_call_is_answered_only_after_the_call():
    # SmolLM2 without tools: an apology written instead of calling send_email.
    apology = "I'm sorry, but I'm unable to send emails."
    assert score_sample(SCENARIOS["failing-tool"], sample(None, [step(apology)]))["answer"] is False
    call = ('<tool_call>\n{"name": "send_email", "arguments": {"to": "sam@example.com", "subject": "Running late", '
            '"body": "10 minutes late"}}\n</tool_call>')
    raised = {**executed("send_email", error=True), "result": '{"error": "SMTP relay refused the message"}'}
    after = score_sample(SCENARIOS["failing-tool"], sample("hermes", [step(call, [raised]),
                                                                       step("Sorry, the email could not be sent.")]))
    assert after["answer"] is True and after["passed"] is True


def test_a_synthesized_answer_is_not_the_models():
    call = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    loop = step("get_time: 14:37", synthesized=True, generation_error="generate: context window")
    verdicts = score_sample(SCENARIOS["get-time"], sample("hermes", [step(call, [executed("get_time")]), loop]))
    assert verdicts["result_used"] is False and "synthesized-answer" in verdicts["findings"]


@pytest.mark.parametrize("query, ok", [("alex", True), ("Alex", True), ("alex.com/api-test", False),
                                       ("https://example.com/api/users/{user_id}", False)])
def test_memory_search_must_search_for_alex(query, ok):
    call = f'<tool_call>\n{{"name": "search", "arguments": {{"query": "{query}"}}}}\n</tool_call>'
    verdicts = score_sample(SCENARIOS["memory-search"], sample("hermes", [step(call, [executed("search")]),
                                                                          step("Alex climbs and lives in Lisbon.")]))
    assert verdicts["expected_arguments"] is ok and verdicts["passed"] is ok


@pytest.mark.parametrize("reply, intended", [
    ('```json\n{"name": "file_chunks", "arguments": {"source": "imprint/chat.py", "start": 0, "end": 2}}\n```', True),
    ('{{"name": "file_chunks", "arguments": {"source": "imprint/chat.py"}}}', True),
    ('{"type": "function", "function": {"name": "file_chunks", "parameters": {}}}', True),
    ('```json\n{"name": "search", "arguments": {"query": "file_chunks"}}\n```', False),
    ("I can't read files.", False),
])
def test_intended_tool_is_read_from_the_named_near_miss(reply, intended):
    verdicts = score_sample(SCENARIOS["file-chunks"], sample("hermes", [step(reply)]))
    assert verdicts["intended_tool"] is intended and verdicts["right_tool"] is False


def test_fallback_keeps_the_first_replys_own_verdicts():
    fenced = '```json\n{"name": "get_time", "arguments": {}}\n```'
    rewrite = step('{"name": "get_time", "arguments": {}}', [executed("get_time")], family="generic-json",
                   grammar="required", fallback_from={"reply": fenced, "prompt_tail": "", "family": "hermes"})
    record = sample("hermes", [rewrite, step("It is 14:37.")], mode="fallback")
    verdicts = score_sample(SCENARIOS["get-time"], record)
    assert verdicts["parsed"] and verdicts["right_tool"] and verdicts["passed"]  # the rewrite
    assert verdicts["first_parsed"] is False and verdicts["first_right_tool"] is False
    assert verdicts["first_intended_tool"] is True and verdicts["first_call_readable"] is False
    assert score_sample(SCENARIOS["get-time"], dataclasses.replace(record, mode="native"))["first_parsed"] is None
