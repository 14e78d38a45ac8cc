"""Which templates the HF runtimes are given (harness.suites.runtime_conformance.hf_serving), offline: vLLM and transformers serve get
the same templates, the committed records of each cover exactly them, and a family transformers has no response
template for is served without one (its records and page say calls are not parsed), not left out."""

import pytest

from harness.backends import runtimes
from harness.core import constants
from harness.suites.runtime_conformance import read_records
from harness.suites.runtime_conformance.hf_serving import SERVED, hf_form_templates, how_served
from harness.pins.sources import load_sources
from harness.suites.runtime_conformance.page import unread_lines
from harness.scripted.hf_form import has_hf_form

RECORDS = constants.ROOT / "results" / "runtime-conformance"
NO_READER = "no response template: calls are not parsed"


def committed(server: str) -> list:
    records, problems = read_records(RECORDS / f"{runtimes.get(server).record_name}.jsonl")
    assert not problems
    return records


@pytest.fixture(scope="module")
def selection():
    recorded = {r.template["id"] for server in SERVED for r in committed(server)}
    return hf_form_templates(load_sources(), prefer=recorded)


def test_both_hf_runtimes_are_served_every_selected_template_and_only_those(selection):
    selected, skipped = selection
    ids = {s.template for s in selected}
    for s in selected:
        for server in SERVED:
            assert how_served(server, s.family, s.template)[1] is None, (server, s.template)
    # every template vLLM was given, under the id its records carry, and no template twice
    assert {r.template["id"] for r in committed("vllm-cpu")} <= ids
    assert len({s.sha256 for s in selected}) == len(selected)
    reasons = dict(skipped)
    assert reasons["mistralai-Mistral-Nemo-Instruct-2407"].startswith("no HF form")
    assert reasons["CohereForAI-c4ai-command-r7b-12-2024-tool_use"] == "no vLLM tool parser for family command-r7b"
    assert reasons["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"] == (
        "the same template as NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    assert len(ids) + len(skipped) == len(load_sources().templates)


@pytest.mark.parametrize("server", SERVED)
def test_the_committed_records_of_each_cover_exactly_the_selected_templates(selection, server):
    selected, _ = selection
    assert {(r.template["id"], r.template["sha256"]) for r in committed(server)} == {
        (s.template, s.sha256) for s in selected}


def test_a_family_without_a_response_template_is_served_without_one():
    assert how_served("transformers-serve", "glm", "GLM-4.6") == (None, None)
    assert how_served("vllm-cpu", "glm", "GLM-4.6") == ("glm45", None)
    assert how_served("transformers-serve", "hermes", "Qwen-Qwen2.5-7B-Instruct") == ("qwen2", None)
    assert how_served("transformers-serve", "gemma4", "google-gemma-4-31B-it") == ("gemma4", None)
    reader, why = how_served("vllm-cpu", "command-r7b", "CohereForAI-c4ai-command-r7b-12-2024-tool_use")
    assert reader is None and why == "no vllm parser for family 'command-r7b'"
    assert runtimes.get("transformers-serve").no_reader == NO_READER


def test_its_records_show_the_call_left_in_content_and_the_page_says_why():
    records = committed("transformers-serve")
    glm = [r for r in records if r.template["id"] == "GLM-4.6" and r.case["name"] == "one-call"
           and r.variant == "auto"]
    assert len(glm) == 1 and "call-left-in-content" in glm[0].labels and not glm[0].plain["tool_calls"]
    (line,) = [x for x in unread_lines(records) if x]
    assert line.startswith(f"transformers-serve-5.19.0, {NO_READER}: ") and "GLM-4.6" in line
    assert "Qwen-Qwen2.5-7B-Instruct" not in line and "gemma" not in line
    assert unread_lines(committed("vllm-cpu")) == []


def test_only_byte_level_vocabularies_have_an_hf_form():
    assert [p for p in ("gpt2", "qwen2.5", "llama3.1", "gpt2+glm", "mistral") if has_hf_form(p)] == [
        "gpt2", "qwen2.5", "llama3.1", "gpt2+glm"]
