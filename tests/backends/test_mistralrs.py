"""mistral.rs (harness.backends.runtimes.mistral_rs): the worker's mapping of a chat request to its Python API and
of its answers back, checked here with stand-in API objects; where its environment is built (needs_mistralrs),
real requests through the worker, and the runtime-conformance suite on a scripted model it refuses."""

import json
import re
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from harness.backends import runtimes
from harness.backends.chat_answers import chat_answer, chat_stream
from harness.backends.runtimes import mistral_rs
from harness.backends.runtimes import mistralrs_worker as worker
from harness.backends.servers import LocalServer
from harness.backends.transport import request_json
from harness.core import constants
from harness.core.errors import MissingEnvironmentError, ServerReplyError
from tests.cached_models import cached_model

API = NS(ToolChoice=NS(NoTools="NoTools", Auto="Auto"), ChatCompletionRequest=lambda **fields: fields)
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]
USER = [{"role": "user", "content": "Weather in Paris?"}]


def test_a_chat_body_becomes_the_api_fields_and_what_has_no_field_is_dropped():
    body = {"messages": USER, "tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False, "seed": 0,
            "temperature": 0.0, "max_tokens": 9, "model": "m", "chat_template_kwargs": {"enable_thinking": False}}
    fields, stream = worker.chat_request(API, body)
    assert stream is False and fields == {
        "messages": USER, "model": "default", "stream": False, "tool_schemas": [json.dumps(TOOLS[0])],
        "tool_choice": "Auto", "enable_thinking": False, "max_tokens": 9, "temperature": 0.0}
    named = {"type": "function", "function": {"name": "get_weather"}}
    choices = {c: worker.chat_request(API, {"messages": USER, "tool_choice": c})[0]["tool_choice"]
               for c in ("none", "auto", "required")}
    assert choices == {"none": "NoTools", "auto": "Auto", "required": "Auto"}
    assert worker.chat_request(API, {"messages": USER, "tool_choice": named})[0]["tool_choice"] == "Auto"
    assert worker.chat_request(API, {"messages": USER, "stream": True})[1] is True
    with pytest.raises(worker.BadRequest, match="no messages list"):
        worker.chat_request(API, {"prompt": "hi"})


def test_the_api_answer_is_written_back_field_by_field():
    call = NS(index=0, id="call-1", function=NS(name="get_weather", arguments='{"location":"Paris"}'))
    usage = NS(prompt_tokens=30, completion_tokens=5, total_tokens=35)
    answer = NS(id="1", created=7, system_fingerprint="local", usage=usage, choices=[NS(
        index=0, finish_reason="tool_calls",
        message=NS(role="assistant", content=None, tool_calls=[call], reasoning_content=None))])
    assert worker.answer_json(answer, "m") == {
        "id": "1", "object": "chat.completion", "created": 7, "model": "m", "system_fingerprint": "local",
        "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "call-1", "type": "function",
                                                                  "function": {"name": "get_weather",
                                                                               "arguments": '{"location":"Paris"}'}}]}}]}
    chunk = NS(id="2", created=8, system_fingerprint="local", usage=None, choices=[NS(
        index=0, finish_reason=None, delta=NS(role="assistant", content="Hel", tool_calls=None,
                                              reasoning_content="think"))])
    assert worker.chunk_json(chunk, "m")["choices"] == [
        {"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": "Hel",
                                                      "reasoning_content": "think"}}]


def test_the_runtime_declares_what_it_ignores_and_names_the_command_that_builds_its_environment(tmp_path,
                                                                                                monkeypatch):
    runtime = runtimes.get("mistralrs")
    assert runtime.startable and not runtime.shows_sampled_ids and not runtime.hosts_several_models
    assert {"tool_choice", "parallel_tool_calls", "seed"} <= set(runtime.ignores)
    assert runtime.identifies({"data": [{"id": "m", "owned_by": f"mistralrs-{mistral_rs.VERSION}"}]})
    assert not runtime.identifies({"data": [{"id": "m", "owned_by": "llamacpp"}]})
    monkeypatch.setattr(mistral_rs, "MISTRALRS_VENV", tmp_path / "absent")
    with pytest.raises(MissingEnvironmentError, match=re.escape("bash scripts/setup_mistralrs.sh")):
        runtime.check_startable()
    command = LocalServer("mistralrs", tmp_path / "m.gguf", port=8123, threads=2).command()
    assert command[:2] == [str(tmp_path / "absent" / "bin" / "python"), str(mistral_rs.WORKER)]
    assert command[command.index("--port") + 1] == "8123" and command[command.index("--threads") + 1] == "2"


