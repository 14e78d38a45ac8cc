"""Detection from the template itself, over every pinned template (seed ADR 0061): each is detected as the
family that reads its rendered probe call back, or as none with a reason; a whole tool conversation renders."""

import pytest

from harness.template.conformance import full_conversation_renders
from harness.template.detect import detect, resolve
from harness.pins.sources import list_templates, resolve_template

# What each pinned template trains its model to write. None: tools never reach the rendered text, or a wall
# (harness/walls.yaml) — the reason is asserted below.
EXPECTED = {
    'Apertus-8B-Instruct': 'apertus',
    'Apriel-1.6-15b-Thinker-fixed': 'apriel',
    'Bielik-11B-v3.0-Instruct': 'hermes',
    'ByteDance-Seed-OSS': 'seed-oss',
    'Cohere2MoE': 'command-r7b',
    'CohereForAI-c4ai-command-r-plus-tool_use': 'command-r-plus',
    'CohereForAI-c4ai-command-r7b-12-2024-tool_use': 'command-r7b',
    'GLM-4.6': 'glm',
    'GLM-4.7-Flash': 'glm',
    'GigaChat3-10B-A1.8B': 'gigachat3',
    'GigaChat3.1-10B-A1.8B': 'gigachat3.1',
    'HuggingFaceTB-SmolLM3-3B': None,
    'Kimi-K2-Instruct': None,
    'Kimi-K2-Thinking': None,
    'Kimi-K3': 'kimi-k3',
    'LFM2-8B-A1B': None,
    'LFM2.5-8B-A1B': 'lfm2',
    'LFM2.5-Instruct': None,
    'MiMo-VL': 'hermes',
    'MiniMax-M1': 'minimax-m1',
    'MiniMax-M2': 'minimax-m2',
    'MiniMax-M3': 'minimax-m3',
    'Mistral-Small-3.2-24B-Instruct-2506': 'mistral-call-id',
    'NVIDIA-Nemotron-3-Nano-30B-A3B-BF16': 'qwen-xml',
    'NVIDIA-Nemotron-Nano-v2': 'nemotron-v2',
    'NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use': 'hermes',
    'NousResearch-Hermes-3-Llama-3.1-8B-tool_use': 'hermes',
    'Qwen-QwQ-32B': 'hermes',
    'Qwen-Qwen2.5-7B-Instruct': 'hermes',
    'Qwen-Qwen3-0.6B': 'hermes',
    'Qwen3-Coder': 'qwen-xml',
    'Qwen3.5-4B': 'qwen-xml',
    'Reka-Edge': 'hermes',
    'Spark2.5': 'glm',
    'StepFun3.5-Flash': 'qwen-xml',
    'deepseek-ai-DeepSeek-R1-Distill-Llama-8B': None,
    'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B': None,
    'deepseek-ai-DeepSeek-V3.1': None,
    'deepseek-ai-DeepSeek-V3.2': 'deepseek-v3.2',
    'deepseek-ai-DeepSeek-V4': 'deepseek-v4',
    'deepseek-ai-DeepSeek-V4-Flash-0731': 'deepseek-v4',
    'fireworks-ai-llama-3-firefunction-v2': 'firefunction',
    'gguf-qwen2.5-coder-0.5b-instruct-q4_k_m': 'hermes',
    'gguf-qwen2.5-coder-1.5b-instruct-q4_k_m': 'hermes',
    'gguf-smollm2-135m-instruct-q4_1': None,
    'google-gemma-2-2b-it': None,
    'google-gemma-4-31B-it': 'gemma4',
    'google-gemma-4-31B-it-interleaved': 'gemma4',
    'ibm-granite-granite-3.3-2B-Instruct': None,
    'ibm-granite-granite-4.0': 'hermes',
    'ibm-granite-granite-4.1': 'hermes',
    'inclusionai-ling-3.0-flash': 'glm',
    'llama-cpp-deepseek-r1': None,
    'llama-cpp-rwkv-world': None,
    'meetkai-functionary-medium-v3.1': 'functionary-v3.1',
    'meetkai-functionary-medium-v3.2': 'functionary-v3.2',
    'meta-llama-Llama-3.1-8B-Instruct': 'llama3',
    'meta-llama-Llama-3.2-3B-Instruct': 'llama3',
    'meta-llama-Llama-3.3-70B-Instruct': 'llama3',
    'microsoft-Phi-3.5-mini-instruct': None,
    'mistralai-Ministral-3-14B-Reasoning-2512': 'mistral-args',
    'mistralai-Mistral-Nemo-Instruct-2407': 'mistral',
    'moonshotai-Kimi-K2': 'kimi-k2',
    'muse-glimmer': 'atem',
    'openai-gpt-oss-120b': 'harmony',
    'openbmb-MiniCPM5-1B': 'minicpm5',
    'poolside-Laguna-S-2.1': 'glm',
    'poolside-Laguna-XS-2.1': 'glm',
    'poolside-Laguna-XS.2': 'glm',
    'tencent-Hy3': 'hy3',
    'unsloth-Apriel-1.5': 'apriel',
    'unsloth-mistral-Devstral-Small-2507': 'mistral-args',
    'upstage-Solar-Open-100B': 'solar-open',
}
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
    assert sorted(PINNED) == sorted(EXPECTED)


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
