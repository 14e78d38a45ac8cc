"""Rotary scripted models (harness.scripted.rotary): a llama GGUF whose reply is keyed to the prompt's length with no
learned positions. Checked three ways: the numpy forward pass of the file as written, llama.cpp's greedy
generation, and (where its environment is built) mistral.rs through the harness' worker."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core import constants
from harness.scripted import Turn
from harness.scripted.plan import reply_ids
from harness.scripted.rotary import BOS_PREFIX, build_rotary, layout, rotary_vocab, with_bos
from harness.scripted.rotary_forward import forward, head_rows, read_tensors
from harness.scripted.rotary import HEAD_DIM, ROPE_BASE

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'
PROSE = "Sunny, then cloudy."
# A short prompt, one past 4,000 (where a position feature moves by a part in 16,000 per token), one near the end.
AFTERS = (12, 4001, 8000)


def _model(tmp_path, profile="gpt2", template=None):
    vocab = rotary_vocab(profile)
    replies = [reply_ids(vocab, CALL if k % 2 == 0 else PROSE) for k in range(len(AFTERS))]
    s = build_rotary(tmp_path / f"{profile}.gguf", profile, [Turn(a, r) for a, r in zip(AFTERS, replies)],
                     vocab=vocab, template=template)
    return s, replies


def _prompt(vocab, n, seed=0):
    """n prompt tokens: BOS, then random tokens that are not BOS (what they say changes nothing)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, len(vocab) - 1, size=n)
    ids = np.where(ids == vocab.id(vocab.profile.bos), 0, ids)
    ids[0] = vocab.id(vocab.profile.bos)
    return ids


def test_the_vocabulary_adds_no_bos_and_the_template_writes_one():
    for profile in ("gpt2", "qwen2.5", "llama3.1"):
        p = rotary_vocab(profile).profile
        assert not p.add_bos and p.bos not in (None, p.end_of_turn)
    assert rotary_vocab("gpt2").profile.bos == "<|startoftext|>"      # GPT-2's only special token ends the turn
    assert with_bos("{{ messages }}", renders_bos=False) == BOS_PREFIX + "{{ messages }}"
    assert with_bos("{{ bos_token }}x", renders_bos=True) == "{{ bos_token }}x"


def test_the_forward_pass_of_the_written_file_writes_each_reply_after_its_prompt_length(tmp_path):
    s, replies = _model(tmp_path)
    tensors, head, eps = read_tensors(s.path)
    rows, weights = head_rows(head)
    eot = s.vocab.id(s.profile.end_of_turn)
    for seed, (after, reply) in enumerate(zip(AFTERS, replies)):
        # the prompt, then the reply fed back as a runtime does: the next token at each position is the script's
        ids = np.concatenate([_prompt(s.vocab, after, seed), reply[:-1]])
        logits = forward(tensors, weights, ids, eps, ROPE_BASE, HEAD_DIM)
        written = [int(rows[j]) for j in logits[after - 1:].argmax(-1)]
        assert written == list(reply), after
        top = np.sort(logits[after - 1:], axis=-1)
        assert (top[:, -1] - np.maximum(top[:, -2], 0)).min() > 25      # the builder's margin, in the file
        # one token short of the prompt length the model writes its end of turn, not the reply
        assert int(rows[logits[after - 2].argmax()]) == eot
    assert layout([1, 2, 3]).n_embd == 32


def test_turns_that_are_not_turns_or_a_vocabulary_that_adds_bos_are_refused(tmp_path):
    from harness.scripted import Script, vocab_for

    with pytest.raises(ValueError, match="BOS of its own"):
        build_rotary(tmp_path / "x.gguf", "llama3.1", [Turn(5, ("a",))], vocab=vocab_for("llama3.1"))
    with pytest.raises(ValueError, match="turns"):
        build_rotary(tmp_path / "x.gguf", "gpt2", [Script("a", ("b",))])


