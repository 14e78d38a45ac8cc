"""Value spellings peer runtimes read: LFM2's Python call with JSON's true/false/null inside is read and named;
Gemma 4's `null` and Qwen3-Coder's `<function=...>` without its `<tool_call>` opener stay refused, each with the
deviation the strictness ledger gives its reason for."""

import json
import subprocess
import sys

import pytest

from harness import families
from harness.suites.strictness_ledger import SPELLINGS

LFM2_JSON = '<|tool_call_start|>[set_config(config={"enabled": true, "note": null}, tags=[false])]<|tool_call_end|>'
SET_CONFIG = {"type": "function", "function": {"name": "set_config", "parameters": {"type": "object", "properties": {
    "config": {"type": "object", "properties": {"enabled": {"type": "boolean"}, "note": {"type": ["string", "null"]}}},
    "tags": {"type": "array", "items": {"type": "boolean"}}}}}}


def test_lfm2_reads_json_literals_and_names_where():
    result = families.parse("lfm2", LFM2_JSON, "")
    assert result.accepted
    [call] = result.calls
    assert call.arguments == {"config": {"enabled": True, "note": None}, "tags": [False]}
    assert call.json_literals == ("config/enabled", "config/note", "tags/0")
    assert call.to_json()["json_literals"] == ["config/enabled", "config/note", "tags/0"]


def test_lfm2_python_literals_name_nothing():
    [call] = families.parse("lfm2", '<|tool_call_start|>[f(a=True, b=None, c=[False])]<|tool_call_end|>', "").calls
    assert call.json_literals == () and "json_literals" not in call.to_json()


@pytest.mark.parametrize("text", ["[f(a=nope)]", "[f(a=true.x)]", "[f(a=True_)]", "[f(a=[null, undefined])]"])
def test_lfm2_other_bare_names_stay_refused(text):
    result = families.parse("lfm2", f"<|tool_call_start|>{text}<|tool_call_end|>", "")
    assert result.deviation == "not-python-call" and not result.calls


def test_harness_parse_names_the_json_literals(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([SET_CONFIG]), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "harness", "parse", "--template", "LFM2.5-8B-A1B", "--tools",
                          str(tools), "--json"], input=LFM2_JSON, capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["calls"][0]["arguments"]["config"] == {"enabled": True, "note": None}
    assert [f["name"] for f in data["findings"]] == ["json-notation-arguments"]
    assert "config/enabled" in data["findings"][0]["detail"]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s["family"])
def test_the_ledgers_spellings_are_what_the_parsers_do(spelling):
    result = families.parse(spelling["family"], spelling["text"], "")
    if spelling["verdict"] == "read":
        assert result.accepted and any(c.json_literals for c in result.calls)
    else:
        assert result.deviation == spelling["deviation"] and not result.calls


def test_scoring_names_lfm2_json_literals():
    from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
    from harness.evaluation.scenario_files import load_scenarios
    from harness.evaluation.scoring import score_sample

    scenario = {s.name: s for s in load_scenarios()}["file-chunks"]

    def verdicts(reply):
        step = {"reply": reply, "prompt_tail": "<|im_start|>assistant\n", "calls": []}
        record = SampleRecord(ModelRef("m"), ScenarioRef("s", "h"), sample=0, seed=0, family="lfm2", replayed=True,
                              mode="native", turns=[{"steps": [step]}])
        return score_sample(scenario, record)

    json_spelt = verdicts('<|tool_call_start|>[file_chunks(source="imprint/chat.py", start=0, end=null)]'
                          "<|tool_call_end|>")
    python_spelt = verdicts('<|tool_call_start|>[file_chunks(source="imprint/chat.py", start=0, end=None)]'
                            "<|tool_call_end|>")
    assert json_spelt["parsed"] and "json-notation-arguments" in json_spelt["findings"]
    assert python_spelt["parsed"] and "json-notation-arguments" not in python_spelt["findings"]


def test_the_ledger_names_the_gpt_oss_calls_on_the_analysis_channel_we_refuse():
    from pathlib import Path

    from harness.suites.strictness_ledger import REASONS

    ledger = (Path(__file__).resolve().parents[2] / "docs" / "strictness.md").read_text(encoding="utf-8")
    row = next(line for line in ledger.splitlines() if line.startswith("| harmony | "))
    assert "analysis to=functions.get_weather" in row and "refused: `analysis-channel-call`" in row
    assert "analysis-channel-call" in REASONS
    # Both places of the recipient, as llama.cpp's gpt-oss parser reads them, are refused under that name.
    for reply in ('<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{"location": "Paris"}',
                  ' to=functions.get_weather<|channel|>analysis <|constrain|>json<|message|>{"location": "Paris"}'):
        parsed = families.parse("harmony", reply, "<|start|>assistant")
        assert parsed.deviation == "analysis-channel-call" and not parsed.calls and parsed.content
