"""The generation primitive, run through llama.cpp (llama-cpp-python 0.3.36) on stand-in GGUFs built here.

Each stand-in has a real family vocabulary and weights that script its replies (harness.scripted), so every
assertion below is about what the binding and harness.backends.embedded.generate do with real tokens: control tokens, byte
tokens, end-of-generation tokens, grammars, deadlines and batched samples. No part of the model is mocked.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requirements

requirements.binding()     # llama.cpp itself compiles and samples these grammars

import llama_cpp  # noqa: E402

from harness.core.errors import GenerationError, ModelLoadError
from harness.backends.embedded.generate import (
    StreamHoldback, generate, generate_samples, load_model, prompt_token_ids,
)
from harness.backends.embedded.decoding import token_bytes
from harness.scripted import Script, Turn, build_standin, vocab_for

# --- conversations the stand-ins are scripted for ----------------------------------------------------

QWEN_P1 = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
           "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n")
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
QWEN_P2 = (QWEN_P1 + HERMES_CALL + "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"sky\": \"sunny\"}\n"
           "</tool_response><|im_end|>\n<|im_start|>assistant\n")
QWEN_ANSWER = "It is sunny in Paris."

LLAMA_PROMPT = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is the weather in Paris?"
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
LLAMA_CALL = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}'

MISTRAL_PROMPT = "<s>[AVAILABLE_TOOLS][{\"name\": \"get_weather\"}][/AVAILABLE_TOOLS][INST]Weather in Paris?[/INST]"
MISTRAL_CALL = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]'

CAFE = "Café 🙂"  # é is 2 bytes, 🙂 4 bytes; scripted one byte token at a time below
CAFE_BYTES = ("Ca", "f", b"\xc3", b"\xa9", " ", b"\xf0", b"\x9f", b"\x99", b"\x82")

# First-order triggers: control tokens a short raw prompt ends with. The replies stay below the positions
# the turns own (checked in the fixture), or live in a model without turns ("qwen-lookup").
Q_CAFE, Q_LOOP, Q_EOT = "<|box_start|>", "<|quad_start|>", "<|vision_end|>"
L_PLAIN = "<|reserved_special_token_10|>"
M_CAFE, M_CHOICE = "[TOOL_RESULTS]", "[/TOOL_RESULTS]"

CHOICES = ["yes", "no", "maybe", "perhaps", "never", "always"]
CHOICE_GRAMMAR = "root ::= " + " | ".join(f'"{c}"' for c in CHOICES)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("standins")
    out = {}

    v = vocab_for("qwen2.5")
    q = build_standin(tmp / "qwen.gguf", "qwen2.5", [
        Turn(len(v.prompt_ids(QWEN_P1)), (*v.prompt_ids(HERMES_CALL), "<|im_end|>")),
        Turn(len(v.prompt_ids(QWEN_P2)), (*v.prompt_ids(QWEN_ANSWER), "<|im_end|>")),
    ])
    out["qwen"] = (q, load_model(q.path, n_ctx=1024, n_threads=2))
    # Replies that run long (a loop) would run into the turns' positions: a model of their own.
    ql = build_standin(tmp / "qwen-lookup.gguf", "qwen2.5", [
        Script(Q_CAFE, (*CAFE_BYTES, "<|im_end|>")),
        Script(Q_LOOP, ("ping", " pong"), loop=True),
        Script(Q_EOT, ("Done", "<|endoftext|>")),  # an end-of-generation token other than the eos id
    ])
    out["qwen-lookup"] = (ql, load_model(ql.path, n_ctx=4096, n_threads=2))

    v = vocab_for("llama3.1")
    ll = build_standin(tmp / "llama.gguf", "llama3.1", [
        Turn(len(v.prompt_ids(LLAMA_PROMPT)), (*v.prompt_ids(LLAMA_CALL)[1:], "<|eom_id|>")),  # [1:]: BOS
        Script(L_PLAIN, ("Hello", " world", "<|eot_id|>")),
    ])
    assert min(ll.turn_positions) > 8
    out["llama"] = (ll, load_model(ll.path, n_ctx=1024, n_threads=2))

    v = vocab_for("mistral")
    m = build_standin(tmp / "mistral.gguf", "mistral", [
        # Spelt, not tokenized: SentencePiece would start the text after [TOOL_CALLS] with a space ("▁[").
        Turn(len(v.prompt_ids(MISTRAL_PROMPT)),
             ("[TOOL_CALLS]", *v.segment(MISTRAL_CALL.removeprefix("[TOOL_CALLS]"), repeats=True), "</s>")),
        Script(M_CAFE, (*CAFE_BYTES, "</s>")),
        Script(M_CHOICE, ("Hello", "</s>")),
    ])
    assert min(m.turn_positions) > 16
    out["mistral"] = (m, load_model(m.path, n_ctx=1024, n_threads=2))
    return out


def run(models, family, prompt, **kw):
    kw.setdefault("max_tokens", 64)
    kw.setdefault("seed", 7)
    return generate(models[family][1], prompt, **kw)


# --- replies, special tokens, end of generation -----------------------------------------------------

def test_hermes_call_then_answer_across_two_turns(models):
    standin, llm = models["qwen"]
    first = run(models, "qwen", QWEN_P1)
    assert first.text == HERMES_CALL
    assert first.finish_reason == "stop"
    assert first.tokens[-1] == standin.id("<|im_end|>")  # recorded, but its text is not in the reply
    assert "<|im_end|>" not in first.text
    assert first.prompt_tokens == len(prompt_token_ids(llm, QWEN_P1))
    assert first.completion_tokens == len(first.tokens)
    # The second turn extends the first prompt: the binding re-reads only the new part; the reply is new.
    second = run(models, "qwen", QWEN_P2)
    assert (second.text, second.finish_reason) == (QWEN_ANSWER, "stop")


@pytest.mark.parametrize("family, prompt, call, end", [
    ("llama", LLAMA_PROMPT, LLAMA_CALL, "<|eom_id|>"),
    ("mistral", MISTRAL_PROMPT, MISTRAL_CALL, "</s>"),
])
def test_control_token_markers_survive_as_text(models, family, prompt, call, end):
    standin, llm = models[family]
    g = run(models, family, prompt)
    assert g.text == call
    assert (g.finish_reason, g.tokens[-1]) == ("stop", standin.id(end))
    marker = call[:call.index("{") if family == "llama" else call.index("[{")]
    assert llama_cpp.llama_vocab_get_attr(llm._model.vocab, g.tokens[0]) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    # Why the primitive exists: the binding's own completion drops control tokens from its text. (It also
    # always adds BOS, so it gets the prompt without one; the stand-in's reply depends on the prompt length.)
    bos_text = llm.detokenize([llm.token_bos()], special=True).decode()
    binding = llm.create_completion(prompt.removeprefix(bos_text), max_tokens=64, seed=7)["choices"][0]["text"]
    assert marker not in binding and call[len(marker):] in binding


@pytest.mark.parametrize("family, trigger", [("qwen-lookup", Q_CAFE), ("mistral", M_CAFE)])
def test_utf8_character_split_across_byte_tokens_comes_out_whole(models, family, trigger):
    standin, llm = models[family]
    chunks = []
    g = run(models, family, "Say it" + trigger, on_text=chunks.append)
    assert g.text == CAFE and g.finish_reason == "stop"
    pieces = [token_bytes(llm, t) for t in g.tokens[:-1]]
    assert b"".join(pieces) == CAFE.encode("utf-8")
    lone = [p for p in pieces if len(p) == 1 and p[0] >= 0x80]
    assert len(lone) == 6  # the two bytes of é and the four of 🙂, each its own token
    with pytest.raises(UnicodeDecodeError):
        lone[0].decode("utf-8")
    assert "".join(chunks) == CAFE and all("\ufffd" not in c for c in chunks)


def test_any_end_of_generation_token_ends_the_reply(models):
    standin, llm = models["qwen-lookup"]
    endoftext = standin.id("<|endoftext|>")
    assert endoftext != llm.token_eos() and llama_cpp.llama_vocab_is_eog(llm._model.vocab, endoftext)
    g = run(models, "qwen-lookup", "x" + Q_EOT)
    assert (g.text, g.finish_reason, g.tokens[-1]) == ("Done", "stop", endoftext)


def test_prompt_special_tokens_parsed_and_bos_written_once(models):
    standin, llm = models["llama"]
    bos = standin.id("<|begin_of_text|>")
    with_bos = prompt_token_ids(llm, LLAMA_PROMPT)
    without = prompt_token_ids(llm, LLAMA_PROMPT[len("<|begin_of_text|>"):])
    assert with_bos == without and with_bos.count(bos) == 1 and with_bos[0] == bos
    assert standin.id("<|eot_id|>") in with_bos  # parsed as the control token, not spelt out
    qwen, qllm = models["qwen"]
    assert prompt_token_ids(qllm, QWEN_P1)[0] == qwen.id("<|im_start|>")  # Qwen adds no BOS


# --- limits: max_tokens, context window, deadline ---------------------------------------------------

def test_reply_that_never_stops_is_cut_at_max_tokens(models):
    g = run(models, "qwen-lookup", "go" + Q_LOOP, max_tokens=7)
    assert (g.finish_reason, g.completion_tokens) == ("length", 7)
    assert g.text == "ping pongping pongping pongping"


def test_reply_is_cut_at_the_context_window(models):
    standin, _ = models["qwen-lookup"]
    llm = load_model(standin.path, n_ctx=64, n_threads=2)
    g = generate(llm, "go" + Q_LOOP, max_tokens=10_000, seed=1)
    assert llm.n_ctx() >= 64  # llama.cpp rounds the context up (to 256)
    assert g.finish_reason == "length" and g.prompt_tokens + g.completion_tokens == llm.n_ctx()


def test_timeout_stops_a_reply_that_never_ends(models):
    started = time.monotonic()
    g = run(models, "qwen-lookup", "go" + Q_LOOP, max_tokens=100_000, timeout=0.25)
    elapsed = time.monotonic() - started
    assert g.finish_reason == "deadline"
    assert 0 < g.completion_tokens < 4000 and elapsed < 5
    assert g.timings.prompt_seconds + g.timings.generation_seconds == pytest.approx(elapsed, abs=0.2)


def test_deadline_already_past_returns_at_once(models):
    g = run(models, "qwen", QWEN_P1, deadline=time.monotonic() - 1)
    assert (g.finish_reason, g.text, g.tokens) == ("deadline", "", [])


# --- grammar, seeds, stop strings --------------------------------------------------------------------

def test_grammar_overrides_the_scripted_reply(models):
    g = run(models, "qwen", QWEN_P1, grammar='root ::= "no" " call"')
    assert (g.text, g.finish_reason) == ("no call", "stop")
    g = run(models, "qwen", QWEN_P1, grammar=llama_cpp.LlamaGrammar.from_string('root ::= "ok"', verbose=False))
    assert g.text == "ok"


def test_grammar_can_force_a_control_token(models):
    standin, _ = models["mistral"]
    g = run(models, "mistral", "x" + M_CAFE, grammar=f'root ::= <[{standin.id("[TOOL_CALLS]")}]> "[]"')
    assert (g.text, g.finish_reason) == ("[TOOL_CALLS][]", "stop")


def test_same_seed_same_reply_and_seeds_vary_it(models):
    # Under the grammar every allowed token has the same logit, so only the seed decides.
    replies = {s: run(models, "mistral", "x" + M_CHOICE, grammar=CHOICE_GRAMMAR, temperature=1.0, seed=s)
               for s in range(1, 9)}
    assert all(g.text in CHOICES and g.finish_reason == "stop" for g in replies.values())
    assert len({g.text for g in replies.values()}) >= 3
    again = run(models, "mistral", "x" + M_CHOICE, grammar=CHOICE_GRAMMAR, temperature=1.0, seed=5)
    assert (again.text, again.tokens) == (replies[5].text, replies[5].tokens)


def test_stop_string_cuts_the_reply_and_the_stream(models):
    chunks = []
    g = run(models, "qwen", QWEN_P1, stop_strings=['"arguments"', "never"], on_text=chunks.append)
    assert g.finish_reason == "stop_string"
    assert g.text == HERMES_CALL[:HERMES_CALL.index('"arguments"')]
    assert "".join(chunks) == g.text  # nothing past the cut was ever streamed


def test_stream_holdback_on_real_replies(models):
    cases = [("qwen", QWEN_P1, ["<tool_call>"], False, ""),
             ("mistral", MISTRAL_PROMPT, ["[TOOL_CALLS]"], False, ""),
             ("llama", LLAMA_PROMPT, ["<|python_tag|>"], True, ""),
             ("llama", "hi" + L_PLAIN, ["<|python_tag|>"], True, "Hello world")]
    for family, prompt, markers, whole, shown in cases:
        hold = StreamHoldback(markers, whole_reply=whole)
        out = []
        g = run(models, family, prompt, on_text=lambda c: out.append(hold.feed(c)))
        out.append(hold.finish())
        assert "".join(out) == shown, family
        assert hold.withheld == ("" if shown else g.text)


def test_bad_requests_fail_clearly(models, tmp_path):
    with pytest.raises(GenerationError, match="grammar"):
        run(models, "qwen", QWEN_P1, grammar="root ::= (")
    with pytest.raises(GenerationError, match="empty prompt"):
        run(models, "qwen", "")
    with pytest.raises(GenerationError, match="context window"):
        run(models, "qwen", "word " * 5000)
    with pytest.raises(GenerationError, match="max_tokens"):
        run(models, "qwen", QWEN_P1, max_tokens=0)
    with pytest.raises(GenerationError, match="seeds"):
        generate_samples(models["qwen"][1], QWEN_P1, 3, seeds=[1, 2], max_tokens=4)
    with pytest.raises(ModelLoadError, match="not found"):
        load_model(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelLoadError):
        load_model(tmp_path / "junk.gguf")
    assert run(models, "qwen", QWEN_P1).text == HERMES_CALL  # the model still works afterwards


# --- batched samples ---------------------------------------------------------------------------------

def test_samples_read_the_prompt_once(models):
    standin, llm = models["qwen"]
    s = generate_samples(llm, QWEN_P1, 4, seeds=[1, 2, 3, 4], max_tokens=64, temperature=0.8)
    assert [g.text for g in s.generations] == [HERMES_CALL] * 4
    assert all(g.finish_reason == "stop" for g in s.generations)
    n_prompt = s.generations[0].prompt_tokens
    assert s.prompt_tokens_evaluated == n_prompt
    # llama.cpp's own count: the prompt once, then each sample's tokens but its last (nothing follows it);
    # +1 because llama.cpp reports at least one single-token decode. Four prompt reads would add 3 * n_prompt.
    expected = n_prompt + sum(g.completion_tokens - 1 for g in s.generations)
    assert expected <= s.decoded_tokens <= expected + 1


def test_each_sample_equals_generate_with_its_seed(models):
    # Exact here because the stand-in's logits are exact: this checks the sampler chains and seeds. (On a real
    # model batched logits differ in the last bits, see harness/backends/embedded/batch.py.)
    _, llm = models["mistral"]
    seeds = [11, 12, 13, 14, 15, 16]
    s = generate_samples(llm, "x" + M_CHOICE, len(seeds), seeds=seeds, max_tokens=16, temperature=1.0,
                         grammar=CHOICE_GRAMMAR)
    singles = [generate(llm, "x" + M_CHOICE, max_tokens=16, temperature=1.0, grammar=CHOICE_GRAMMAR, seed=seed)
               for seed in seeds]
    assert [(g.text, g.tokens, g.seed) for g in s.generations] == [(g.text, g.tokens, g.seed) for g in singles]
    assert len({len(g.tokens) for g in s.generations}) >= 2  # samples finished at different steps


def test_samples_stop_at_max_tokens_and_deadline(models):
    _, llm = models["qwen-lookup"]
    s = generate_samples(llm, "go" + Q_LOOP, 3, seeds=[1, 2, 3], max_tokens=5)
    assert [(g.finish_reason, g.text) for g in s.generations] == [("length", "ping pongping pongping")] * 3
    s = generate_samples(llm, "go" + Q_LOOP, 2, seeds=[1, 2], max_tokens=100_000, timeout=0.25)
    assert all(g.finish_reason == "deadline" and 0 < g.completion_tokens < 4000 for g in s.generations)
    s = generate_samples(models["qwen"][1], QWEN_P1, 2, seeds=[1, 2], max_tokens=64, stop_strings=["</tool_call>"])
    assert [g.text for g in s.generations] == [HERMES_CALL[:-len("</tool_call>")]] * 2


# --- loading --------------------------------------------------------------------------------------------

QUANTIZED_RUN = """
import sys
from harness.scripted import Script, build_standin
from harness.backends.embedded.generate import generate, load_model
s = build_standin(sys.argv[1], "qwen2.5", [Script("<|box_start|>", ("Hello", " world", "<|im_end|>"))], quantized=True)
llm = load_model(s.path, n_ctx=512, n_threads=2)
assert llm.model_params.use_extra_bufts is False
print(generate(llm, "one two three four " * 40 + "<|box_start|>", max_tokens=8, seed=1).text)
"""


def test_quantized_weights_decode_a_long_prompt(tmp_path):
    # On this project's VM, llama.cpp's AMX weight buffers die with SIGILL on a multi-token decode of quantized
    # weights (a native build sees amx_tile in the CPU flags; the hypervisor faults on it). load_model keeps
    # weights out of the extra buffer types. In a subprocess, so a crash fails this test and not the session.
    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": f"{root}{':'}{root / 'tests'}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(QUANTIZED_RUN), str(tmp_path / "q8.gguf")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == "Hello world"


def test_load_model_leaves_the_binding_defaults_alone(models):
    assert models["mistral"][1].model_params.use_extra_bufts is False
    assert llama_cpp.llama_model_default_params().use_extra_bufts is True


def test_prompts_of_two_kinds_in_turn_keep_a_context_each(models):
    """Fallback sends the model's own prompt and then a retry that opens otherwise, at every step. One context
    would read each whole again; the backend keeps a context per kind and sends each prompt to the one holding
    most of it, so the grown first prompt reads only its new end (llama.cpp's own count of decoded tokens), and
    every reply is the one context's reply."""
    from harness.backends.embedded.backend import EmbeddedBackend

    standin, _ = models["qwen-lookup"]
    own = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi" + Q_CAFE
    retry = "You can call these tools: none. Reply in plain text.\n<|im_start|>user\nHi" + Q_EOT
    grown = own + CAFE + "<|im_end|>\n<|im_start|>user\nAgain" + Q_CAFE
    sampling = {"max_tokens": 16, "temperature": 0.0}

    pooled = EmbeddedBackend.load(standin.path, n_ctx=1024, n_threads=2)
    single = EmbeddedBackend(load_model(standin.path, n_ctx=1024, n_threads=2), str(standin.path))
    try:
        replies = {b: [b.complete(p, sampling, seed=7).text for p in (own, retry, grown)] for b in (pooled, single)}
        assert replies[pooled] == replies[single] == [CAFE, "Done", CAFE]
        assert len(pooled._contexts) == 2 and len(single._contexts) == 1
        kept = len(prompt_token_ids(single.llm, own))
        # The pooled backend read `own` once; the single one read it again inside `grown`.
        assert single.decoded_tokens() - pooled.decoded_tokens() >= kept - 1
    finally:
        pooled.close()
        single.close()


def test_a_request_asked_again_is_answered_with_the_reply_already_written(models):
    """Fallback's first attempt is native's request: the backend hands back the reply it wrote, marked reused,
    decoding nothing (llama.cpp's own count). Another seed, other sampling, or a reply its deadline cut is written
    afresh; forget() drops what was kept."""
    from harness.backends.embedded.backend import EmbeddedBackend

    standin, _ = models["qwen-lookup"]
    prompt = "<|im_start|>user\nHi" + Q_CAFE
    sampling = {"max_tokens": 16, "temperature": 0.0}
    backend = EmbeddedBackend.load(standin.path, n_ctx=1024, n_threads=2)
    try:
        first = backend.complete(prompt, sampling, seed=7)
        decoded = backend.decoded_tokens()
        again = backend.complete(prompt, sampling, seed=7)
        assert (again.text, again.tokens, again.reused, first.reused) == (first.text, first.tokens, True, False)
        assert again.timings.prompt_seconds == again.timings.generation_seconds == 0.0
        assert backend.decoded_tokens() == decoded
        for changed in (dict(seed=8), dict(sampling={**sampling, "max_tokens": 15})):
            reply = backend.complete(prompt, changed.get("sampling", sampling), seed=changed.get("seed", 7))
            assert not reply.reused and reply.text == CAFE
        cut = backend.complete(prompt + " ", sampling, seed=7, timeout=1e-9)
        assert cut.finish_reason == "deadline"
        assert not backend.complete(prompt + " ", sampling, seed=7).reused
        backend.forget()
        assert not backend.complete(prompt, sampling, seed=7).reused
    finally:
        backend.close()
