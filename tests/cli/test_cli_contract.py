"""The command-line contract other tools call: `harness detect --json` and `harness parse --json`."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = "templates/Qwen-Qwen3-0.6B.jinja"


def run(*args, stdin=""):
    proc = subprocess.run([sys.executable, "-m", "harness", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def test_detect_json_keys_and_values():
    code, out, err = run("detect", QWEN3, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {"family", "status", "reason", "rendered_call", "findings"}
    assert data["status"] == "detected" and data["findings"] == []
    assert data["family"] == "hermes" and '"name": "get_weather"' in data["rendered_call"]


def test_detect_accepts_an_unpinned_jinja_file(tmp_path):
    copy = tmp_path / "my-template.jinja"
    copy.write_text((ROOT / QWEN3).read_text(encoding="utf-8") + "\n{# a local edit #}", encoding="utf-8")
    code, out, _ = run("detect", str(copy), "--json")
    assert code == 0 and json.loads(out)["family"] == "hermes"


def test_detect_reports_a_tools_blind_template_as_none():
    code, out, _ = run("detect", "templates/google-gemma-2-2b-it.jinja", "--json")
    data = json.loads(out)
    assert code == 0 and data["family"] is None and data["status"] == "no tools" and "tools" in data["reason"]


def test_parse_json_reads_a_reply_with_reasoning():
    reply = '<think>need weather</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Rome"}}\n</tool_call>'
    code, out, err = run("parse", "--template", QWEN3, "--json", stdin=reply)
    assert code == 0, err
    data = json.loads(out)
    assert {"family", "calls", "content", "reasoning", "deviation"} <= set(data)
    assert data["calls"] == [{"name": "get_weather", "arguments": {"location": "Rome"}}]
    assert data["reasoning"] == "need weather" and data["deviation"] is None


def test_parse_json_names_the_deviation_and_keeps_the_text():
    reply = '{{"name": "get_weather", "arguments": {"location": "Rome"}}}'
    code, out, _ = run("parse", "--template", "templates/Qwen-Qwen2.5-7B-Instruct.jinja", "--json", stdin=reply)
    data = json.loads(out)
    assert code == 1 and data["calls"] == [] and data["deviation"] == "double-braces" and data["content"] == reply


def test_parse_with_an_explicit_family_overrides_detection():
    reply = '<|python_tag|>{"name": "get_weather", "parameters": {"location": "Rome"}}'
    code, out, _ = run("parse", "--template", QWEN3, "--family", "llama3", "--json", stdin=reply)
    assert code == 0 and json.loads(out)["calls"][0]["arguments"] == {"location": "Rome"}
    # A grammar-mode reply for a template without tools: generic-json, chosen by name, though never detected.
    code, out, _ = run("parse", "--template", QWEN3, "--family", "generic-json", "--json",
                       stdin='{"response": "It is 51."}')
    assert code == 0 and (json.loads(out)["content"], json.loads(out)["calls"]) == ("It is 51.", [])


def test_detect_exits_1_on_a_wall_and_names_its_findings():
    code, out, _ = run("detect", "Kimi-K2-Instruct", "--json")
    data = json.loads(out)
    assert code == 1 and data["status"] == "wall"
    assert [(f["name"], f["family"]) for f in data["findings"]] == [("list-methods-refused", "kimi-k2")]


QWEN35 = "templates/Qwen3.5-4B.jinja"
XML_CALL = ("<tool_call>\n<function=get_weather>\n<parameter=location>\nRome\n</parameter>\n"
            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"]}}}]


def test_parse_takes_the_template_variables_the_reply_was_generated_with():
    # Thinking on, the prompt opens <think>: the call is inside the reasoning. Thinking off, it is a call.
    code, out, _ = run("parse", "--template", QWEN35, "--json", stdin=XML_CALL)
    assert code == 1 and json.loads(out)["deviation"] == "call-in-reasoning"
    for switch in (["--enable-thinking", "false"], ["--template-kwarg", "enable_thinking=false"]):
        code, out, err = run("parse", "--template", QWEN35, *switch, "--json", stdin=XML_CALL)
        assert code == 0, err
        assert json.loads(out)["calls"] == [{"name": "get_weather", "arguments": {"location": "Rome", "days": "3"}}]


def test_parse_types_arguments_by_the_tools_schemas(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    code, out, err = run("parse", "--template", QWEN35, "--enable-thinking", "false", "--tools", str(tools), "--json",
                         stdin=XML_CALL)
    data = json.loads(out)
    assert code == 0, err
    assert data["calls"][0]["arguments"] == {"location": "Rome", "days": 3} and data["findings"] == []
    wrong = XML_CALL.replace("\n3\n", "\nthree\n")
    code, out, _ = run("parse", "--template", QWEN35, "--enable-thinking", "false", "--tools", str(tools), "--json",
                       stdin=wrong)
    [finding] = json.loads(out)["findings"]
    assert code == 1 and finding["name"] == "invalid-arguments" and "'days'" in finding["detail"]
    other = XML_CALL.replace("get_weather", "get_time")
    code, out, _ = run("parse", "--template", QWEN35, "--enable-thinking", "false", "--tools", str(tools), "--json",
                       stdin=other)
    assert code == 1 and json.loads(out)["findings"][0]["name"] == "unknown-tool"


def test_parse_refuses_a_malformed_template_kwarg_or_tools_file(tmp_path):
    code, _, err = run("parse", "--template", QWEN35, "--template-kwarg", "enable_thinking", stdin=XML_CALL)
    assert code == 2 and "KEY=VALUE" in err
    bad = tmp_path / "tools.json"
    bad.write_text('{"name": "get_weather"}', encoding="utf-8")
    code, _, err = run("parse", "--template", QWEN35, "--tools", str(bad), stdin=XML_CALL)
    assert code == 2 and "JSON list" in err and "Traceback" not in err


def test_a_missing_template_is_a_clear_error_without_traceback():
    code, _, err = run("detect", "templates/does-not-exist.jinja", "--json")
    assert code == 2 and "does not exist" in err and "Traceback" not in err


def test_every_subcommand_has_help():
    code, out, _ = run("--help")
    assert code == 0
    for command in ("detect", "parse", "conformance", "verify", "fetch"):
        assert command in out
        sub_code, sub_out, _ = run(command, "--help")
        assert sub_code == 0 and "usage:" in sub_out
