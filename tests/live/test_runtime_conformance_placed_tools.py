"""Runtime conformance of the templates that take no `tools` (DeepSeek V3.1, R1-Distill-Qwen) and of a declared
one (Granite 3.3), through llama-server: our prompt carries the tool list where the model card puts it, the
runtime's does not (llama.cpp renders these templates without tools), and llama-server still reads the calls."""

import pytest
import requirements

requirements.binding()

from harness.suites.runtime_conformance.corpus import build_corpus  # noqa: E402
from harness.suites.runtime_conformance import driver as rc  # noqa: E402
from harness.pins.sources import resolve_template  # noqa: E402


def _records(tmp_path, template_ids):
    templates = [(ref, build_corpus(ref)) for ref in map(resolve_template, template_ids)]
    records, _ = rc.run_suite("llama-server", "llama-server", templates, tmp_path / "r.jsonl", tmp_path / "work",
                              set(), ["one-call"], ["auto"], log=lambda r: None)
    return {r.template["id"]: r for r in records}


@pytest.mark.needs_server
def test_placed_tools_differ_from_the_runtimes_prompt_and_the_call_is_read(tmp_path):
    got = _records(tmp_path, ["deepseek-ai-DeepSeek-V3.1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
                              "ibm-granite-granite-3.3-2B-Instruct"])
    for template_id in ("deepseek-ai-DeepSeek-V3.1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"):
        record = got[template_id]
        assert record.labels == ["prompts-differ"], (template_id, record.details)
        assert [c["name"] for c in record.plain["tool_calls"]] == ["get_weather"]
    # Granite 3.3 reads tools itself, so the prompts agree; llama-server 0.3.36 has no Granite 3.3 call parser.
    assert got["ibm-granite-granite-3.3-2B-Instruct"].labels == ["call-left-in-content"]
