"""Templates llama.cpp supports that Hugging Face-style rendering alone cannot probe: Firefunction v2 (tools as
llama.cpp's `functions` variable), Kimi-K2 (`list.append`, refused by HF's sandbox: the verdict stays, the family
found outside that refusal is a named finding) and templates that pass calls through content (LFM2)."""

import json

import pytest

from harness.template import detect as detection
from harness.template import sandbox_variant
from harness.core.errors import TemplateError
from harness.template.probe import LLAMA_CPP_FUNCTIONS, PROBE_TOOL, tool_variables
from harness.template.render import render
from harness.pins.sources import resolve_template


def _detect(template_id):
    ref = resolve_template(template_id)
    return detection.detect(ref.text, ref.bos_token or "", ref.eos_token or "")


def test_firefunction_is_detected_through_llama_cpps_functions_variable():
    found = _detect("fireworks-ai-llama-3-firefunction-v2")
    assert (found.family, found.status, found.carrier) == ("firefunction", "detected", LLAMA_CPP_FUNCTIONS)
    assert found.rendered_call.startswith(" functools[")
    [finding] = found.findings
    assert finding["name"] == "tools-as-functions" and "'functions' is undefined" in finding["detail"]


def test_functions_variable_is_llama_cpps_dump_of_the_tools():
    variables = tool_variables(LLAMA_CPP_FUNCTIONS, [PROBE_TOOL])
    assert variables["tools"] is None  # llama.cpp's tools_override: the template never sees `tools`
    assert json.loads(variables["functions"]) == [PROBE_TOOL] and variables["functions"].startswith('[\n  {')
    assert tool_variables(LLAMA_CPP_FUNCTIONS, None)["functions"] == ""


@pytest.mark.parametrize("template_id", ["Kimi-K2-Instruct", "Kimi-K2-Thinking"])
def test_kimi_k2_stays_a_wall_and_names_the_family_it_renders_outside_the_refusal(template_id):
    found = _detect(template_id)
    assert found.status == "wall" and found.family is None and "append" in found.reason
    [finding] = found.findings
    assert finding["name"] == "list-methods-refused" and finding["family"] == "kimi-k2"
    assert "<|tool_call_begin|>functions.get_weather:0" in finding["rendered_call"]


def test_the_variant_sandbox_allows_list_methods_and_nothing_else():
    appends = "{% set xs = [] %}{% set _ = xs.append(1) %}{{ xs }}"
    with pytest.raises(TemplateError, match="unsafe"):
        render(appends, [{"role": "user", "content": "x"}])
    assert sandbox_variant.render(appends, [{"role": "user", "content": "x"}]) == "[1]"
    for refused in ("{% set d = {} %}{% set _ = d.update({'a': 1}) %}{{ d }}", "{{ ().__class__.__bases__ }}"):
        with pytest.raises(TemplateError):
            sandbox_variant.render(refused, [{"role": "user", "content": "x"}])


@pytest.mark.parametrize("template_id", ["LFM2-8B-A1B", "LFM2.5-Instruct"])
def test_lfm2_templates_pass_calls_through_content(template_id):
    found = _detect(template_id)
    assert found.family is None and found.status == "no tools"
    assert [f["name"] for f in found.findings] == ["calls-through-content"]
    assert "drops the assistant's `tool_calls`" in found.reason


def test_a_template_that_never_shows_tools_has_no_content_finding():
    found = _detect("google-gemma-2-2b-it")
    assert found.status == "no tools" and found.findings == []


def test_an_unrenderable_unpinned_template_is_a_wall():
    found = detection.detect("{{ undefined_thing.attr.deeper }}")
    assert found.status == "wall" and found.error
