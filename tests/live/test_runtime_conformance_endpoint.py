"""`harness runtime-conformance --endpoint` against real HTTP servers on 127.0.0.1 that fail: a request the runtime
did not answer (HTTP 502 or 503, a connection dropped mid-request as by a server killed under it, a drip-fed
answer cut by the deadline) is not recorded, the run exits 1 saying how many are left, and a healthy rerun asks
exactly those; an answer that arrived whole (an HTTP 500, HTML, an empty body) is recorded, a redirect stops the
run, and a second run on the same records file stops at once. The manifest is the one `harness scripted-model --key-from render` writes for the template (its
requests, replies and token counts from the real corpus and vocabulary), without building the GGUFs: the
servers here play the runtime and answer each request as the strict parse reads its reply."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import HostileServer, drip, raw_json, redirect, whole  # noqa: E402

from harness.suites.runtime_conformance import read_records  # noqa: E402

TEMPLATE = "gguf-qwen2.5-coder-0.5b-instruct-q4_k_m"      # hermes: <tool_call> JSON </tool_call>
CASES = ("one-call", "two-calls", "zero-arguments", "prose-braces")
SERVED = "scripted-hermes"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """The manifest's requests for CASES, every variant, as `harness scripted-model` lists them."""
    from harness.suites.runtime_conformance.corpus import build_corpus
    from harness.core.hashing import sha256_text
    from harness.suites.runtime_conformance.driver import TemplateRun, requests_for
    from harness.pins.sources import resolve_template
    from harness.scripted.keying import render_key
    from harness.scripted.plan import reply_ids

    ref = resolve_template(TEMPLATE)
    corpus = build_corpus(ref)
    planner = TemplateRun("llama-server", "llama-server", ref, corpus, tmp_path_factory.mktemp("work"), writer=None,
                          log=None)
    entries = []
    for r in requests_for(corpus, CASES):
        prompt = planner.renderer.prompt(r.case.messages, r.case.tools or None, r.case.template_kwargs)
        ids = reply_ids(planner.vocab, r.case.reply)
        entries.append({"case": r.case.name, "variant": r.variant, "request": r.body, "reply": r.case.reply,
                        "prompt_tokens": render_key(planner.vocab, prompt).tokens, "key_source": "render",
                        "reply_tokens": len(ids), "reply_ids": list(ids), "expect": r.case.expect})
    data = {"template": {"id": ref.id, "sha256": sha256_text(ref.text)}, "family": corpus.family,
            "vocabulary": planner.profile, "key_from": "render",
            "models": [{"file": f"{SERVED}.gguf", "served_name": SERVED, "requests": entries}], "refused": [],
            "skipped_cases": []}
    path = tmp_path_factory.mktemp("manifest") / f"{TEMPLATE}.manifest.json"
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path, entries


def request_name(body: dict, entries: list) -> str:
    """Which manifest request a chat body asks (the body is the entry's request plus model, max_tokens, stream)."""
    asked = {k: v for k, v in body.items() if k not in ("model", "max_tokens", "stream")}
    return next(f"{e['case']}/{e['variant']}" for e in entries if e["request"] == asked)