@pytest.mark.needs_binding
def test_llama_cpp_writes_each_reply_after_exactly_its_prompt_length(tmp_path):
    """Greedy generation in llama.cpp. Its default f16 V cache without flash attention rounds the attention weights
    to f16 (a part in 2,000), which loses positions past ~1,000: the cache is f32 here, as mistral.rs is run."""
    from llama_cpp import Llama

    s, replies = _model(tmp_path)
    eot = s.vocab.id(s.profile.end_of_turn)
    llm = Llama(str(s.path), n_ctx=8192, type_k=0, type_v=0, flash_attn=False, verbose=False, n_threads=2)
    for seed, (after, reply) in enumerate(zip(AFTERS, replies)):
        for n, want in ((after, list(reply)), (after + 1, None)):
            llm.reset()
            out = []
            for token in llm.generate(_prompt(s.vocab, n, seed).tolist(), temp=0.0, top_k=1):
                out.append(token)
                if token == eot or len(out) > len(reply):
                    break
            if want is not None:
                assert out == want, after
            else:      # a token longer: the reply's second token on, not its start (positions, not text, key it)
                assert out == list(reply[1:]), after


@pytest.mark.needs_binding
def test_llama_cpp_gives_the_logits_of_the_numpy_forward_pass(tmp_path):
    """The first reply, token by token: llama.cpp's logits of every scripted token and the end of turn equal the
    numpy pass of the file's weights to 1% of the largest (llama.cpp runs the Q8_0 head on activations rounded to
    8 bits against the largest of their block: 52.90 there for 53.57)."""
    from llama_cpp import Llama

    s, replies = _model(tmp_path)
    tensors, head, eps = read_tensors(s.path)
    rows, weights = head_rows(head)
    ids = np.concatenate([_prompt(s.vocab, AFTERS[0]), replies[0][:-1]])
    ours = forward(tensors, weights, ids, eps, ROPE_BASE, HEAD_DIM)
    llm = Llama(str(s.path), n_ctx=64, logits_all=True, type_k=0, type_v=0, flash_attn=False, verbose=False)
    llm.eval(ids.tolist())
    theirs = np.asarray(llm.scores[:len(ids)])[:, rows]
    scripted = ours[AFTERS[0] - 1:]
    np.testing.assert_allclose(theirs[AFTERS[0] - 1:], scripted, atol=0.01 * np.abs(scripted).max())
    assert list(rows[theirs[AFTERS[0] - 1:].argmax(-1)]) == list(replies[0])


