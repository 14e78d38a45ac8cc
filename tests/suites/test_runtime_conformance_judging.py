"""Runtime-conformance labels on recorded answers: which layer changed what the strict parser reads."""

import pytest

from harness.evaluation.judging import judge
from harness.suites.runtime_conformance.judging import classify
from harness.suites.runtime_conformance.page import conformance_markdown
from harness.suites.runtime_conformance.corpus import TOOLS
from harness import families
from harness.suites.runtime_conformance.records import RuntimeConformanceRecord

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'
TWO = CALL + '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
WEATHER_ARGS = '{"location": "Paris", "days": 3}'


def expect(reply):
    return families.parse("hermes", reply, "<|im_start|>assistant\n").to_json()


def answer(content=None, calls=(), reasoning=None, tokens=None):
    return {"status": 200, "content": content, "reasoning": reasoning, "completion_tokens": tokens,
            "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


@pytest.mark.parametrize("reply, got, variant, labels", [
    (CALL, answer(None, [("get_weather", '{"location":"Paris","days":3}')]), "auto", []),
    (CALL, answer(None, [("get_weather", '{"location":"Paris","days":"3"}')]), "auto", ["arguments-changed"]),
    (CALL, answer(None, [("get_weather", "{}")]), "auto", ["arguments-changed"]),
    (CALL, answer(None, [("get_weather", '"{\\"location\\": \\"Paris\\"}"')]), "auto", ["arguments-changed"]),
    (CALL, answer(CALL), "auto", ["call-left-in-content"]),
    (CALL, answer(""), "auto", ["runtime-dropped-call"]),
    (CALL, answer(None, [("get_time", "{}")]), "auto", ["calls-differ"]),
    (CALL, answer(CALL), "none", []),
    (CALL, answer(None, [("get_weather", "{}")]), "none", ["calls-differ"]),
    ('{"name": "get_weather", "arguments": {}}', answer(None, [("get_weather", "{}")]), "auto",
     ["runtime-forgave:bare-json"]),
    ("Hello {there}.", answer("Hello {there}."), "auto", []),
    ("Hello {there}.", answer("Hello"), "auto", ["content-differs"]),
    # parallel_tool_calls false: both calls back is the switch ignored; the first alone is the switch held.
    (TWO, answer(None, [("get_weather", WEATHER_ARGS), ("get_time", "{}")]), "no-parallel", ["parallel-ignored"]),
    (TWO, answer(None, [("get_weather", WEATHER_ARGS)]), "no-parallel", []),
    (TWO, answer(None, [("get_time", "{}")]), "no-parallel", ["calls-differ"]),
    # tool_choice required, the reply prose: the prose back is the choice ignored; a call is the choice held.
    ("Hello.", answer("Hello."), "required", ["required-ignored"]),
    ("Hello.", answer(None, [("get_time", "{}")]), "required", []),
])
def test_judge_names_the_layer(reply, got, variant, labels):
    assert judge(expect(reply), got, TOOLS, variant, "<tool_call>")[0] == labels


def record(plain, stream, key_tokens=10, ours=10, reply_tokens=5):
    return {"runtime": "rt", "server": "llama-server", "family": "hermes", "template": {"id": "T"},
            "case": {"name": "one-call"}, "variant": "auto", "reply": CALL, "reply_tokens": reply_tokens,
            "expect": expect(CALL), "key": {"tokens": key_tokens, "same_text": None}, "ours": {"tokens": ours},
            "plain": plain, "stream": stream}


def test_classify_adds_prompt_generation_and_stream_layers():
    good = answer(None, [("get_weather", '{"location": "Paris", "days": 3}')], tokens=4)
    assert classify(record(good, dict(good)), TOOLS, "<tool_call>") == (["agree"], [])
    labels, details = classify(record(good, answer(CALL), key_tokens=11), TOOLS, "<tool_call>")
    assert labels == ["prompts-differ", "stream-differs"] and "11 tokens" in details[0]
    labels, _ = classify(record(answer(None, [("get_weather", "{}")], tokens=9), {}), TOOLS, "<tool_call>")
    assert labels == ["reply-rewritten", "arguments-changed"]
    labels, details = classify(record({"error": "HTTP 500: boom"}, {"error": "HTTP 500: boom"}), TOOLS, None)
    assert labels == ["runtime-error"] and details[0].startswith("non-streamed: HTTP 500")


def test_a_malformed_history_refused_with_a_4xx_is_named_and_a_5xx_stays_an_error():
    refused = {"error": "HTTP 400: Failed to parse tool call arguments as JSON", "status": 400}
    broken = {**record(dict(refused), dict(refused)), "case": {"name": "history-malformed-call"}}
    labels, details = classify(broken, TOOLS, None)
    assert labels == ["history-refused"] and details[0].startswith("non-streamed: HTTP 400")
    failed = {"error": "HTTP 500: Failed to parse tool call arguments as JSON", "status": 500}
    assert classify({**broken, "plain": failed, "stream": dict(failed)}, TOOLS, None)[0] == ["runtime-error"]
    # Only that case: another case refused with a 400 is a runtime error.
    assert classify({**broken, "case": {"name": "one-call"}}, TOOLS, None)[0] == ["runtime-error"]


def test_two_calls_of_one_answer_under_one_id_are_named():
    twice = {**answer(None, [("get_weather", WEATHER_ARGS)]), "call_ids": ["call_0"]}
    assert classify({**record(twice, dict(twice))}, TOOLS, "<tool_call>") == (["agree"], [])
    both = {**expect(TWO)}
    calls = answer(None, [("get_weather", WEATHER_ARGS), ("get_time", "{}")])
    same = {**record({**calls, "call_ids": ["call_0", "call_0"]}, {**calls, "call_ids": ["a", "b"]}), "expect": both}
    assert classify(same, TOOLS, "<tool_call>") == (["call-ids-repeat"], ["non-streamed: call ids ['call_0', 'call_0']"])


def test_an_endpoint_that_counts_the_prompt_otherwise_is_not_judged_further():
    wrong = answer("garbage", tokens=2)
    labels, details = classify({**record(wrong, dict(wrong), key_tokens=12), "key": {"tokens": 12, "keyed": 10}},
                               TOOLS, "<tool_call>")
    assert labels == ["prompts-differ"] and "keyed to 10 prompt tokens, the runtime counts 12" in details[-1]


def test_a_rewrite_that_keeps_the_token_count_is_seen_in_the_sampled_tokens():
    # A grammar forced "7" where the script has "3": as many tokens, other ids. Only the sampled ids (llama-server's
    # __verbose) tell a rewrite from a runtime that misread the script.
    forced = CALL.replace('"days": 3', '"days": 7')
    got = answer(None, [("get_weather", '{"location": "Paris", "days": 7}')], tokens=5)
    script = {"reply_ids": [10, 11, 12, 13, 2]}
    sampled = {**got, "generated": forced, "generated_tokens": [10, 11, 17, 13]}
    labels, details = classify({**record(sampled, dict(got)), **script}, TOOLS, "<tool_call>")
    assert labels == ["reply-rewritten", "arguments-changed"]
    assert details[0].startswith("the runtime sampled other tokens than the script from token 2 (of 5 script, 4 sampled)")
    assert "fork at character 79 (of 95 script, 95 generated)" in details[0] and 'generated "7}' in details[0]
    assert classify(record(got, dict(got)), TOOLS, "<tool_call>")[0] == ["arguments-changed"]    # unseen
    # The script's ids, with or without the end of turn, are no rewrite, even where the runtime's text hides a
    # control token the model wrote.
    same = answer(None, [("get_weather", '{"location": "Paris", "days": 3}')], tokens=5)
    for ids in ([10, 11, 12, 13, 2], [10, 11, 12, 13]):
        hidden = {**same, "generated": CALL.replace("<tool_call>", ""), "generated_tokens": ids}
        assert classify({**record(hidden, dict(same)), **script}, TOOLS, "<tool_call>")[0] == ["agree"]


def test_the_markdown_has_the_matrix_and_each_disagreement_with_its_replay():
    typed = lambda raw: RuntimeConformanceRecord.from_json(  # noqa: E731  (as the driver writes it)
        {**raw, "template": {"id": "T", "sha256": "s"}, "case": {"name": "one-call", "hash": "h"}})
    bad = typed({**record(answer(CALL), answer(CALL)), "labels": ["call-left-in-content"], "details": ["x"]})
    ok = typed({**record(answer(), answer()), "labels": ["agree"], "details": []})
    text = conformance_markdown([bad, ok], [("Other", "no tools: the template does not read tools")])
    assert "| rt | hermes | 1 | 2 | 1 | 0 | 0 | 0 | 0 | 1 |" in text
    assert "- Other: no tools" in text
    assert ".venv/bin/harness runtime-conformance --server llama-server --template T --case one-call --variant auto" in text
    # One root cause, its one line first, then the request under it.
    assert text.count("replay:") == 2
    cause = next(line for line in text.splitlines() if line.startswith("1. "))
    assert cause.startswith("1. rt returns the call's text as content, no tool_calls: 1 request(s), 1 template(s), "
                            "families hermes; replay: `.venv/bin/harness runtime-conformance --server llama-server")
    assert text.index("## Root causes") < text.index("| runtime | family |") < text.index("### 1. rt returns")


def test_a_named_function_the_reply_does_not_call_must_not_come_back():
    other = judge(expect(CALL), answer(None, [("get_weather", "{}")]), TOOLS, "named-other", None, "get_time")
    assert other[0] == ["calls-differ"] and "named get_time" in other[1][0]
    held = judge(expect(CALL), answer(None, [("get_time", "{}")]), TOOLS, "named-other", None, "get_time")
    assert held == ([], [])


def test_an_answer_that_breaks_the_api_shape_is_a_runtime_error_naming_the_field():
    from harness.suites.runtime_conformance.judging import classify

    record = {"plain": {"status": 200, "content": None, "tool_calls": [{"name": "f", "arguments": {"a": 1}}],
                        "problems": ["choices[0].message.tool_calls[0].function.arguments is dict {\"a\": 1}, not "
                                     "the JSON string the API specifies"]},
              "stream": {}, "reply_tokens": 5, "variant": "auto", "request": {},
              "expect": {"calls": [{"name": "f", "arguments": {"a": 1}}], "deviation": None, "content": "",
                         "reasoning": None, "detail": None}}
    labels, details = classify(record, [], None)
    assert "runtime-error" in labels and any("not the JSON string the API specifies" in d for d in details)


def test_typed_arguments_are_compared_in_the_notation_the_family_template_writes():
    # MiniCPM 5's template writes a list or dict argument with Python's str(); vLLM and SGLang read it back.
    from harness.suites.runtime_conformance.corpus import build_corpus
    from harness.pins.sources import load_sources, resolve_template

    corpus = build_corpus(resolve_template("openbmb-MiniCPM5-1B", load_sources()))
    case = next(c for c in corpus.cases if c.name == "typed-arguments")
    assert "['Ana', 'Bo']" in case.reply
    peers = {"title": "Café \"Zürich\" \\ 東京 🎉", "attendees": ["Ana", "Bo"],
             "details": {"room": 12, "online": False, "notes": None}, "budget": 1250.5, "priority": -3}
    assert judge(case.expect, answer(calls=[("create_event", peers)]), TOOLS, "auto", None) == ([], [])
    # MiniMax-M3's nested leaves (text inside its XML) are typed by the nested schema.
    corpus = build_corpus(resolve_template("MiniMax-M3", load_sources()))
    case = next(c for c in corpus.cases if c.name == "typed-arguments")
    assert case.expect["calls"][0]["arguments"]["details"] == {"room": "12", "online": "false"}
    peers = {**peers, "details": {"room": 12, "online": False}}
    assert judge(case.expect, answer(calls=[("create_event", peers)]), TOOLS, "auto", None) == ([], [])


def test_a_runtime_is_judged_on_the_text_it_generated_not_on_the_script():
    # The script writes a call and then prose (a near miss, trailing-text); the runtime's grammar stopped at the
    # call's close, so what it generated is a well-formed call, and reading that as a call forgives nothing: the
    # one cause is the rewrite. Where its own text is a near miss it does read, it forgave that.
    script = CALL + "\nI asked for the forecast."
    call = answer(None, [("get_weather", WEATHER_ARGS)], tokens=4)
    base = {**record(None, None), "reply": script, "expect": expect(script), "reply_ids": [10, 11, 12, 13, 14, 2]}
    shown = {**call, "generated": CALL, "generated_tokens": [10, 11, 12, 13]}
    unseen = classify({**base, "plain": shown, "stream": dict(call)}, TOOLS, "<tool_call>")
    assert unseen[0] == ["reply-rewritten", "runtime-forgave:trailing-text"]        # no parse of what it wrote
    labels, details = classify({**base, "plain": shown, "stream": dict(call), "generated_expect": expect(CALL)},
                               TOOLS, "<tool_call>")
    assert labels == ["reply-rewritten"]
    assert "its parse is judged on the text it generated: strict reads ['get_weather']" in details
    loose = '{"name": "get_weather", "arguments": ' + WEATHER_ARGS + "}"
    own = {**call, "generated": loose, "generated_tokens": [10, 11, 12, 15]}
    labels, _ = classify({**base, "plain": own, "stream": dict(call), "generated_expect": expect(loose)},
                         TOOLS, "<tool_call>")
    assert labels == ["reply-rewritten", "runtime-forgave:bare-json"]


def test_the_record_keeps_the_parse_of_the_generated_text_where_it_differs():
    from harness.suites.runtime_conformance.judging import conformance_record

    script = CALL + "\nI asked for the forecast."
    call = answer(None, [("get_weather", WEATHER_ARGS)], tokens=4)
    fields = dict(runtime="rt", server="llama-server", template={"id": "T", "sha256": "0"}, family="hermes",
                  profile=None, case={"name": "one-call", "hash": "h"}, variant="auto", request={}, reply=script,
                  reply_tokens=6, reply_ids=[10, 11, 12, 13, 14, 2], expect=expect(script), ours={"tokens": 10},
                  key={"tokens": 10, "same_text": None}, model=None, stream=dict(call), recorded="now",
                  tools=TOOLS, marker="<tool_call>", reparse=expect)
    made = conformance_record(plain={**call, "generated": CALL, "generated_tokens": [10, 11, 12, 13]}, **fields)
    assert made.generated_expect == expect(CALL) and made.labels == ["reply-rewritten"]
    again = RuntimeConformanceRecord.from_json(made.to_json())
    assert again.generated_expect == expect(CALL)
    same = conformance_record(plain={**call, "generated": script}, **fields)
    assert same.generated_expect is None and "generated_expect" not in same.to_json()
