"""Real local servers (harness.backends.servers): started on 127.0.0.1, health-checked, answering the OpenAI API, stopped
on leaving the block, killed and started again. Real processes on real models; nothing is mocked."""

import json
import os
import urllib.error
import urllib.request

import pytest

from harness.scripted import Script, build_standin, vocab_for
from harness.backends.servers import LocalServer, ModelHost
from harness.core.errors import ServerStartError

from cached_models import cached_model

pytestmark = pytest.mark.live

SMOLLM2 = "smollm2-135m-instruct-q4_1"
QWEN_CODER = "qwen2.5-coder-0.5b-instruct-q4_k_m"
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _request(server, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.base_url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_llama_cpp_python_server_lists_the_model_and_completes(tmp_path):
    path = cached_model(SMOLLM2)
    with LocalServer("llama-cpp-python", path, log_path=tmp_path / "server.log") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        models = _request(server, "/v1/models")
        assert [m["id"] for m in models["data"]] == [server.model]
        prompt = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
        reply = _request(server, "/v1/completions", {"model": server.model, "prompt": prompt, "max_tokens": 8,
                                                     "temperature": 0, "seed": 0})
        choice = reply["choices"][0]
        assert isinstance(choice["text"], str) and choice["text"].strip()
        assert 1 <= reply["usage"]["completion_tokens"] <= 8
        pid = server.pid
    assert not server.running and _gone(pid)
    assert "Uvicorn running on http://127.0.0.1" in server.log_path.read_text()


@pytest.mark.parametrize("kind", ["llama-cpp-python", pytest.param("llama-server", marks=pytest.mark.needs_server)])
def test_a_bad_model_file_fails_before_the_deadline_with_the_log_tail(kind, tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is not a GGUF file\n" * 64)
    server = LocalServer(kind, bad, log_path=tmp_path / "server.log", ready_timeout=600)
    with pytest.raises(ServerStartError) as caught:
        server.start()
    message = str(caught.value)
    # "exited", not "was not ready after 600 s": the death is noticed, the deadline is not waited out.
    assert f"{kind} exited with" in message and "before it was ready" in message
    assert f"last lines of {server.log_path}" in message
    assert "not-a-model.gguf" in message.split("last lines of", 1)[1]    # quoted from the server's own log
    assert not server.running


def test_a_killed_server_starts_again_on_the_same_port(tmp_path):
    path = cached_model(SMOLLM2)
    with LocalServer("llama-cpp-python", path, log_path=tmp_path / "server.log") as server:
        port, first_pid = server.port, server.pid
        server.kill()
        assert not server.running and _gone(first_pid)
        with pytest.raises(urllib.error.URLError):
            _request(server, "/v1/models")
        server.start()
        assert server.port == port and server.pid != first_pid
        assert [m["id"] for m in _request(server, "/v1/models")["data"]] == [server.model]
    assert not server.running


@pytest.mark.needs_server
def test_llama_server_answers_a_chat_with_a_tool_through_its_parser(tmp_path):
    path = cached_model(QWEN_CODER)
    with LocalServer("llama-server", path, parallel=2, log_path=tmp_path / "server.log") as server:
        props = _request(server, "/props")
        # --parallel 2 gives two slots, each with the whole n_ctx (the KV cache is sized for both).
        assert props["total_slots"] == 2
        assert props["default_generation_settings"]["n_ctx"] == 4096
        # qwen2.5-coder answers a tool question with bare JSON, never its template's <tool_call>, and for this
        # template llama-server's "required" grammar is lazy: it waits for "<tool_call>\n" before it
        # constrains anything. A prefilled assistant turn that opens the call sets that trigger off, so what
        # follows is held to the call syntax with the declared tool's schema, whatever the model would choose.
        reply = _request(server, "/v1/chat/completions", {
            "model": server.model, "temperature": 0, "seed": 0, "max_tokens": 48,
            "messages": [{"role": "user", "content": "What is the weather in Paris?"},
                         {"role": "assistant", "content": "<tool_call>\n"}],
            "tools": [WEATHER_TOOL], "tool_choice": "required"})
    # --jinja's parser for the template reads the text back into tool_calls; the grammar may let the model
    # go on with more calls until max_tokens, so only the first one is checked whole.
    calls = reply["choices"][0]["message"]["tool_calls"]
    assert {c["function"]["name"] for c in calls} == {"get_weather"}
    arguments = json.loads(calls[0]["function"]["arguments"])
    assert list(arguments) == ["city"] and isinstance(arguments["city"], str)


def _scripted(tmp_path, name, reply):
    """A scripted GGUF that writes `reply` after a prompt ending in "Hello"."""
    vocab = vocab_for("gpt2")
    path = tmp_path / f"{name}.gguf"
    build_standin(path, "gpt2", [Script("Hello", tuple(vocab.segment(reply)))], vocab=vocab, quantized=True)
    return path


def _complete(server, model):
    body = {"model": model, "prompt": "Hello", "max_tokens": 4, "temperature": 0, "seed": 0}
    return _request(server, "/v1/completions", body)["choices"][0]["text"]


def test_llama_cpp_python_serves_several_models_by_name_from_one_process(tmp_path):
    paris, london = _scripted(tmp_path, "paris", " Paris"), _scripted(tmp_path, "london", " London")
    with LocalServer("llama-cpp-python", paris, models={"london": london}, settings={"logits_all": False},
                     log_path=tmp_path / "server.log") as server:
        assert sorted(m["id"] for m in _request(server, "/v1/models")["data"]) == ["london", "paris"]
        pid = server.pid
        # Each request loads the model it names in place of the last one: the scripted reply says which answered.
        assert [_complete(server, name) for name in ("london", "paris", "london")] == [" London", " Paris", " London"]
        assert server.pid == pid
    config = json.loads((tmp_path / "server.log.config.json").read_text())
    assert {m["model_alias"]: (m["logits_all"], m["n_threads"]) for m in config["models"]} == {
        "paris": (False, 1), "london": (False, 1)}


@pytest.mark.parametrize("kind", ["llama-cpp-python", pytest.param("llama-server", marks=pytest.mark.needs_server)])
def test_a_model_host_serves_each_model_and_a_bad_one_fails_alone(kind, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a GGUF file\n" * 64)
    paris, london = _scripted(tmp_path, "paris", " Paris"), _scripted(tmp_path, "london", " London")
    started = []

    def make(path, models):
        started.append(sorted(models) if models else path.stem)
        return LocalServer(kind, path, alias=path.stem, models=models, log_path=tmp_path / f"{len(started)}.log")

    with ModelHost(kind, [paris, london], make) as host:
        answers = [_complete(*host.serve(path)) for path in (paris, london, paris)]
        server = host.server
    assert answers == [" Paris", " London", " Paris"] and not server.running
    # llama-cpp-python's one process holds both models; llama-server starts a process for each model asked for.
    assert started == ([["london", "paris"]] if kind == "llama-cpp-python" else ["paris", "london", "paris"])

    started.clear()
    with ModelHost(kind, [bad, london], make) as host:
        with pytest.raises(ServerStartError, match="bad.gguf"):
            host.serve(bad)
        assert _complete(*host.serve(london)) == " London"
    # The shared process could not load its first model: each model got a process of its own.
    assert started == ([["bad", "london"], "bad", "london"] if kind == "llama-cpp-python" else ["bad", "london"])


def test_llama_cpp_python_shows_what_the_model_wrote_as_its_logprob_tokens(tmp_path):
    # The deployment suite's non-streamed request with the runtime's generated_fields: the tokens' strings joined
    # are the content its handler returned (it reads no call from a GGUF's template), and the stop token is not
    # among them. Without top_logprobs its chat handler would ask the model for no logprobs at all.
    from harness.backends import runtimes
    from harness.backends.chat_answers import chat_answer
    from harness.families import get as family
    from harness.suites.deployment import driver

    body = {"model": "q", "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
            "tools": [WEATHER_TOOL], "tool_choice": "auto", "max_tokens": 30, "temperature": 0.0, "seed": 0,
            **runtimes.get("llama-cpp-python").generated_fields}
    with LocalServer("llama-cpp-python", cached_model(QWEN_CODER), alias="q", log_path=tmp_path / "s.log") as server:
        target = driver.Target("llama-cpp-python-x", "llama-cpp-python", base_url=server.base_url, served="q",
                               kind="llama-cpp-python")
        answer = driver._ask(target, chat_answer, server.base_url + "/v1/chat/completions", body)
    assert not answer["tool_calls"] and answer["content"] and "generated_error" not in answer, answer
    assert answer["generated"] == answer["content"] and "logprob_text" not in answer
    # Qwen2.5-Coder 0.5B writes the bare JSON object, not its template's <tool_call>: the model's format.
    assert json.loads(answer["generated"])["name"] == "get_weather"
    assert family("hermes").parse(answer["generated"]).deviation == "bare-json"


def test_llama_cpp_python_answers_alike_only_from_a_fresh_prompt_state(tmp_path):
    # It evaluates a prompt from the longest prefix it shares with the last one (no request field turns that
    # off), and on SmolLM2 the same greedy request asked twice in a row got two answers. Its fresh_request sent
    # before each (the deployment driver's _ask does) has the non-streamed and the streamed answer alike.
    from harness.backends import runtimes
    from harness.backends.chat_answers import chat_answer, chat_stream
    from harness.suites.deployment import cases, driver

    case = next(c for c in cases.cases(5) if c.id == "irrelevance_93")
    body = {**cases.body(case, "auto"), "model": "m"}
    with LocalServer("llama-cpp-python", cached_model(SMOLLM2), alias="m", log_path=tmp_path / "s.log") as server:
        url = server.base_url + "/v1/chat/completions"
        first, again = (chat_answer(url, body, 600)["content"] for _ in range(2))
        target = driver.Target("llama-cpp-python-x", "llama-cpp-python", base_url=server.base_url, served="m",
                               kind="llama-cpp-python")
        assert runtimes.get("llama-cpp-python").fresh_request is not None
        plain = driver._ask(target, chat_answer, url, body)
        stream = driver._ask(target, chat_stream, url, body)
    assert first != again, "the cache no longer changes its answer: its fresh_request may be dropped"
    assert plain["content"] == stream["content"] == first and "fresh_error" not in plain
