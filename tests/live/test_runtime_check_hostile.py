"""`harness runtime-check` against real HTTP servers on 127.0.0.1 that answer badly: a runtime's call of the wrong
shape is labelled as what it is, and a pair whose request failed is not recorded (the run exits 1 and the next
run asks it again) instead of ending the run with a traceback."""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import HostileServer, raw_json  # noqa: E402

TEMPLATE = "gguf-qwen2.5-coder-0.5b-instruct-q4_k_m"      # hermes: <tool_call> JSON </tool_call>
STRICT_CALL = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'


def server_answering(chat_status: int, chat_body: dict):
    def answer(h):
        if h.path == "/v1/completions":
            return raw_json(json.dumps({"choices": [{"text": STRICT_CALL, "finish_reason": "stop"}]}))(h)
        if h.path == "/v1/chat/completions":
            return raw_json(json.dumps(chat_body), status=chat_status)(h)
        return raw_json("{}", status=404)(h)     # no /completion, /tokenize or /apply-template: a plain server
    return HostileServer(answer)


def check(server, results):
    return subprocess.run([sys.executable, "-m", "harness", "runtime-check", "--endpoint", server.url,
                           "--served-model", "m", "--template", TEMPLATE, "--runtime", "hostile", "--scenario",
                           "get-time", "--results-dir", str(results), "--retries", "0", "--timeout", "60"],
                          capture_output=True, text=True)


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
