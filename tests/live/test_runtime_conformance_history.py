"""History cases through real servers: the reasoning a runtime returned for a template's reasoning-then-call
case, sent back after a tool result and after a new user turn, and the runtime's render of the next request
judged against the pinned template's (harness.suites.runtime_conformance.history_cases). llama-server shows its render
(/apply-template); llama-cpp-python's server only its length."""

import pytest

from harness.suites.runtime_conformance import history_cases as h
from harness.suites.runtime_conformance.judging import LABELS
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.evaluation.judging import label_head
from harness.suites.runtime_conformance import driver as rc
from harness.pins.sources import load_sources, resolve_template

SOURCES = load_sources()


def history_records(kind, tmp_path, template_ids):
    templates = [(ref, build_corpus(ref)) for ref in (resolve_template(t, SOURCES) for t in template_ids)]
    records, _ = rc.run_suite(kind, kind, templates, tmp_path / f"{kind}.jsonl", tmp_path / "work", set(),
                              list(h.CASES), None, log=lambda r: None)
    assert all({label_head(x) for x in r.labels} <= set(LABELS) for r in records)
    return {(r.template["id"], r.case["name"]): r for r in records}


@pytest.mark.needs_server
def test_llama_server_renders_the_history_and_shows_what_it_did_with_the_reasoning(tmp_path):
    records = history_records("llama-server", tmp_path, ["Qwen-Qwen3-0.6B", "LFM2.5-8B-A1B"])
    assert len(records) == 4
    for r in records.values():
        assert r.key["source"].startswith("llama-server /apply-template") and r.history["renders"][0]["same_text"] is not None
    # Qwen3 renders the reasoning after the tool result and drops it after a new user turn; llama-server's render
    # is the template's, both times.
    qwen_tool, qwen_user = records["Qwen-Qwen3-0.6B", h.AFTER_TOOL], records["Qwen-Qwen3-0.6B", h.AFTER_USER]
    assert (qwen_tool.history["template"], qwen_user.history["template"]) == (h.KEPT, h.DROPPED)
    assert qwen_tool.key["same_text"] and qwen_user.key["same_text"]
    assert not any(x.startswith("history-") for x in qwen_tool.labels + qwen_user.labels)
    # LFM2.5's template drops it after a new user turn unless `preserve_thinking`, which llama-server sets by
    # default (its preserve_reasoning): its prompt holds the reasoning.
    lfm = records["LFM2.5-8B-A1B", h.AFTER_USER]
    assert lfm.history["template"] == h.DROPPED and lfm.history["reasoning_in_prompt"] is True
    assert "history-reasoning-kept" in lfm.labels and "prompts-differ" in lfm.labels


@pytest.mark.needs_binding
def test_llama_cpp_python_is_judged_by_its_prompt_length(tmp_path):
    records = history_records("llama-cpp-python", tmp_path, ["Qwen-Qwen3-0.6B"])
    tool, user = records["Qwen-Qwen3-0.6B", h.AFTER_TOOL], records["Qwen-Qwen3-0.6B", h.AFTER_USER]
    assert tool.key["source"].startswith("usage.prompt_tokens") and tool.history["reasoning_in_prompt"] is None
    # Its prompt after the tool result has the length of the template's render without the reasoning.
    assert "history-reasoning-dropped" in tool.labels
    without = next(x for x in tool.history["renders"] if not x["reasoning"] and x["kwargs"] == "sent")
    assert tool.key["tokens"] == without["tokens"] != tool.ours["tokens"]
    # After a new user turn the template drops it too: the same length as ours, nothing to say.
    assert user.key["tokens"] == user.ours["tokens"] and not any(x.startswith("history-") for x in user.labels)


@pytest.mark.needs_binding
def test_a_runtime_the_user_serves_is_judged_from_the_manifest(tmp_path):
    # `harness scripted-model` writes the template's renders into each history entry; `--endpoint` judges the
    # runtime's usage.prompt_tokens against them, as the suite does for a runtime it starts.
    import json

    from harness.backends.servers import LocalServer
    from harness.cli import build_parser
    from harness.suites.runtime_conformance.endpoint import run_manifest

    args = build_parser().parse_args(["scripted-model", "--template", "Qwen-Qwen3-0.6B", "--case", h.AFTER_TOOL,
                                      "--out", str(tmp_path / "models")])
    assert args.func(args) == 0
    manifest = tmp_path / "models" / "Qwen-Qwen3-0.6B.manifest.json"
    (entry,) = [e for m in json.loads(manifest.read_text(encoding="utf-8"))["models"] for e in m["requests"]]
    assert entry["history"]["template"] == h.KEPT and entry["history"]["renders"][0]["tokens"] == entry["prompt_tokens"]
    model = next((tmp_path / "models").glob("*.gguf"))
    with LocalServer("llama-cpp-python", model, alias=model.stem, n_ctx=4096, ready_timeout=300) as server:
        run = run_manifest(server.base_url, None, manifest, "served", tmp_path / "served.jsonl", set(),
                           log=lambda r: None)
    (record,) = run.written
    without = next(x for x in record.history["renders"] if not x["reasoning"] and x["kwargs"] == "sent")
    assert record.key["tokens"] == without["tokens"] and "history-reasoning-dropped" in record.labels
