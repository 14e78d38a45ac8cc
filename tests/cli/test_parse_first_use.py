"""`harness parse` and `harness detect` as a new user meets them: a wall whose family is known still parses, a
declared family is used and named, strict flag values, clear errors, readable human output, GGUF input."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIMI_CALL = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
             '{"location": "Paris", "days": 3}<|tool_call_end|><|tool_calls_section_end|>')
LFM2_CALL = "<|tool_call_start|>[get_weather(location='Paris', days=3)]<|tool_call_end|>"
PROBE = {"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}


def run(*args, stdin=""):
    proc = subprocess.run([sys.executable, "-m", "harness", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_wall_whose_family_detect_names_is_parsed_with_it_and_says_so():
    for template in ("Kimi-K2-Instruct", "Kimi-K2-Thinking"):
        code, out, err = run("detect", template, "--json")
        finding = json.loads(out)["findings"][0]
        assert code == 1 and (finding["name"], finding["family"]) == ("list-methods-refused", "kimi-k2")
        code, out, err = run("parse", "--template", template, "--json", stdin=KIMI_CALL)
        data = json.loads(out)
        assert code == 0, err
        assert (data["family"], data["family_from"], data["deviation"]) == ("kimi-k2", "list-methods-refused", None)
        assert data["calls"] == [PROBE]
        code, out, _ = run("parse", "--template", template, stdin=KIMI_CALL)
        assert code == 0 and out.startswith("family: kimi-k2 — ") and "list-methods-refused" in out


def test_a_declared_family_is_parsed_with_and_named_declared():
    for template in ("LFM2-8B-A1B", "LFM2.5-Instruct"):
        code, out, err = run("parse", "--template", template, "--json", stdin=LFM2_CALL)
        data = json.loads(out)
        assert code == 0, err
        assert (data["family"], data["family_from"], data["calls"]) == ("lfm2", "declared", [PROBE])
        code, out, _ = run("detect", template, "--json")
        data = json.loads(out)
        assert code == 0 and (data["status"], data["family"]) == ("declared", "lfm2")
        assert data["declared"]["model_card"].startswith("https://")


def test_the_family_source_is_in_every_answer():
    qwen = "templates/Qwen-Qwen3-0.6B.jinja"
    _, out, _ = run("parse", "--template", qwen, "--json", stdin="hi")
    assert json.loads(out)["family_from"] == "detected"
    _, out, _ = run("parse", "--template", qwen, "--family", "llama3", "--json", stdin="hi")
    assert json.loads(out)["family_from"] == "--family"
    code, out, _ = run("parse", "--template", "microsoft-Phi-3.5-mini-instruct", "--json", stdin="hi")
    data = json.loads(out)
    assert code == 0 and data["family"] is None and data["family_from"] is None and data["content"] == "hi"


def test_enable_thinking_takes_only_true_or_false():
    for word in ("no", "yes", "0", "1", "off", "True"):
        code, _, err = run("parse", "--template", "Qwen3.5-4B", "--enable-thinking", word, stdin="hi")
        assert code == 2 and "expected true or false" in err, word
    for word in ("true", "false"):
        code, _, err = run("parse", "--template", "Qwen3.5-4B", "--enable-thinking", word, "--json", stdin="hi")
        assert code in (0, 1) and "Traceback" not in err, err


def test_a_wall_with_no_family_is_an_error_that_says_what_to_do():
    code, out, err = run("parse", "--template", "llama-cpp-deepseek-r1", "--json", stdin="hi")
    assert code == 2 and out == ""
    assert "no family to read the reply with" in err and "--family" in err and "Traceback" not in err
    code, out, err = run("parse", "--template", "llama-cpp-deepseek-r1", "--family", "deepseek-r1", stdin="hi")
    assert code == 0, err


def test_human_output_has_no_none_and_no_python_reprs():
    call = '<tool_call>{"name": "f", "arguments": {"x": {"y": true, "z": null}, "s": "it\'s"}}</tool_call>'
    code, out, _ = run("parse", "--template", "Qwen-Qwen2.5-7B-Instruct", stdin=call)
    assert code == 0
    assert 'call: f {"x": {"y": true, "z": null}, "s": "it\'s"}' in out
    code, out, _ = run("parse", "--template", "Qwen-Qwen2.5-7B-Instruct", stdin='<|python_tag|>{"name": "f"}')
    assert code == 1 and "deviation: foreign-markers\n" in out
    assert "None" not in out and "{'" not in out and "True" not in out


def _gguf_with(tmp_path, template_id):
    import gguf
    from harness.pins.sources import resolve_template

    ref = resolve_template(template_id)
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_chat_template(ref.text)
    writer.add_token_list(["<unk>", "<|endoftext|>", "<|im_end|>"])
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_detect_and_parse_read_the_template_a_gguf_embeds(tmp_path):
    path = _gguf_with(tmp_path, "Qwen-Qwen2.5-7B-Instruct")
    code, out, err = run("detect", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["family"] == "hermes"
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'
    code, out, err = run("parse", "--template", str(path), "--json", stdin=call)
    assert code == 0 and json.loads(out)["calls"] == [PROBE], err
    empty = tmp_path / "empty.gguf"
    writer = __import__("gguf").GGUFWriter(str(empty), "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    code, _, err = run("detect", str(empty))
    assert code == 2 and "carries no tokenizer.chat_template" in err and "Traceback" not in err


def test_not_json_names_the_offset_of_the_error_not_of_the_value():
    call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {'location': 'Paris'}}\n</tool_call>"
    code, out, _ = run("parse", "--template", "Qwen-Qwen2.5-7B-Instruct", "--json", stdin=call)
    detail = json.loads(out)["detail"]
    error_at, value_at = call.index("'location'"), call.index("{")
    assert f"not JSON at offset {error_at}:" in detail and f"from offset {value_at}" in detail, detail


def _wall(tmp_path) -> Path:
    # Qwen2.5's template with the arguments printed as a Python dict: hermes markup, Python literals inside.
    text = (ROOT / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    path = tmp_path / "python-args.jinja"
    path.write_text(text.replace("tool_call.arguments | tojson", "tool_call.arguments"), encoding="utf-8")
    return path


def test_detect_on_a_wall_names_the_nearest_family_and_its_deviation(tmp_path):
    code, out, _ = run("detect", str(_wall(tmp_path)))
    assert code == 1 and "nearest family: hermes: python-literals" in out, out
    code, out, _ = run("detect", str(_wall(tmp_path)), "--json")
    assert json.loads(out)["nearest"][0]["family"] == "hermes"
    assert json.loads(out)["nearest"][0]["deviation"] == "python-literals"


def test_conformance_takes_an_unpinned_template_file_and_writes_nothing(tmp_path):
    results = sorted(p.name for p in (ROOT / "results").iterdir())
    code, out, err = run("conformance", "--template", str(_wall(tmp_path)), "--template", "Qwen-Qwen2.5-7B-Instruct")
    assert code == 1, err
    assert "python-args: none (wall)" in out and "Qwen-Qwen2.5-7B-Instruct: hermes (detected)" in out
    code, out, err = run("conformance", "--template", "Qwen-Qwen2.5-7B-Instruct", "--json")
    assert code == 0 and json.loads(out)["templates"][0]["round_trips"] is True, err
    assert sorted(p.name for p in (ROOT / "results").iterdir()) == results