def test_the_runtime_table_says_what_its_process_is_started_with_and_a_server_the_user_started_not():
    from types import SimpleNamespace as NS

    from harness.suites.runtime_conformance.page import runtime_table

    started = NS(runtime="mistralrs-0.9.5", server="mistralrs", build={"version": "0.9.5"})
    served = NS(runtime="mistralrs-0.9.5", server="endpoint", build={"version": "0.9.5"})
    rows = runtime_table([started, served])
    assert rows[0].endswith("| request fields it ignores | set in its environment |")
    assert len({row.count("|") for row in rows}) == 1
    mine = next(row for row in rows if "| mistralrs |" in row)
    assert mine.endswith("| started with `MISTRALRS_CPU_KV_F32=1` (its KV cache kept in f32, where a default install "
                         "on CPU keeps f16; the scripted models need f32 to read their positions) |")
    assert next(row for row in rows if "| endpoint |" in row).endswith("| nothing |")


def test_the_setup_script_pins_the_wheel_by_version_and_hash():
    script = (constants.ROOT / "scripts" / "setup_mistralrs.sh").read_text(encoding="utf-8")
    assert re.search(rf"mistralrs=={re.escape(mistral_rs.VERSION)} --hash=sha256:[0-9a-f]{{64}}", script)
    assert "--require-hashes" in script and 'VENV=$("$PY" -m harness.core.environments venv mistralrs)' in script


@pytest.mark.needs_mistralrs
def test_the_suite_gives_mistralrs_rotary_scripted_models_and_records_what_it_does_with_the_reply(tmp_path):
    """mistral.rs loads no GPT-2 GGUF; its runtime declares the rotary architecture, so the suite's models load and
    write the scripted reply (tool_choice none: the reply is prose the runtime passes through)."""
    from harness.suites.runtime_conformance.corpus import build_corpus
    from harness.suites.runtime_conformance.driver import run_suite
    from harness.pins.sources import load_sources, resolve_template

    ref = resolve_template("Qwen-Qwen2.5-7B-Instruct", load_sources())
    records, skipped = run_suite("mistralrs", "mistralrs-test", [(ref, build_corpus(ref))], tmp_path / "r.jsonl",
                                 tmp_path / "work", set(), cases=["one-call", "prose-braces"], variants=["none", "auto"],
                                 log=lambda r: None)
    by = {(r.case["name"], r.variant): r for r in records}
    assert skipped == [] and set(by) == {("one-call", "none"), ("one-call", "auto"), ("prose-braces", "auto")}
    for name in (("one-call", "none"), ("prose-braces", "auto")):
        r = by[name]
        assert r.labels == ["agree"] and r.model.endswith(".gguf") and "-llama-" in r.model, name
        assert r.plain["completion_tokens"] == r.reply_tokens and r.key["tokens"] == r.plain["prompt_tokens"]
    # Its two workers split the three requests, each in a folder of its own (its servers' logs there; its models
    # deleted after it, never under the other worker's server).
    folders = sorted(p.name for p in (tmp_path / "work").iterdir())
    assert folders == ["worker-0", "worker-1"], folders
    assert all(list((tmp_path / "work" / f).glob("*.log")) for f in folders)


def test_logprobs_asked_are_written_back_with_each_tokens_bytes():
    body = {"messages": USER, "logprobs": True}
    assert worker.chat_request(API, body)[0]["logprobs"] is True
    assert "logprobs" not in worker.chat_request(API, {"messages": USER, "logprobs": 1})[0]
    entries = [NS(token="Z", logprob=-0.5, bytes=b"Z"), NS(token="\u00fc", logprob=-1.0, bytes="ü".encode())]
    answer = NS(id="1", created=7, system_fingerprint="local", usage=None, choices=[NS(
        index=0, finish_reason="stop", logprobs=NS(content=entries),
        message=NS(role="assistant", content="Zü", tool_calls=None, reasoning_content=None))])
    assert worker.answer_json(answer, "m")["choices"][0]["logprobs"] == {"content": [
        {"token": "Z", "logprob": -0.5, "bytes": [90], "top_logprobs": []},
        {"token": "ü", "logprob": -1.0, "bytes": [195, 188], "top_logprobs": []}]}


@pytest.fixture(scope="module")
def smol():
    path = cached_model("smollm2-135m-instruct-q4_1")
    with LocalServer("mistralrs", path, alias="smol", ready_timeout=300) as server:
        yield server


