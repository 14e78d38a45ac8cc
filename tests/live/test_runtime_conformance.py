"""Runtime conformance through real servers on 127.0.0.1: scripted models write exact replies, the runtime's
answers are recorded and labelled. CI's subset: every family's one-call case once on llama-server; a few cases on
llama-cpp-python's server; a server killed under a request; a resumed run; `harness scripted-model` keyed to
llama-server and served. The whole suite is benchmarks/runtime_conformance_bench.py."""

import json
import subprocess
import sys

import pytest
import requirements

requirements.binding()

from harness.backends.chat_answers import chat_answer  # noqa: E402
from harness.backends.servers import LocalServer  # noqa: E402
from harness.evaluation.judging import label_head as label_family  # noqa: E402
from harness.suites.runtime_conformance import read_records  # noqa: E402
from harness.suites.runtime_conformance.judging import LABELS, replay_command  # noqa: E402
from harness.suites.runtime_conformance.corpus import build_corpus  # noqa: E402
from harness.suites.runtime_conformance import driver as rc  # noqa: E402
from harness.pins.sources import load_sources, resolve_template  # noqa: E402

SOURCES = load_sources()


def one_template_per_family() -> list:
    chosen = {}
    for template_id in SOURCES.templates:
        ref = resolve_template(template_id, SOURCES)
        corpus = build_corpus(ref)
        if corpus.family and corpus.family not in chosen and any(c.name == "one-call" for c in corpus.cases):
            chosen[corpus.family] = (ref, corpus)
    return list(chosen.values())


def suite(kind, tmp_path, templates, cases, variants=None, **kwargs):
    path = tmp_path / f"{kind}.jsonl"
    records, _ = rc.run_suite(kind, kind, templates, path, tmp_path / "work", set(), cases, variants,
                              log=lambda r: None, **kwargs)
    return records, path


def pair(template_id):
    ref = resolve_template(template_id, SOURCES)
    return ref, build_corpus(ref)


@pytest.mark.needs_server
def test_every_family_writes_its_call_through_llama_server(tmp_path):
    templates = one_template_per_family()
    assert len(templates) >= 30
    records, path = suite("llama-server", tmp_path, templates, ["one-call"], ["auto"])
    assert {r.family for r in records} == {c.family for _, c in templates}
    assert len(read_records(path)[0]) == len(records)              # each on disk as it landed
    for r in records:
        assert {label_family(x) for x in r.labels} <= set(LABELS), r.labels
        assert r.key["source"].startswith("llama-server /apply-template")
        if not {"reply-rewritten", "runtime-error"} & set(r.labels):
            # The key came from the runtime: the scripted model wrote its whole reply, not a token less or more.
            assert r.plain["completion_tokens"] in (r.reply_tokens, r.reply_tokens - 1), r.template
    by_template = {r.template["id"]: r for r in records}
    hermes = next(r for r in records if r.family == "hermes")
    assert hermes.labels == ["agree"], hermes.details
    assert by_template[hermes.template["id"]].stream["chunks"] > 1


@pytest.mark.needs_binding
def test_llama_cpp_python_leaves_calls_in_content_and_repeats_streamed_names(tmp_path):
    records, _ = suite("llama-cpp-python", tmp_path, [pair("Qwen-Qwen2.5-7B-Instruct")], ["one-call", "prose-braces"])
    got = {f"{r.case['name']}/{r.variant}": r for r in records}
    # No chat handler of llama-cpp-python 0.3.36 reads a Hermes call: auto and required give the text back.
    assert got["one-call/auto"].labels == ["call-left-in-content"]
    assert got["one-call/auto"].plain["content"] == got["one-call/auto"].reply
    assert got["prose-braces/auto"].labels == ["agree"]
    # A named function is written under llama-cpp-python's own JSON grammar (not the family's call syntax), and
    # its stream sends the function name in every delta, so accumulated names repeat.
    named = got["one-call/named"]
    assert "reply-rewritten" in named.labels and "stream-differs" in named.labels
    streamed = named.stream["tool_calls"][0]["name"]
    assert streamed.startswith("get_weatherget_weather")


@pytest.mark.needs_server
def test_a_server_killed_under_a_request_is_a_finding_and_comes_back(tmp_path, monkeypatch):
    asked = []
    real = rc.TemplateRun._ask

    def kill_first(self, server, ask, url, body):
        if not asked:
            server.kill()                          # as a crash would end it, with the request on its way
        asked.append(url)
        return real(self, server, ask, url, body)

    monkeypatch.setattr(rc.TemplateRun, "_ask", kill_first)
    records, _ = suite("llama-server", tmp_path, [pair("Qwen-Qwen2.5-7B-Instruct")], ["one-call"], ["auto", "none"])
    first, second = records
    assert first.labels[0] == "runtime-error"
    assert "the server died (signal SIGKILL) and was started again" in first.plain["error"]
    assert first.stream["status"] == 200 and second.labels == ["agree"]


