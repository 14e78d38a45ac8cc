"""A family a pin declares, with its evidence, for a template that never renders a call (LFM2, LFM2.5-Instruct):
reported as `declared`, never as `detected`, and used where a family is read with."""

import json

import pytest

from harness.core.errors import HarnessError, SourcesError
from harness.live.opening import template_chat
from harness.pins.sources import load_sources, resolve_template
from harness.template.conformance import check_template
from harness.template.detect import declaration_for, detect, detect_declared

DECLARED = ["LFM2-8B-A1B", "LFM2.5-Instruct"]


@pytest.mark.parametrize("template_id", DECLARED)
def test_a_declared_family_is_reported_as_declared_with_its_evidence(template_id):
    ref = resolve_template(template_id)
    assert detect(ref.text).family is None          # detection alone still cannot say
    found = detect_declared(ref.text)
    assert (found.family, found.status) == ("lfm2", "declared")
    assert found.declared["model_card"].startswith("https://huggingface.co/LiquidAI/")
    assert found.declared["parsers"]["vllm"] == "lfm2" and "lfm2" in found.declared["parsers"]["llama.cpp"]
    assert [f["name"] for f in found.findings] == ["calls-through-content"]
    data = found.to_json()
    assert data["status"] == "declared" and data["declared"] == found.declared


@pytest.mark.parametrize("template_id", DECLARED)
def test_conformance_and_live_runs_use_the_declared_family(template_id):
    row = check_template(resolve_template(template_id))
    assert (row["family"], row["status"]) == ("lfm2", "declared")
    chat, _, found = template_chat(template_id)
    assert chat.family == "lfm2" and found.status == "declared"


def _sources_with(tmp_path, template_id, declared):
    raw = json.loads(load_sources().path.read_text(encoding="utf-8"))
    for entry in raw["templates"]:
        if entry["id"] == template_id:
            entry["declared_family"] = declared
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


EVIDENCE = {"family": "lfm2", "model_card": "https://huggingface.co/LiquidAI/LFM2-8B-A1B", "parsers": {"vllm": "lfm2"}}


def test_a_detected_family_wins_over_a_declaration(tmp_path):
    sources = load_sources(_sources_with(tmp_path, "Qwen-Qwen2.5-7B-Instruct", EVIDENCE))
    text = resolve_template("Qwen-Qwen2.5-7B-Instruct").text
    assert declaration_for(text, sources) == EVIDENCE
    found = detect_declared(text, sources=sources)
    assert (found.family, found.status, found.declared) == ("hermes", "detected", None)


@pytest.mark.parametrize("declared", [
    {"family": "lfm2"},                                                         # no evidence
    {**EVIDENCE, "model_card": "huggingface.co/LiquidAI/LFM2-8B-A1B"},          # not a URL
    {**EVIDENCE, "parsers": {}},                                                # no peer parser named
    {**EVIDENCE, "parsers": {"vllm": 3}},
    {**EVIDENCE, "family": "lfm2\n"},
    {**EVIDENCE, "source": "a guess"},
    {**EVIDENCE, "evidence": ["the card"]},                                     # evidence is a sentence
    "lfm2",
])
def test_a_declaration_without_its_evidence_is_refused(tmp_path, declared):
    with pytest.raises(SourcesError, match="declared_family"):
        load_sources(_sources_with(tmp_path, "LFM2-8B-A1B", declared))


def test_a_declared_family_the_registry_lacks_fails_loudly(tmp_path):
    sources = load_sources(_sources_with(tmp_path, "LFM2-8B-A1B", {**EVIDENCE, "family": "lfm3"}))
    with pytest.raises(HarnessError, match="lfm3"):
        detect_declared(resolve_template("LFM2-8B-A1B").text, sources=sources)


def test_a_declarations_evidence_sentence_joins_its_reason(tmp_path):
    declared = {**EVIDENCE, "evidence": "the card says so"}
    sources = load_sources(_sources_with(tmp_path, "LFM2-8B-A1B", declared))
    found = detect_declared(resolve_template("LFM2-8B-A1B").text, sources=sources)
    assert found.declared == declared and found.reason.endswith("; the card says so")
