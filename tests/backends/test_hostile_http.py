"""The OpenAI backend against real HTTP servers on 127.0.0.1 that answer badly on purpose: every request ends
with a labelled error for that request (a GenerationError) or a labelled finding, never a traceback, and never
after reading without bound. Bounds here are bytes; the join guards only keep a regression from hanging the
suite (they are minutes, far from anything measured)."""

import json
import math
import threading

import pytest

from harness.backends.openai import Endpoint, OpenAIBackend
from harness.backends.transport import request_json
from harness.core.errors import GenerationError, ServerReplyError
from harness.suites.runtime_check.judging import classify
from harness.formats.calls import ParseResult, ToolCall

from hostile_server import HostileServer, completion, drip, endless_chunks, hang_up, raw_json, redirect, whole

SAMPLING = {"max_tokens": 8, "temperature": 0.0}
HANG_GUARD = 300


def backend(server, **kwargs):
    return OpenAIBackend([Endpoint(server.url, "m")], backoff=0.01, retries=0, **kwargs)


def failure(call) -> str:
    """The GenerationError message of call(), run in a thread so that a regression fails instead of hanging."""
    out = []

    def run():
        try:
            call()
            out.append("no error")
        except GenerationError as exc:
            out.append(f"GenerationError: {exc}")
        except BaseException as exc:   # noqa: BLE001 -- any other exception is what this test catches
            out.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_GUARD)
    assert out, "the request never ended"
    return out[0]


def complete(server, **kwargs):
    return lambda: backend(server, **kwargs).complete("p", SAMPLING, seed=0)


def test_an_endless_chunked_stream_ends_at_the_deadline():
    with HostileServer(endless_chunks(pause=0.01)) as server:
        said = failure(complete(server, timeout=1.0))
    assert said.startswith("GenerationError") and "deadline of the whole request" in said


def test_a_one_byte_drip_ends_at_the_deadline():
    with HostileServer(drip()) as server:
        said = failure(complete(server, timeout=1.0))
    assert said.startswith("GenerationError") and "deadline of the whole request" in said
    assert server.sent < 1 << 20


def test_a_body_over_the_cap_is_not_read_whole():
    cap = 1 << 20
    with HostileServer(endless_chunks()) as server:
        with pytest.raises(ServerReplyError, match="over the 1048576-byte cap"):
            request_json(server.url + "/v1/completions", {}, timeout=HANG_GUARD, max_body=cap)
    assert server.sent < 8 * cap          # stopped near the cap, not at the deadline


def test_a_two_gigabyte_content_length_is_refused_before_reading():
    with HostileServer(raw_json(b"{}", length=2 * 1024 ** 3)) as server:
        said = failure(complete(server))
    assert "announces 2147483648 bytes, over the" in said and said.startswith("GenerationError")


def test_a_body_shorter_than_its_content_length_is_an_error():
    with HostileServer(raw_json('{"choices": [', length=500)) as server:
        said = failure(complete(server))
    assert said.startswith("GenerationError") and "ended after 13 of the 500 bytes" in said


def test_a_redirect_is_not_followed():
    with HostileServer(completion("the other server")) as other, HostileServer(redirect(other.url)) as server:
        said = failure(complete(server))
    assert said.startswith("GenerationError") and "HTTP 302 redirect to" in said and "not followed" in said
    assert other.paths == []


DEEP = "[" * 100_000 + "]" * 100_000
WRONG_COMPLETIONS = {
    "text an int": ('{"choices": [{"text": 5}]}', "choices[0].text is int 5, not str"),
    "text a list": ('{"choices": [{"text": ["a"]}]}', "choices[0].text is list"),
    "text NaN": ('{"choices": [{"text": NaN}]}', "NaN is not JSON"),
    "usage a list": ('{"choices": [{"text": "x"}], "usage": [1, 2]}', "usage is list"),
    "count a string": ('{"choices": [{"text": "x"}], "usage": {"prompt_tokens": "12"}}',
                       'usage.prompt_tokens is str "12", not int'),
    "choices a dict": ('{"choices": {"text": "x"}}', "the answer has no choices"),
    "a bare list": ('[1, 2]', "the answer is a JSON list, not an object"),
    "nested 100k deep": ('{"choices": ' + DEEP + "}", "nested too deep"),
    "not JSON": ("<html>", "not JSON"),
}