@pytest.mark.needs_server
def test_a_history_the_runtime_will_not_render_is_still_asked_of_its_chat_endpoint(tmp_path):
    """A call whose arguments are not JSON in the history: llama-server's /apply-template refuses it, so no model
    is keyed to the prompt; its chat endpoint is asked all the same and what a client gets there is recorded
    (this llama.cpp answers 500, not a client error: runtime-error), not judged."""
    records, _ = suite("llama-server", tmp_path, [pair("Qwen-Qwen2.5-7B-Instruct")], ["history-malformed-call"])
    [record] = records
    assert record.key["tokens"] is None and "Failed to parse tool call arguments as JSON" in record.key["error"]
    assert record.plain["status"] == record.stream["status"] == 500, (record.plain, record.stream)
    assert record.labels == ["runtime-error"] and record.model is None
    assert any(d.startswith("non-streamed: ") for d in record.details)


@pytest.mark.needs_server
def test_a_resumed_run_asks_only_what_is_not_recorded(tmp_path):
    template = [pair("mistralai-Mistral-Nemo-Instruct-2407")]
    first, path = suite("llama-server", tmp_path, template, ["one-call"], ["auto"])
    done = {r.done_key() for r in read_records(path)[0]}
    again, _ = rc.run_suite("llama-server", "llama-server", template, path, tmp_path / "work", done, ["one-call"],
                            ["auto", "required"], log=lambda r: None)
    assert [r.variant for r in first] == ["auto"] and [r.variant for r in again] == ["required"]


@pytest.mark.needs_server
def test_scripted_model_keyed_to_llama_server_writes_the_manifest_reply_at_any_endpoint(tmp_path):
    out = tmp_path / "models"
    done = subprocess.run([sys.executable, "-m", "harness", "scripted-model", "--template", "Qwen3.5-4B",
                           "--case", "prose-braces", "--case", "one-call", "--key-from", "llama-server",
                           "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "Qwen3.5-4B.manifest.json").read_text())
    assert manifest["vocabulary"] == "qwen2.5+qwen-xml" and manifest["family"] == "qwen-xml"
    # Qwen2.5's vocabulary already holds <tool_call> at its real id; Qwen3's <think> pair is added, not special.
    marked = {m["token"]: m for m in manifest["marker_tokens"]}
    assert marked["<tool_call>"]["id"] == 151657 and marked["<think>"]["gguf_type"] == "user-defined"
    assert marked["<think>"]["special"] is False
    model = manifest["models"][0]
    entries = {f"{e['case']}/{e['variant']}": e for e in model["requests"]}
    assert entries["one-call/auto"]["key_source"].startswith("llama-server")
    results = tmp_path / "results"
    with LocalServer("llama-server", out / model["file"], alias=model["served_name"],
                     log_path=tmp_path / "server.log") as server:
        prose = entries["prose-braces/auto"]
        answer = chat_answer(server.base_url + "/v1/chat/completions",
                             {**prose["request"], "model": server.model}, 60)
        call = chat_answer(server.base_url + "/v1/chat/completions",
                           {**entries["one-call/auto"]["request"], "model": server.model}, 60)
        # The same model as any endpoint a user serves: the manifest's requests, recorded and labelled.
        asked = subprocess.run([sys.executable, "-m", "harness", "runtime-conformance", "--endpoint", server.base_url,
                                "--manifest", str(out / "Qwen3.5-4B.manifest.json"), "--served-model", server.model,
                                "--runtime", "my-llama-server", "--variant", "auto", "--results-dir", str(results)],
                               capture_output=True, text=True)
    assert asked.returncode == 0, asked.stderr
    records = read_records(results / "runtime-conformance" / "my-llama-server.jsonl")[0]
    assert sorted(r.case["name"] for r in records) == ["one-call", "prose-braces"]
    assert all(r.labels == ["agree"] for r in records), [r.details for r in records]
    assert all(len(r.reply_ids) == r.reply_tokens == entries[f"{r.case['name']}/auto"]["reply_tokens"] for r in records)
    assert "--endpoint" in replay_command(records[0]) and "--template Qwen3.5-4B" in replay_command(records[0])
    assert records[0].manifest == "Qwen3.5-4B.manifest.json"
    assert answer["content"] == prose["reply"] and answer["tool_calls"] == []
    assert [c["name"] for c in call["tool_calls"]] == ["get_weather"]
    assert json.loads(call["tool_calls"][0]["arguments"]) == {"location": "Paris", "days": 3}
