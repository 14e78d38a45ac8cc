"""The OpenAI-compatible backend's transport against a real HTTP server on 127.0.0.1 that answers like an
OpenAI server and misbehaves on purpose: retries with backoff, no retry for a request the server refuses,
replicas used in turn, at most N requests in flight per endpoint, a deadline."""

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler

import pytest

from harness.backends.openai import Endpoint, OpenAIBackend
from harness.core.errors import GenerationError

from hostile_server import ThreadedServer

SAMPLING = {"max_tokens": 8, "temperature": 0.0}


class Scripted(ThreadedServer):
    """Answers /v1/completions; `statuses` is consumed one per request (200 once it is empty)."""

    def __init__(self, statuses=(), delay=0.0):
        super().__init__(Handler)
        self.statuses, self.delay = list(statuses), delay
        self.requests, self.open, self.most_open = [], 0, 0


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/completions":
            # An OpenAI server without llama-server's own /completion: the backend asks once, then uses this.
            self.send_error(404)
            return
        with server.lock:
            server.requests.append(body)
            server.open += 1
            server.most_open = max(server.most_open, server.open)
            status = server.statuses.pop(0) if server.statuses else 200
        time.sleep(server.delay)
        answer = {"choices": [{"text": "hi", "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 1}} if status == 200 else {"error": f"status {status}"}
        data = json.dumps(answer).encode()
        with server.lock:
            server.open -= 1
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def backend(*servers, **kwargs):
    return OpenAIBackend([Endpoint(s if isinstance(s, str) else s.url, "m") for s in servers],
                         backoff=0.01, **kwargs)


def test_a_busy_server_is_retried_with_backoff():
    with Scripted(statuses=[503, 429]) as server:
        generation = backend(server).complete("p", SAMPLING, seed=7)
    assert (generation.text, generation.prompt_tokens, generation.finish_reason) == ("hi", 3, "stop")
    assert len(server.requests) == 3 and server.requests[0]["seed"] == 7 and server.requests[0]["model"] == "m"


def test_a_request_the_server_refuses_is_not_retried():
    with Scripted(statuses=[400]) as server:
        with pytest.raises(GenerationError, match="HTTP 400: .*status 400"):
            backend(server).complete("p", SAMPLING, seed=0)
    assert len(server.requests) == 1


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_replicas_are_used_in_turn_and_a_dead_one_is_passed_over():
    with Scripted() as a, Scripted() as b:
        two = backend(a, b)
        for _ in range(4):
            two.complete("p", SAMPLING, seed=0)
        assert (len(a.requests), len(b.requests)) == (2, 2)
        with_dead = backend(_closed_port(), a)
        assert with_dead.complete("p", SAMPLING, seed=0).text == "hi"


def test_at_most_n_requests_are_in_flight_per_endpoint():
    with Scripted(delay=0.2) as server:
        limited = backend(server, in_flight=2)
        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(lambda _: limited.complete("p", SAMPLING, seed=0), range(6)))
    assert len(server.requests) == 6 and server.most_open == 2


def test_a_server_that_never_answers_meets_the_deadline():
    with Scripted(delay=30) as server:
        done = []
        worker = threading.Thread(target=lambda: done.append(_failure(backend(server, timeout=0.5, retries=0))),
                                  daemon=True)
        worker.start()
        worker.join(timeout=10)
    assert done and "no answer" in done[0]


def _failure(b) -> str:
    try:
        b.complete("p", SAMPLING, seed=0)
    except GenerationError as exc:
        return str(exc)
    return ""


def test_grammar_is_refused_not_ignored():
    with Scripted() as server, pytest.raises(GenerationError, match="native mode only"):
        backend(server).complete("p", SAMPLING, seed=0, grammar="root ::= \"x\"")


class NativeOnly(OpenAIBackend):
    """harness/backends/README.md's example: llama-server's /completion only, never /v1/completions."""
    name = "llamacpp-native"
    completion_fallback = False


def test_a_backend_without_the_completion_fallback_fails_where_the_server_has_no_completion():
    with Scripted() as server:
        native_only = NativeOnly([Endpoint(server.url, "m")], backoff=0.01)
        with pytest.raises(GenerationError, match="llamacpp-native backend reads llama-server's /completion only"):
            native_only.complete("p", SAMPLING, seed=0)
        assert server.requests == []        # /v1/completions was never asked
        assert backend(server).complete("p", SAMPLING, seed=0).text == "hi"