@pytest.mark.parametrize("body,expected", WRONG_COMPLETIONS.values(), ids=WRONG_COMPLETIONS.keys())
def test_a_wrong_typed_completion_is_that_request_s_error(body, expected):
    with HostileServer(raw_json(body)) as server:
        said = failure(complete(server))
    assert said.startswith("GenerationError") and expected in said, said


def _chat(message):
    return _chat_raw(json.dumps({"choices": [{"message": message}]}))


def _chat_raw(body: str):
    with HostileServer(raw_json(body)) as server:
        return backend(server).chat([{"role": "user", "content": "hi"}], None, SAMPLING, seed=0)


# The strict parser read a call with arguments: the runtime's broken call must not read as "emptied them".
STRICT_CALL = ParseResult("hermes", [ToolCall("f", {"a": 1})])
WRONG_MESSAGES = {
    "message a string": ("hello", "choices[0].message is str"),
    "tool_calls a dict": ({"tool_calls": {"a": 1}}, "tool_calls is dict"),
    "function a list": ({"tool_calls": [{"function": [1]}]}, "tool_calls[0].function is list"),
    "name 42": ({"tool_calls": [{"function": {"name": 42, "arguments": "{}"}}]},
                "function.name is int 42, not a string"),
    "name missing": ({"tool_calls": [{"function": {"arguments": "{}"}}]}, "function.name is missing"),
    "arguments an object": ({"tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                            "function.arguments is dict {\"a\": 1}, not the JSON string the API specifies"),
    "content a list": ({"content": [{"type": "text"}]}, "content is list"),
}


@pytest.mark.parametrize("message,expected", WRONG_MESSAGES.values(), ids=WRONG_MESSAGES.keys())
def test_a_wrong_typed_chat_answer_is_labelled_as_what_happened(message, expected):
    reply = _chat(message)
    assert any(expected in p for p in reply.problems), reply.problems
    label, detail = classify(STRICT_CALL, None, reply)
    assert label == "runtime-malformed-reply" and expected in detail
    json.dumps(reply.to_json(), allow_nan=False)          # what the record holds is JSON


def test_arguments_nested_100k_deep_are_invalid_arguments_not_a_crash():
    reply = _chat({"tool_calls": [{"function": {"name": "f", "arguments": DEEP}}]})
    assert reply.problems == []
    label, detail = classify(STRICT_CALL, None, reply)
    assert label == "runtime-invalid-arguments" and "are not a JSON object" in detail


def test_a_chat_body_nested_100k_deep_is_that_request_s_error():
    said = failure(lambda: _chat_raw('{"choices": [{"message": ' + DEEP + "}]}"))
    assert said.startswith("GenerationError") and "nested too deep" in said


def test_a_lone_surrogate_and_nan_reach_the_record_as_valid_json(tmp_path):
    from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
    from harness.storage.transcripts import read_transcript
    from harness.storage.transcript_writer import TranscriptWriter

    with HostileServer(raw_json('{"choices": [{"text": "a\\ud800b"}]}')) as server:
        text = backend(server).complete("p", SAMPLING, seed=0).text
    assert text == "a\ud800b"               # valid JSON: the server may send it
    record = SampleRecord(ModelRef("m", "served"), ScenarioRef("s", "h"), 0, 0,
                          turns=[{"user": "u", "steps": [{"reply": text}]}], seconds=math.nan)
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as writer:
        writer.append(record)
    line = path.read_bytes()
    strict = json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} written bare"))
    assert strict["seconds"] is None and strict["turns"][0]["steps"][0]["reply"] == "a\ud800b"
    read = read_transcript(path)
    assert not read.warnings
    reply = read.records[0].turns[0]["steps"][0]["reply"]
    assert reply == "a\ufffdb" and reply.encode("utf-8")     # what reports write can be written


def sse(events, forever=False):
    """A server-sent event stream of these events (then [DONE]), or repeating the first one forever."""
    def answer(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        while True:
            for event in events:
                h.send(b"data: " + json.dumps(event).encode() + b"\n\n")
            if not forever:
                h.send(b"data: [DONE]\n\n")
                return
    return answer


def test_an_endless_event_stream_ends_at_the_deadline():
    from harness.backends.chat_answers import chat_stream

    event = {"choices": [{"delta": {"content": "x"}}]}
    with HostileServer(sse([event], forever=True)) as server:
        out = []
        worker = threading.Thread(target=lambda: out.append(chat_stream(server.url + "/v1/chat/completions", {}, 1.0)),
                                  daemon=True)
        worker.start()
        worker.join(HANG_GUARD)
    assert out and "deadline of the whole request" in out[0]["error"]


def test_wrong_typed_stream_deltas_are_named_not_a_crash():
    from harness.backends.chat_answers import chat_stream

    events = [{"choices": [{"delta": {"tool_calls": "call"}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 42, "arguments": "{"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
                            "finish_reason": "tool_calls"}]},
              {"choices": "none"}]
    with HostileServer(sse(events)) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["tool_calls"] == [{"name": "", "arguments": "{}"}] and out["finish_reason"] == "tool_calls"
    assert out["problems"] == ['chunk 1: delta.tool_calls is str "call", not a list',
                               "chunk 2: tool call 0's function.name is int 42, not a string",
                               'chunk 4: choices is str "none", not a list']


def test_the_ids_of_a_runtime_s_calls_and_its_prompt_count_are_kept():
    from harness.backends.chat_answers import chat_answer, chat_stream

    calls = [{"id": "call_0", "type": "function", "function": {"name": n, "arguments": "{}"}}
             for n in ("get_weather", "get_time")]
    body = {"choices": [{"message": {"content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 41, "completion_tokens": 9}}
    with HostileServer(raw_json(json.dumps(body))) as server:
        out = chat_answer(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["call_ids"] == ["call_0", "call_0"] and out["prompt_tokens"] == 41
    # Streamed, an id comes on a call's first delta only.
    events = [{"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_time"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"name": "get_time",
                                                                              "arguments": "{}"}}]}}],
               "finish_reason": "tool_calls"}]
    with HostileServer(sse(events)) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["call_ids"] == ["a", None] and len(out["tool_calls"]) == 2


def test_a_non_streamed_answer_without_choices_is_an_error_not_a_crash():
    from harness.backends.chat_answers import chat_answer

    with HostileServer(raw_json('{"choices": ["x"]}')) as server:
        out = chat_answer(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert "the answer has no choices" in out["error"]


NATIVE = {
    "token ids as text": ({"tokens": ["a"]}, {"content": "x"}, "tokens holds something other than token ids"),
    "tokens evaluated a string": ({"tokens": [1], "tokens_evaluated": "5"}, {"content": "x"},
                                  'tokens_evaluated is str "5", not int'),
    "detokenized content a list": ({"tokens": [1]}, {"content": ["x"]}, "content is list"),
}


@pytest.mark.parametrize("completion_answer,detokenized,expected", NATIVE.values(), ids=NATIVE.keys())
def test_a_wrong_typed_llama_server_completion_is_that_request_s_error(completion_answer, detokenized, expected):
    def answer(h):
        body = completion_answer if h.path == "/completion" else detokenized if h.path == "/detokenize" else None
        return raw_json(json.dumps(body), status=200 if body is not None else 404, plain=False)(h)

    with HostileServer(answer) as server:
        said = failure(complete(server))
    assert said.startswith("GenerationError") and expected in said, said


def test_a_stream_that_never_ends_its_line_stops_at_the_cap():
    from harness.backends.chat_answers import chat_stream
    from harness.backends.transport import MAX_BODY

    with HostileServer(endless_chunks(chunk=b"x" * 65536)) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert f"over the {MAX_BODY}-byte cap" in out["error"]
    assert server.sent < 2 * MAX_BODY


def cut_stream(events):
    """A server-sent event stream that stops after these events: no [DONE], the connection closed."""
    def answer(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for event in events:
            h.send(b"data: " + json.dumps(event).encode() + b"\n\n")
    return answer


def test_a_stream_cut_mid_call_is_named_not_a_clean_answer():
    from harness.backends.chat_answers import chat_stream

    events = [{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "get_weather"}}]}}]},
              {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"location": "Par'}}]}}]}]
    with HostileServer(cut_stream(events)) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["tool_calls"] == [{"name": "get_weather", "arguments": '{"location": "Par'}]
    assert out["cut_short"].startswith("cut short: the stream ended without [DONE] and without a finish_reason")
    assert '{\\"location\\": \\"Par' in out["cut_short"] and out["problems"] == [out["cut_short"]]


def test_a_stream_with_done_but_no_finish_reason_is_named():
    from harness.backends.chat_answers import chat_stream

    with HostileServer(sse([{"choices": [{"delta": {"content": "Hi"}}]}])) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["content"] == "Hi" and out["cut_short"] == 'cut short: the stream ended without a finish_reason; ' \
        'it stopped after "Hi"'


def test_a_complete_stream_is_not_cut_short():
    from harness.backends.chat_answers import chat_stream

    with HostileServer(sse([{"choices": [{"delta": {"content": "Hi"}, "finish_reason": "stop"}]}])) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["content"] == "Hi" and "cut_short" not in out and "problems" not in out


def test_a_stream_that_ends_after_its_finish_reason_without_done_finished():
    from harness.backends.chat_answers import chat_stream

    events = [{"choices": [{"delta": {"content": "Hi"}}]}, {"choices": [{"delta": {}, "finish_reason": "stop"}]}]
    with HostileServer(cut_stream(events)) as server:
        out = chat_stream(server.url + "/v1/chat/completions", {}, HANG_GUARD)
    assert out["content"] == "Hi" and out["finish_reason"] == "stop" and out["no_done_sentinel"] is True
    assert "cut_short" not in out and "problems" not in out


# Answers that arrived whole: the runtime's, whatever they hold. A suite records them (runtime-error).
COMPLETE = {
    "200 with HTML": ("plain", whole(b"<html><body>Welcome</body></html>"), "the answer is not JSON"),
    "bad UTF-8": ("plain", whole(b'{"choices": "\xff\xfe"}', content_type="application/json"), "not JSON"),
    "an empty body": ("plain", whole(b""), "the answer is empty"),
    "HTTP 500 every time": ("plain", raw_json('{"error": "peg-native format"}', status=500, plain=False),
                            "HTTP 500: {\"error\": \"peg-native format\"}"),
    "an SSE event that is not JSON": ("stream", whole(b"data: {\"choices\": [\n\ndata: [DONE]\n\n",
                                                       content_type="text/event-stream"), "the answer is not JSON"),
}
# No answer, or "not now": left for a later run to ask again.
UNANSWERED = {
    "a hang-up": ("plain", hang_up, "RemoteDisconnected"),
    "a hang-up mid-stream": ("stream", lambda h: (h.send_response(200), h.send_header("Content-Length", "100"),
                                                  h.end_headers(), h.send(b"data: {")), "ended after 7 of the 100"),
    "HTTP 503 while loading": ("plain", raw_json('{"error": "loading model"}', status=503, plain=False), "HTTP 503"),
}


def _ask(how, url):
    from harness.backends.chat_answers import chat_answer, chat_stream

    return (chat_answer if how == "plain" else chat_stream)(url + "/v1/chat/completions", {}, HANG_GUARD)


@pytest.mark.parametrize("how,answer,said", COMPLETE.values(), ids=COMPLETE.keys())
def test_a_complete_answer_that_is_no_chat_completion_is_the_runtime_s(how, answer, said):
    from harness.suites.runtime_conformance.endpoint import redirected, unanswered

    with HostileServer(answer) as server:
        out = _ask(how, server.url)
    assert said in out["error"] and out["status"] is not None, out
    assert not unanswered(out) and not redirected(out)


@pytest.mark.parametrize("how,answer,said", UNANSWERED.values(), ids=UNANSWERED.keys())
def test_no_answer_or_not_now_is_left_to_retry(how, answer, said):
    from harness.suites.runtime_conformance.endpoint import redirected, unanswered

    with HostileServer(answer) as server:
        out = _ask(how, server.url)
    assert said in out["error"] and unanswered(out) and not redirected(out), out


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_the_url_s_problem_not_an_answer(status):
    from harness.suites.runtime_conformance.endpoint import redirected, unanswered

    with HostileServer(completion()) as other, HostileServer(redirect(other.url, status)) as server:
        out = _ask("plain", server.url)
    assert redirected(out) and not unanswered(out) and other.url in out["error"] and other.paths == []


@pytest.mark.parametrize("body, words", [
    ('{"error": {"message": "tool_choice=\\"required\\" requires --tool-call-parser", "code": 400}}',
     'tool_choice="required" requires --tool-call-parser'),          # OpenAI's shape: vLLM, llama-server
    ('{"error": {"code": 400, "detail": "no such model"}}', "no such model"),
    ('{"error": "model not loaded"}', "model not loaded"),
    ('{"detail": "Not Found"}', "Not Found"),                          # FastAPI's
    ('{"message": "busy"}', "busy"),
    ('{"error": {"code": 400}}', None), ('{"error": {"message": ""}}', None), ('{"error": 5}', None),
    ('{"detail": [{"loc": ["body"]}]}', None), ("[1, 2]", None), ("<html>bad gateway</html>", None), ("", None),
])
def test_the_servers_own_words_are_read_from_an_error_body_or_not_at_all(body, words):
    from harness.backends.transport import error_words

    assert error_words(body) == words