@pytest.mark.needs_mistralrs
def test_real_requests_are_answered_alike_streamed_or_not_with_its_own_prompt_length(smol):
    url = smol.base_url + "/v1/chat/completions"
    body = {"model": "smol", "messages": USER, "tools": TOOLS, "tool_choice": "none", "max_tokens": 6,
            "temperature": 0.0, "seed": 0}
    plain, stream = chat_answer(url, body, 300), chat_stream(url, body, 300)
    # The process computes as its runtime declares (process_env), not as the worker's own defaults would.
    assert b"MISTRALRS_CPU_KV_F32=1" in Path(f"/proc/{smol.pid}/environ").read_bytes().split(b"\0")
    assert plain["status"] == 200 and plain["finish_reason"] == "length" and plain["completion_tokens"] == 6
    assert plain["content"] and stream["content"] == plain["content"] and stream["tool_calls"] == []
    assert stream["chunks"] >= 1 and "cut_short" not in stream
    key = runtimes.get("mistralrs").prompt_key(smol.base_url, "smol", body)
    assert key.error is None and key.tokens == plain["prompt_tokens"] > 0
    assert runtimes.get("mistralrs").identifies(request_json(smol.base_url + "/v1/models", None, 10))


@pytest.mark.needs_mistralrs
def test_a_history_with_a_call_is_taken_and_a_bad_request_or_a_dead_worker_is_an_error_with_words(smol):
    url = smol.base_url + "/v1/chat/completions"
    history = USER + [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"location": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    answer = chat_answer(url, {"messages": history, "tools": TOOLS, "max_tokens": 2, "temperature": 0.0}, 300)
    assert answer["status"] == 200 and answer["completion_tokens"] == 2
    with pytest.raises(ServerReplyError, match="HTTP 400.*no messages list"):
        request_json(url, {"prompt": "hi"}, 30)
    smol.kill()
    assert chat_answer(url, {"messages": USER, "max_tokens": 1}, 30)["error"]
    smol.start()
    assert chat_answer(url, {"messages": USER, "max_tokens": 1, "temperature": 0.0}, 300)["status"] == 200


@pytest.mark.needs_mistralrs
def test_a_real_hermes_call_is_read_by_mistralrs_alike_streamed_or_not():
    # Qwen2.5-Coder 0.5B writes a bare JSON object for this request (no <tool_call> tags: the test below reads
    # the text); mistral.rs' parser, not ours, reads it as a call. About a minute a request on one shared core.
    path = cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m")
    body = {"model": "q", "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
            "tools": TOOLS, "tool_choice": "auto", "max_tokens": 30, "temperature": 0.0}
    with LocalServer("mistralrs", path, alias="q", ready_timeout=300) as server:
        url = server.base_url + "/v1/chat/completions"
        plain, stream = chat_answer(url, body, 600), chat_stream(url, body, 600)
    assert plain["finish_reason"] == stream["finish_reason"] == "tool_calls", (plain, stream)
    assert [c["name"] for c in plain["tool_calls"]] == ["get_weather"] and not plain["content"]
    assert json.loads(plain["tool_calls"][0]["arguments"]) == {"location": "Paris"}
    assert stream["tool_calls"] == plain["tool_calls"] and not stream["content"] and "cut_short" not in stream
    assert len(plain["call_ids"]) == 1 and plain["call_ids"][0]


@pytest.mark.needs_mistralrs
def test_what_mistralrs_generated_is_its_logprobs_bytes_joined_so_its_forgiven_bare_json_is_seen():
    # The deployment suite's non-streamed request with the runtime's generated_fields (logprobs): the tokens'
    # bytes joined are the text its parser read. Here a bare JSON object, which mistral.rs returns as a call and
    # the strict hermes parser names as a near miss (the deployment label runtime-forgave:bare-json).
    from harness.families import get as family
    from harness.suites.deployment import driver

    path = cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m")
    body = {"model": "q", "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
            "tools": TOOLS, "tool_choice": "auto", "max_tokens": 30, "temperature": 0.0,
            **runtimes.get("mistralrs").generated_fields}
    with LocalServer("mistralrs", path, alias="q", ready_timeout=300) as server:
        target = driver.Target("mistralrs-x", "mistralrs", base_url=server.base_url, served="q", kind="mistralrs")
        answer = driver._ask(target, chat_answer, server.base_url + "/v1/chat/completions", body)
    assert [c["name"] for c in answer["tool_calls"]] == ["get_weather"], answer
    assert "logprob_bytes" not in answer and answer["finish_reason"] == "tool_calls"
    assert json.loads(answer["generated"]) == {"name": "get_weather", "arguments": {"location": "Paris"}}
    parsed = family("hermes").parse(answer["generated"])
    assert not parsed.accepted and parsed.deviation == "bare-json"