class Runtime:
    """A stand-in runtime: answers each request as the strict parse of its reply reads, non-streamed or as
    server-sent events, unless `fail(name, streamed)` says to answer otherwise (a status, or "drop" to hang up
    without a word). It keeps every request it was asked, in order."""

    def __init__(self, entries: list, fail=lambda name, streamed: None, counts=None, ending=lambda name: "done"):
        self.entries, self.fail, self.asked, self.lock = entries, fail, [], threading.Lock()
        # name -> how its stream ends: "done" ([DONE] after the finish_reason), "eof" (the body ends after the
        # finish_reason, as transformers serve's does) or "cut" (half a call, no finish_reason, then the end).
        self.ending = ending
        self.counts = counts        # name -> the usage.prompt_tokens it answers with (None: no usage)
        self.models = set()

    def __call__(self, h):
        if h.path == "/v1/models":
            return self._send(h, 200, {"data": [{"id": SERVED}]})
        name = request_name(h.body, self.entries)
        streamed = bool(h.body.get("stream"))
        with self.lock:
            self.asked.append((name, streamed))
            self.models.add(h.body.get("model"))
        failure = self.fail(name, streamed)
        if failure == "drop":
            return                  # the connection closes with no answer, as under a server killed mid-request
        if failure is not None:
            return failure(h) if callable(failure) else self._send(h, failure, {"error": {"code": failure,
                                                                                          "message": "busy"}})
        expect = next(e["expect"] for e in self.entries if f"{e['case']}/{e['variant']}" == name)
        calls = [] if expect["deviation"] else [
            {"index": i, "id": f"call_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for i, c in enumerate(expect["calls"])]
        message = {"role": "assistant", "content": expect["content"], "tool_calls": calls}
        if not streamed:
            usage = {"usage": {"prompt_tokens": self.counts(name)}} if self.counts else {}
            return self._send(h, 200, {"choices": [{"message": message, "finish_reason": "stop"}], **usage})
        end = self.ending(name)
        events = [{"choices": [{"delta": message, "finish_reason": "stop"}]}]
        if end == "cut":
            half = [{**c, "function": {**c["function"], "arguments": c["function"]["arguments"][:8]}} for c in calls]
            events = [{"choices": [{"delta": {**message, "tool_calls": half}}]}]
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + ("data: [DONE]\n\n" if end == "done" else "")
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Length", str(len(data.encode())))
        h.end_headers()
        h.send(data.encode())

    @staticmethod
    def _send(h, status: int, payload):
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.send(data)


def conformance(url, manifest_path, results, *extra, served=("--served-model", SERVED)):
    return subprocess.run([sys.executable, "-m", "harness", "runtime-conformance", "--endpoint", url, "--manifest",
                           str(manifest_path), *served, "--runtime", "served", "--results-dir",
                           str(results), *extra], capture_output=True, text=True)


def recorded(results) -> list:
    path = results / "runtime-conformance" / "served.jsonl"
    return read_records(path)[0] if path.is_file() else []


def names(records) -> list:
    return sorted(f"{r.case['name']}/{r.variant}" for r in records)


def test_failed_requests_are_not_recorded_and_a_healthy_rerun_asks_exactly_them(manifest, tmp_path):
    path, entries = manifest
    order = [f"{e['case']}/{e['variant']}" for e in entries]       # the order they are asked in
    every = sorted(order)
    # HTTP 502 (a proxy's) on the first and third requests, 503 on the stream of the fourth (its non-streamed
    # answer came back), and from the tenth HTTP request on the connection drops, as when the server is killed.
    count = []

    def fail(name, streamed):
        count.append(name)
        if len(count) >= 10:
            return "drop"
        if streamed and name == order[3]:
            return 503
        return 502 if name in (order[0], order[2]) else None

    first = Runtime(entries, fail)
    with HostileServer(first) as server:
        failed = conformance(server.url, path, tmp_path)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
    kept = recorded(tmp_path)
    left = sorted(set(every) - set(names(kept)))
    assert names(kept) == sorted([order[1], order[4]]) and left == sorted(set(order) - {order[1], order[4]})
    assert not any("runtime-error" in r.labels for r in kept), [r.details for r in kept]
    assert f"{len(left)} left to retry" in failed.stdout, failed.stdout
    assert "HTTP 502" in failed.stderr and "HTTP 503" in failed.stderr
    assert failed.stderr.count("failed, not recorded") == len(left)

    second = Runtime(entries)
    with HostileServer(second) as server:
        healthy = conformance(server.url, path, tmp_path)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert sorted({name for name, _ in second.asked}) == left
    assert names(recorded(tmp_path)) == every
    assert f"{len(left)} request(s) asked" in healthy.stdout and f"{len(kept)} already recorded" in healthy.stdout


def test_a_drip_fed_run_stops_at_its_deadline_and_keeps_what_finished(manifest, tmp_path):
    path, entries = manifest
    healthy = sorted({f"{e['case']}/{e['variant']}" for e in entries if e["case"] == "one-call"})
    # Requests of one-call are answered; every other one is drip-fed a byte at a time and would never end.
    runtime = Runtime(entries, lambda name, streamed: None if name in healthy else drip(0.05))
    with HostileServer(runtime) as server:
        done = conformance(server.url, path, tmp_path, "--timeout", "1.5", "--deadline", "4")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert names(recorded(tmp_path)) == healthy
    others = [e for e in entries if e["case"] != "one-call"]
    # A drip is cut after 1.5 s, the last one by the run's deadline: at most 3 of the 4 are started (only
    # their non-streamed request: a request not answered is not asked streamed), and each one not recorded is
    # counted as left.
    asked = [name for name, _ in runtime.asked if name not in healthy]
    assert 1 <= len(asked) < len(others), asked
    assert f"{len(others)} left to retry" in done.stdout and "not asked before the 4 s deadline" in done.stdout


def test_timeout_and_deadline_are_for_an_endpoint(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "runtime-conformance", "--server", "llama-server",
                           "--deadline", "5", "--results-dir", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "--endpoint" in done.stderr and not any(tmp_path.rglob("*"))


def test_a_runtime_that_counts_the_prompt_otherwise_is_labelled_prompts_differ_and_not_judged(manifest, tmp_path):
    path, entries = manifest
    keyed = {f"{e['case']}/{e['variant']}": e["prompt_tokens"] for e in entries}
    other = "one-call/auto"
    runtime = Runtime(entries, counts=lambda name: keyed[name] + (2 if name == other else 0))
    with HostileServer(runtime) as server:
        done = conformance(server.url, path, tmp_path, "--case", "one-call")
    assert done.returncode == 0, done.stdout + done.stderr
    records = {f"{r.case['name']}/{r.variant}": r for r in recorded(tmp_path)}
    differs = records.pop(other)
    assert differs.labels == ["prompts-differ"] and differs.key["keyed"] == keyed[other]
    assert f"keyed to {keyed[other]} prompt tokens, the runtime counts {keyed[other] + 2}" in differs.details[-1]
    assert f"{other}: prompts-differ — " in done.stderr          # the detail on the console
    assert all("prompts-differ" not in r.labels and r.key["source"] == "usage.prompt_tokens of the answer"
               for r in records.values()), {n: r.labels for n, r in records.items()}


def test_without_served_model_every_model_of_the_manifest_is_asked_by_its_own_name(manifest, tmp_path):
    path, entries = manifest
    data = json.loads(path.read_text(encoding="utf-8"))
    half = len(entries) // 2
    data["models"] = [{"file": "a.gguf", "served_name": "scripted-a", "requests": entries[:half]},
                      {"file": "b.gguf", "served_name": "scripted-b", "requests": entries[half:]}]
    both = tmp_path / "both.manifest.json"
    both.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    runtime = Runtime(entries)
    with HostileServer(runtime) as server:
        done = conformance(server.url, both, tmp_path, served=())
    assert done.returncode == 0, done.stdout + done.stderr
    records = recorded(tmp_path)
    assert runtime.models == {"scripted-a", "scripted-b"} and len(records) == len(entries)
    assert {r.served_model for r in records} == {"scripted-a", "scripted-b"}


def test_a_stream_that_ends_after_its_finish_reason_without_done_is_judged_and_one_cut_midway_is_an_error(
        manifest, tmp_path):
    """transformers serve ends every stream after the chunk with its finish_reason, without `data: [DONE]`: that
    answer finished and is judged (labelled no-done-sentinel beside what the judging finds), while a stream that
    stops inside a call, before any finish_reason, stays a cut stream: runtime-error."""
    path, _ = manifest
    endings = {"one-call/auto": "eof", "one-call/required": "cut"}
    runtime = Runtime(manifest[1], ending=lambda name: endings.get(name, "done"))
    with HostileServer(runtime) as server:
        done = conformance(server.url, path, tmp_path, "--case", "one-call")
    assert done.returncode == 0, done.stdout + done.stderr
    records = {f"{r.case['name']}/{r.variant}": r for r in recorded(tmp_path)}
    finished, cut = records.pop("one-call/auto"), records.pop("one-call/required")
    assert finished.labels == ["no-done-sentinel"] and finished.stream["no_done_sentinel"] is True
    assert "cut_short" not in finished.stream and "without data: [DONE]" in finished.details[0]
    assert cut.labels[0] == "runtime-error" and "no_done_sentinel" not in cut.stream
    assert cut.stream["cut_short"].startswith("cut short: the stream ended without [DONE] and without a "
                                              "finish_reason")
    assert records["one-call/named"].labels == ["agree"]
    assert not any({"runtime-error", "no-done-sentinel"} & set(r.labels) for r in records.values())


def test_a_record_names_no_machine_path_and_its_replay_rebuilds_the_manifest_from_the_template(manifest, tmp_path):
    """A record names its manifest without the folder it lay in (committed records carry no machine's paths),
    and its replay, run as printed, asks the case again from the manifest `harness scripted-model --template`
    rebuilds in a scratch folder."""
    import shlex

    from harness.suites.runtime_conformance.judging import replay_command

    path, entries = manifest
    with HostileServer(Runtime(entries)) as server:
        done = conformance(server.url, path, tmp_path / "first", "--case", "one-call", "--variant", "auto")
        assert done.returncode == 0, done.stdout + done.stderr
        [record] = recorded(tmp_path / "first")
        assert record.manifest == f"{TEMPLATE}.manifest.json"
        line = replay_command(record)
        assert "--manifest" not in line and f"--template {TEMPLATE}" in line and "/" not in record.manifest
        words = shlex.split(line.replace('"$(mktemp -d)"', str(tmp_path / "replayed")))
        assert words[:2] == [".venv/bin/harness", "runtime-conformance"]
        again = subprocess.run([sys.executable, "-m", "harness", *words[1:]], capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "one-call/auto: agree" in again.stderr
    assert [r.labels for r in recorded(tmp_path / "replayed")] == [["agree"]]


WHOLE = {
    "HTTP 500 every time": lambda streamed: raw_json('{"error": "peg-native format"}', status=500, plain=False),
    "200 with HTML": lambda streamed: whole(b"<html><body>Welcome</body></html>"),
    "an empty body": lambda streamed: whole(b""),
    "bad UTF-8": lambda streamed: whole(b'{"choices": "\xff"}', content_type="application/json"),
    "an SSE event that is not JSON": lambda streamed: whole(b"data: {\"choices\": [\n\ndata: [DONE]\n\n",
                                                            content_type="text/event-stream") if streamed else None,
}


@pytest.mark.parametrize("answer", WHOLE.values(), ids=WHOLE.keys())
def test_an_answer_that_arrived_whole_is_recorded_as_runtime_error(manifest, tmp_path, answer):
    """A runtime that answers a request completely but not with a chat completion is a finding: recorded once as
    runtime-error (with its words), not left to retry on every run."""
    path, entries = manifest
    odd = "one-call/auto"
    runtime = Runtime(entries, lambda name, streamed: answer(streamed) if name == odd else None)
    with HostileServer(runtime) as server:
        done = conformance(server.url, path, tmp_path, "--case", "one-call")
        assert done.returncode == 0 and "left to retry" not in done.stdout, done.stdout + done.stderr
        again = conformance(server.url, path, tmp_path, "--case", "one-call")
    records = {f"{r.case['name']}/{r.variant}": r for r in recorded(tmp_path)}
    assert "runtime-error" in records[odd].labels, records[odd].labels
    assert not any("runtime-error" in r.labels for n, r in records.items() if n != odd)
    assert again.returncode == 0 and "0 request(s) asked" in again.stdout, again.stdout


def test_a_redirect_stops_the_run_and_is_not_recorded_as_the_runtime_s(manifest, tmp_path):
    path, entries = manifest
    with HostileServer(Runtime(entries)) as other:
        moved = redirect(other.url, 301)
        runtime = Runtime(entries, lambda name, streamed: moved)
        with HostileServer(lambda h: runtime(h) if h.path != "/v1/models" else Runtime(entries)(h)) as server:
            done = conformance(server.url, path, tmp_path, "--case", "one-call")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert f"HTTP 301 redirect to {other.url}" in done.stderr and "--endpoint the URL that answers" in done.stderr
    assert recorded(tmp_path) == [] and other.paths == [] and len(runtime.asked) == 1


def test_two_runs_on_one_records_file_never_record_a_request_twice(manifest, tmp_path):
    """The second run, started while the first holds the records file, stops at once naming it; a run after the
    first one ended asks nothing again."""
    path, entries = manifest
    gate, first_asked = threading.Event(), threading.Event()

    def hold(name, streamed):
        first_asked.set()
        gate.wait()

    with HostileServer(Runtime(entries, hold)) as server:
        first = subprocess.Popen([sys.executable, "-m", "harness", "runtime-conformance", "--endpoint", server.url,
                                  "--manifest", str(path), "--served-model", SERVED, "--runtime", "served",
                                  "--results-dir", str(tmp_path), "--case", "one-call"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first_asked.wait()
        try:
            # A guard against a regression hanging the suite (a second run that waits for the first, which waits
            # for this test): minutes, far from anything measured.
            second = subprocess.run(first.args, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            second = None
        gate.set()
        out, err = first.communicate()
        third = conformance(server.url, path, tmp_path, "--case", "one-call")
    assert first.returncode == 0, out + err
    assert second is not None, "the second run waited for the first instead of stopping"
    assert second.returncode == 2 and "is being written by process" in second.stderr, second.stderr
    assert third.returncode == 0 and "0 request(s) asked" in third.stdout, third.stdout
    keys = [r.done_key() for r in recorded(tmp_path)]
    assert len(keys) == len(set(keys)) == sum(e["case"] == "one-call" for e in entries)
