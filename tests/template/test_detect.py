"""Detection from the template itself, over every pinned template: each is detected as the
family that reads its rendered probe call back, or as none with a reason; a whole tool conversation renders."""

import json
from pathlib import Path

import pytest

from harness.template.conformance import full_conversation_renders
from harness.template.detect import detect, resolve
from harness.pins.sources import list_templates, resolve_template

# What each pinned template trains its model to write, kept as data beside this file (a person's judgement,
# not detection's output: a new pin adds its line there). null: tools never reach the rendered text, or a wall
# (harness/walls.yaml) — the reason is asserted below.
EXPECTED_PATH = Path(__file__).with_name("expected_families.json")
EXPECTED = json.loads(EXPECTED_PATH.read_text(encoding="utf-8"))
# Templates that fail the full tool conversation under Hugging Face's own rendering (transformers fails
# the same way; tests/template/test_render.py proves it), each for the reason given.
FULL_CONVERSATION_FAILS = {
    "Kimi-K2-Instruct": "append",
    "Kimi-K2-Thinking": "append",
    "llama-cpp-deepseek-r1": "generator",
    "google-gemma-2-2b-it": "System role not supported",
}
PINNED = [pin.id for pin in list_templates()]


def test_every_pinned_template_has_an_expectation():
    missing = {t: detect_text(t) for t in PINNED if t not in EXPECTED}
    stale = sorted(set(EXPECTED) - set(PINNED))
    assert not missing and not stale, (
        f"{EXPECTED_PATH.name}: add the family each new pin's model writes (detection says "
        f"{json.dumps(missing)}; check it against the model card), and drop entries no longer pinned: {stale}")


def detect_text(template_id):
    ref = resolve_template(template_id)
    return detect(ref.text, ref.bos_token or "", ref.eos_token or "").family


@pytest.mark.parametrize("template_id", PINNED)
def test_detection(template_id):
    ref = resolve_template(template_id)
    found = detect(ref.text, ref.bos_token or "", ref.eos_token or "")
    assert found.family == EXPECTED[template_id], found.reason
    if found.family:
        assert found.matches == (found.family,), "two families read the same rendered call"
        assert "get_weather" in found.rendered_call
    else:
        assert found.reason


@pytest.mark.parametrize("template_id", PINNED)
def test_full_tool_conversation_renders(template_id):
    ref = resolve_template(template_id)
    found = detect(ref.text, ref.bos_token or "", ref.eos_token or "")
    ok, error = full_conversation_renders(ref.text, ref.bos_token or "", ref.eos_token or "", found.arguments_style,
                                          found.carrier)
    if template_id in FULL_CONVERSATION_FAILS:
        assert not ok and FULL_CONVERSATION_FAILS[template_id] in error
    else:
        assert ok, error


def test_auto_none_and_explicit_settings():
    qwen = resolve_template("Qwen-Qwen2.5-7B-Instruct")
    assert resolve("auto", qwen.text, qwen.bos_token, qwen.eos_token) == ("hermes", None)
    assert resolve("none", qwen.text) == (None, None)
    assert resolve("llama3", qwen.text) == ("llama3", None)
    phi = resolve_template("microsoft-Phi-3.5-mini-instruct")
    family, notice = resolve("auto", phi.text, phi.bos_token, phi.eos_token)
    assert family is None and "tool_format" in notice and "tools" in notice


def test_detection_does_not_fingerprint_source_text():
    # The same template with its instructions reworded is detected the same way: only rendering counts.
    qwen = resolve_template("Qwen-Qwen2.5-7B-Instruct").text
    reworded = qwen.replace("You are provided with function signatures", "Here are the function signatures")
    assert reworded != qwen and detect(reworded).family == "hermes"
    # ...and a template that advertises a format in prose but renders no call is not detected.
    prose_only = "{% for m in messages %}{{ m.content }}{% endfor %}{# <tool_call> hermes #}"
    assert detect(prose_only).family is None
