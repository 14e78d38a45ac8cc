"""The deployment driver against real HTTP servers: a started server that misses a deadline is asked again
when it kept computing (slow) and restarted when it did not (hung); an endpoint is asked requests in flight,
each recorded once."""

import json

from harness.storage.results import ResultsDir
from harness.suites.deployment import cases

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"


def test_a_started_server_that_misses_the_deadline_is_asked_once_more_with_more_time(monkeypatch):
    """A loaded machine makes a healthy runtime miss a request's deadline: the request is asked again with
    SLOW_RETRY times the time (a real HTTP server answering the second time); one that misses both is recorded
    with both failures in its words."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from harness.backends.chat_answers import chat_answer
    from harness.suites.deployment import driver

    asked, delays = [], []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            asked.append(time.monotonic())
            time.sleep(delays[len(asked) - 1])
            body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"},
                                            "finish_reason": "stop"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Process:                      # the started server's process: alive throughout
        running = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1/chat/completions"
    target = driver.Target("llama-server-x", "llama-server", local=Process())
    monkeypatch.setattr(driver, "TIMEOUT", 1.0)
    try:
        delays[:] = [2.0, 0.0]          # late once (1 s deadline), then in time (3 s to answer at once)
        answer = driver._ask(target, chat_answer, url, {"messages": []})
        assert answer["content"] == "hi" and "no complete answer within 1 s" in answer["asked_again"]
        asked.clear()
        delays[:] = [2.0, 4.0]          # late twice (the second deadline is 3 s): a finding, both failures said
        answer = driver._ask(target, chat_answer, url, {"messages": []})
        assert answer["error"].count("no complete answer within") == 2 and "within 3 s" in answer["error"]
        # An --endpoint's request is not asked again here: the next run asks it (driver.unanswered).
        asked.clear()
        delays[:] = [2.0, 0.0]
        answer = driver._ask(driver.Target("mine", "endpoint"), chat_answer, url, {"messages": []})
        assert answer["expired"] and len(asked) == 1
    finally:
        httpd.shutdown()


# A real server process for the hang test: its first request either computes (a busy loop, past the deadline)
# or waits without computing (a sleep), and every later request is answered at once.
_SERVER = """
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
seen = []
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        seen.append(1)
        if len(seen) == 1:
            ends = time.monotonic() + 60
            if sys.argv[1] == "busy":
                while time.monotonic() < ends and len(seen) == 1:
                    pass
            else:
                time.sleep(60)
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"},
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(httpd.server_address[1], flush=True)
httpd.serve_forever()
"""


def test_a_started_server_that_computes_nothing_on_a_late_request_is_hung_not_slow(monkeypatch):
    """A request that misses its deadline is asked again only when the server kept computing on it (its CPU time,
    from /proc, grew): a real server process busy past the deadline is slow and answers the second time; one
    that sleeps on the request is recorded as hung at once, with the CPU it used, and started again so the next
    request does not wait on it."""
    import subprocess
    import sys

    from harness.backends.chat_answers import chat_answer
    from harness.backends.progress import cpu_seconds
    from harness.suites.deployment import driver

    class Started:                      # the harness's view of a server it started: a real process
        def __init__(self, how):
            self.how, self.starts = how, 0

        def start(self):
            self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, self.how], stdout=subprocess.PIPE,
                                         text=True)
            self.base_url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"
            self.starts += 1
            return self

        running = property(lambda self: self.proc.poll() is None)
        cpu_seconds = lambda self: cpu_seconds(self.proc.pid) if self.running else None  # noqa: E731
        exit_status = lambda self: f"exit code {self.proc.poll()}"  # noqa: E731

        def stop(self):
            self.proc.kill()
            self.proc.wait()

    monkeypatch.setattr(driver, "TIMEOUT", 2.0)
    monkeypatch.setattr(driver, "HUNG_CPU_SHARE", 0.1)     # 0.2 s of CPU in the 2 s: a sleep uses ~0.01 s
    servers = []
    try:
        for how in ("busy", "asleep"):
            server = Started(how).start()
            servers.append(server)
            target = driver.Target("llama-server-x", "llama-server", local=server)
            answer = driver._ask(target, chat_answer, server.base_url + "/v1/chat/completions", {"messages": []})
            if how == "busy":
                assert answer["content"] == "hi" and "slow, not hung" in answer["asked_again"]
                assert not answer.get("hung") and server.starts == 1
            else:
                assert answer["hung"] and "hung, not slow, so it was not asked again" in answer["error"]
                assert "it was stopped and was started again" in answer["error"] and server.starts == 2
                assert server.running
    finally:
        for server in servers:
            server.stop()


def test_an_endpoint_is_asked_requests_in_flight_and_every_record_lands_once(tmp_path, capsys):
    """--in-flight N against an --endpoint: N requests open at once at the server (a real HTTP server counts
    them), every request recorded once whatever order they land in, and a second run finds them all recorded."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from harness.cli import main
    from harness.suites.deployment import driver

    drawn = cases.cases(1)
    only = {next(c.id for c in drawn if c.category == "simple_python"),
            next(c.id for c in drawn if c.category == "multiple"),
            next(c.id for c in drawn if c.category == "irrelevance")}       # 5 requests: 2 x (auto, required), 1
    lock, enough = threading.Lock(), threading.Event()
    seen = {"open": 0, "peak": 0}

    class Cluster(BaseHTTPRequestHandler):
        def _send(self, status, body: bytes, kind="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen["open"] += 1
                seen["peak"] = max(seen["peak"], seen["open"])
                if seen["open"] >= 3:
                    enough.set()
            enough.wait(30)                     # held open until three are in flight together
            with lock:
                seen["open"] -= 1
            if request.get("stream"):
                events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "No tool fits."}}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
                body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                self._send(200, body.encode(), "text/event-stream")
            else:
                self._send(200, json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "No tool fits."}}]}).encode())

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Cluster)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    results = ResultsDir(tmp_path / "results")
    try:
        out = driver.run(MODEL, results, endpoint=url, name="cluster-1", per_category=1, log=lambda r: None,
                         only=only, inflight=3)
        assert seen["peak"] == 3 and not out.failed and out.already == 0
        lines = driver.records_path(results, MODEL).read_text(encoding="utf-8").splitlines()
        keys = [(r["case"]["id"], r["tool_choice"]) for r in map(json.loads, lines)]
        assert len(keys) == len(set(keys)) == len(out.written) == 5 and {k[0] for k in keys} == only
        again = driver.run(MODEL, results, endpoint=url, name="cluster-1", per_category=1, log=lambda r: None,
                           only=only, inflight=3)
        assert again.written == [] and again.already == 5
        # Only an endpoint takes requests in flight: a started runtime here serves one request at a time.
        assert main(["deployment", "--model", MODEL, "--server", "llama-server", "--in-flight", "2"]) != 0
        assert "--in-flight: with --endpoint only" in capsys.readouterr().err
    finally:
        httpd.shutdown()


