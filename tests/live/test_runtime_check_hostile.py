"""`harness runtime-check` against real HTTP servers on 127.0.0.1 that answer badly: a runtime's call of the wrong
shape is labelled as what it is, and a pair whose request failed is not recorded (the run exits 1 and the next
run asks it again) instead of ending the run with a traceback."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import HostileServer, raw_json, redirect, whole  # noqa: E402

TEMPLATE = "gguf-qwen2.5-coder-0.5b-instruct-q4_k_m"      # hermes: <tool_call> JSON </tool_call>
STRICT_CALL = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'


def server_answering(chat_status: int, chat_body, gate=None):
    """chat_body: the chat answer's JSON, or a whole answer of the hostile server's; gate: an Event each chat
    request waits for."""
    def answer(h):
        if h.path == "/v1/completions":
            return raw_json(json.dumps({"choices": [{"text": STRICT_CALL, "finish_reason": "stop"}]}))(h)
        if h.path == "/v1/chat/completions":
            if gate is not None:
                gate.wait()
            if callable(chat_body):
                return chat_body(h)
            return raw_json(json.dumps(chat_body), status=chat_status)(h)
        return raw_json("{}", status=404)(h)     # no /completion, /tokenize or /apply-template: a plain server
    return HostileServer(answer)


def command(server, results):
    return [sys.executable, "-m", "harness", "runtime-check", "--endpoint", server.url, "--served-model", "m",
            "--template", TEMPLATE, "--runtime", "hostile", "--scenario", "get-time", "--results-dir", str(results),
            "--retries", "0", "--timeout", "60"]


def check(server, results):
    return subprocess.run(command(server, results), capture_output=True, text=True)


def records(results):
    path = results / "runtimes" / "hostile.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_a_call_with_an_int_name_and_object_arguments_is_labelled_malformed(tmp_path):
    call = {"function": {"name": 42, "arguments": {}}}
    with server_answering(200, {"choices": [{"message": {"tool_calls": [call]}}]}) as server:
        done = check(server, tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = records(tmp_path)
    assert record["strict"]["parse"]["calls"] == [{"name": "get_time", "arguments": {}}]
    assert record["label"] == "runtime-malformed-reply"
    assert "function.name is int 42, not a string" in record["detail"]
    assert "function.arguments is dict {}, not the JSON string the API specifies" in record["detail"]


def test_a_failed_pair_is_not_recorded_and_is_asked_again(tmp_path):
    with server_answering(503, {"error": "busy"}) as server:
        failed = check(server, tmp_path)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "1 failed (not recorded" in failed.stdout and "HTTP 503" in failed.stderr
    assert records(tmp_path) == []
    answer = {"choices": [{"message": {"tool_calls": [{"function": {"name": "get_time", "arguments": "{}"}}]}}]}
    with server_answering(200, answer) as server:
        done = check(server, tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["label"] for r in records(tmp_path)] == ["agree"]


WHOLE = {
    "HTTP 500 every time": raw_json('{"error": "peg-native format"}', status=500, plain=False),
    "HTTP 400 refusal": raw_json('{"error": "tools are not supported"}', status=400, plain=False),
    "200 with HTML": whole(b"<html><body>Welcome</body></html>"),
    "an empty body": whole(b""),
    "bad UTF-8": whole(b'{"choices": "\xff"}', content_type="application/json"),
}


@pytest.mark.parametrize("answer", WHOLE.values(), ids=WHOLE.keys())
def test_a_chat_answer_that_arrived_whole_is_recorded_as_runtime_error(tmp_path, answer):
    with server_answering(200, answer) as server:
        done = check(server, tmp_path)
        again = check(server, tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    (record,) = records(tmp_path)
    assert record["label"] == "runtime-error" and record["runtime_reply"]["status"] in (200, 400, 500)
    assert record["strict"]["parse"]["calls"] == [{"name": "get_time", "arguments": {}}]
    assert again.returncode == 0 and "0 pair(s) checked" in again.stdout and len(records(tmp_path)) == 1


def test_a_redirect_of_the_chat_endpoint_stops_the_run_unrecorded(tmp_path):
    with server_answering(200, redirect("http://127.0.0.1:9", 301)) as server:
        done = check(server, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "HTTP 301 redirect to http://127.0.0.1:9" in done.stderr and "give --endpoint the URL" in done.stderr
    assert records(tmp_path) == []


def test_two_runs_on_one_records_file_never_record_a_pair_twice(tmp_path):
    answer = {"choices": [{"message": {"tool_calls": [{"function": {"name": "get_time", "arguments": "{}"}}]}}]}
    gate = threading.Event()
    with server_answering(200, answer, gate) as server:
        first = subprocess.Popen(command(server, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while ("POST", "/v1/chat/completions") not in server.paths and first.poll() is None:
            time.sleep(0.02)
        try:
            # A guard against a regression hanging the suite: minutes, far from anything measured.
            second = subprocess.run(command(server, tmp_path), capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            second = None
        gate.set()
        out, err = first.communicate()
        third = check(server, tmp_path)
    assert first.returncode == 0, out + err
    assert second is not None, "the second run waited for the first instead of stopping"
    assert second.returncode == 2 and "is being written by process" in second.stderr, second.stderr
    assert third.returncode == 0 and "0 pair(s) checked" in third.stdout, third.stdout
    assert [r["label"] for r in records(tmp_path)] == ["agree"]