@pytest.mark.needs_mistralrs
def test_mistralrs_writes_the_scripted_reply_through_the_worker(tmp_path):
    from harness.backends.chat_answers import chat_answer
    from harness.backends.servers import LocalServer
    from harness.scripted.vocab import CONTEXT_LENGTH

    template = (constants.TEMPLATES_DIR / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
    vocab = rotary_vocab("qwen2.5")
    reply = reply_ids(vocab, PROSE)
    words = {n: " ".join(["word"] * n) for n in (3, 3000)}
    # our count of the prompt mistral.rs renders: BOS (the template's prefix), then the template's text
    from harness.template import render as rendering
    count = {n: len(vocab.prompt_ids(vocab.profile.bos + rendering.render(
        template, [{"role": "user", "content": w}], add_generation_prompt=True))) for n, w in words.items()}
    path = tmp_path / "q.gguf"
    build_rotary(path, "qwen2.5", [Turn(count[n], reply) for n in words], vocab=vocab,
                 template=with_bos(template, renders_bos=False))
    with LocalServer("mistralrs", path, alias="q", ready_timeout=300, n_ctx=CONTEXT_LENGTH) as server:
        for n, text in words.items():
            body = {"model": "q", "messages": [{"role": "user", "content": text}], "max_tokens": 20,
                    "temperature": 0.0}
            answer = chat_answer(server.base_url + "/v1/chat/completions", body, 300)
            assert answer["prompt_tokens"] == count[n]
            assert answer["content"] == PROSE and answer["completion_tokens"] == len(reply), n


@pytest.mark.needs_binding
def test_the_suite_builds_rotary_models_for_mistralrs_with_one_bos_and_gpt2_ones_for_llama_cpp(tmp_path):
    from harness.suites.runtime_conformance.corpus import build_corpus
    from harness.suites.runtime_conformance.driver import TemplateRun
    from harness.pins.sources import load_sources, resolve_template

    ref = resolve_template("Qwen-Qwen2.5-7B-Instruct", load_sources())
    corpus = build_corpus(ref)
    gpt2 = TemplateRun("llama-server", "x", ref, corpus, tmp_path, writer=None, log=None)
    # Qwen2.5's vocabulary with the hermes family's markers as tokens (<think> added), in the name
    assert (gpt2.arch, gpt2.stem, gpt2.template) == ("gpt2", f"{ref.id}-qwen2.5+hermes", ref.text)
    run = TemplateRun("mistralrs", "x", ref, corpus, tmp_path, writer=None, log=None)
    assert run.arch == "llama" and run.vocab is rotary_vocab("qwen2.5+hermes")
    assert run.stem == f"{ref.id}-qwen2.5+hermes-llama"
    # Qwen2.5's template writes no BOS: the model's template does, and a prompt holding a second one is refused
    prompts, refused = run._with_bos({"a": "<|im_start|>user\nhi", "b": "<|im_start|>user\n<|endoftext|>"})
    assert run.template == BOS_PREFIX + ref.text and prompts["a"] == "<|endoftext|><|im_start|>user\nhi"
    assert [name for name, _ in refused] == ["b"] and "more than once" in refused[0][1]


def test_the_margin_check_refuses_weights_that_do_not_write_the_script(tmp_path):
    from harness.scripted.rotary_forward import check_margins

    s, replies = _model(tmp_path)
    tensors, head, eps = read_tensors(s.path)
    eot, bos = s.vocab.id(s.profile.end_of_turn), s.vocab.id(s.profile.bos)
    by_position = {after - 1 + k: t for after, reply in zip(AFTERS, replies) for k, t in enumerate(reply)}
    check_margins(tensors, head, by_position, eot, bos, eps)          # the file as written passes
    # BOS's value a part in 1,000 too large: position 8,000 reads as 7,992
    tensors["blk.0.attn_v"] = tensors["blk.0.attn_v"] * 1.001
    with pytest.raises(ValueError, match="leads by only"):
        check_margins(tensors, head, by_position, eot, bos, eps)


def test_the_forward_pass_takes_a_zero_scored_head_as_its_softmax_and_any_other_head_in_full():
    """The uniform-attention shortcut (a head with no query and no key) against a softmax written out per position,
    beside a head whose queries and keys are not zero, so both paths of forward() are held to the definition."""
    rng = np.random.default_rng(0)
    n, d, heads, head_dim = 40, 8, 2, 4
    t = {name: rng.normal(size=shape).astype(np.float32) for name, shape in (
        ("token_embd", (16, d)), ("blk.0.attn_q", (d, d)), ("blk.0.attn_k", (d, d)), ("blk.0.attn_v", (d, d)),
        ("blk.0.attn_output", (d, d)), ("blk.0.ffn_gate", (6, d)), ("blk.0.ffn_up", (6, d)),
        ("blk.0.ffn_down", (d, 6)))}
    for name in ("blk.0.attn_norm", "blk.0.ffn_norm", "output_norm"):
        t[name] = np.ones(d, np.float32)
    t["blk.0.attn_q"][:head_dim] = 0      # head 0: no query and no key, so every score is 0
    t["blk.0.attn_k"][:head_dim] = 0
    head = rng.normal(size=(5, d)).astype(np.float32)
    ids = rng.integers(0, 16, size=n)
    got = forward(t, head, ids, 1e-5, ROPE_BASE, head_dim)

    def rms(x):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)

    x = t["token_embd"][ids].astype(np.float64)
    h = rms(x)
    q, k, v = (h @ t[f"blk.0.attn_{w}"].T for w in "qkv")
    angle = np.arange(n)[:, None] * (1.0 / ROPE_BASE ** (np.arange(0, head_dim, 2) / head_dim))[None, :]
    out = np.zeros((n, d))
    for i in range(n):
        for hd in range(heads):
            cols = slice(hd * head_dim, (hd + 1) * head_dim)

            def rope(m, rows):
                a = angle[rows]
                r = np.empty_like(m)
                r[:, 0::2] = m[:, 0::2] * np.cos(a) - m[:, 1::2] * np.sin(a)
                r[:, 1::2] = m[:, 0::2] * np.sin(a) + m[:, 1::2] * np.cos(a)
                return r

            scores = rope(k[: i + 1, cols], slice(0, i + 1)) @ rope(q[i:i + 1, cols], slice(i, i + 1)).T
            w = np.exp(scores[:, 0] / np.sqrt(head_dim) - scores.max() / np.sqrt(head_dim))
            out[i, cols] = (w / w.sum()) @ v[: i + 1, cols]
    x = x + out @ t["blk.0.attn_output"].T
    h = rms(x)
    gate, up = h @ t["blk.0.ffn_gate"].T, h @ t["blk.0.ffn_up"].T
    x = x + (gate / (1 + np.exp(-gate)) * up) @ t["blk.0.ffn_down"].T
    want = rms(x) @ head.T
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)