def test_again_asks_the_requests_whose_latest_record_carries_a_label_and_says_what_changed(tmp_path, capsys):
    """--again LABEL: the requests whose latest record carries the label are asked again and the new record
    appended after the old one (which stays: the page reads the latest record of a question); each new record
    says whether the runtime answered as before, and the command counts them. A real HTTP server answers."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from harness.cli import main
    from harness.suites.deployment import driver, page

    drawn = cases.cases(1)
    only = {next(c.id for c in drawn if c.category == "irrelevance")}        # one request: auto
    said = {"text": "No tool fits.", "asked": 0}

    class Endpoint(BaseHTTPRequestHandler):
        def _send(self, body: bytes, kind="application/json"):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode())

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            said["asked"] += 1
            if request.get("stream"):
                events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": said["text"]}}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
                self._send(("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode(),
                           "text/event-stream")
            else:
                self._send(json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": said["text"]}}]}).encode())

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    results = tmp_path / "results"
    command = ["deployment", "--model", MODEL, "--endpoint", f"http://127.0.0.1:{httpd.server_address[1]}",
               "--name", "mine-1", "--cases", "1", "--case", *only, "--results-dir", str(results)]
    path = driver.records_path(ResultsDir(results), MODEL)
    try:
        assert main(command) == 0
        first = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(first) == 1 and "generated-not-shown" in first[0]["labels"] and said["asked"] == 2
        capsys.readouterr()
        # A label no record carries asks nothing; one the record carries asks it again, answered as before.
        assert main(command + ["--again", "runtime-forgave"]) == 0 and said["asked"] == 2
        assert main(command + ["--again", "generated-not-shown"]) == 0 and said["asked"] == 4
        assert "asked again (generated-not-shown): 1 answered as before, 0 not" in capsys.readouterr().out
        said["text"] = "Nothing here fits."
        assert main(command + ["--again", "generated-not-shown"]) == 0
        out = capsys.readouterr().out
        assert "0 answered as before, 1 not" in out and only.pop() in out
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == 3 and lines[0] == first[0]            # nothing recorded is lost
        assert lines[1]["again"] == {"after": first[0]["recorded"], "changed": []} and "again" not in lines[0]
        assert lines[2]["again"]["changed"] == ["plain content", "stream content"]
        assert lines[1]["details"][-1].startswith("asked again after the record of")
        assert lines[1]["details"][-1].endswith("answered as before")
        assert "plain content, stream content not as before" in lines[2]["details"][-1]
        # The page reads the latest record of the question.
        latest = page.read_records(ResultsDir(results), [])
        assert [r.plain["content"] for r in latest] == ["Nothing here fits."]
        assert main(command + ["--again", "generated-not-shown", "--replay"]) != 0
        # stale: a record made now is not; one whose switches are not what a record made now holds (asked under
        # another bound, or without a fresh prompt state) is asked again.
        asked = said["asked"]
        assert main(command + ["--again", "stale"]) == 0 and said["asked"] == asked
        older = dict(lines[2], request={**lines[2]["request"], "max_tokens": 999})
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(older) + "\n")
        assert main(command + ["--again", "runtime-forgave", "--again", "stale"]) == 0 and said["asked"] == asked + 2
        assert json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["request"] == lines[2]["request"]
    finally:
        httpd.shutdown()
