"""Constrained generation on stand-in GGUFs (harness.scripted): a required grammar turns a scripted model's bad
call into a valid one, the generic grammar holds a model without a tool format, a lazy grammar switches on at the
family's trigger token, and the GrammarGate samples only what the grammar allows, counting what it refused."""

from __future__ import annotations

import pytest
import requirements

requirements.binding()     # llama.cpp itself samples these grammars

import llama_cpp  # noqa: E402

from harness.grammar import build_grammar  # noqa: E402
from harness.formats import deviations as dev  # noqa: E402
from harness.schema.arguments import type_arguments  # noqa: E402
from harness.core.errors import GrammarRuntimeError  # noqa: E402
from harness.backends.embedded.grammar_sampler import GrammarGate  # noqa: E402
from harness.scripted import Profile, Turn, build_standin, vocab_for  # noqa: E402
from tests.grammar.test_grammar import PARAMS, TOOLS, fam  # noqa: E402

# SmolLM2 speaks GPT-2-style byte-level BPE (a 49k vocabulary); the GPT-2 vocabulary stands in for it, with a
# plain-text ChatML prompt. Its template has no tool section.
SMOL = Profile(name="gpt2-chatml", vocab_file="ggml-vocab-gpt-2.gguf", end_of_turn="<|endoftext|>", bos=None,
               add_bos=False, template=None, note="GPT-2 vocabulary, plain-text ChatML prompt")
PROMPT = "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n"
SMOL_REPLIES = {
    # Seed 004: Gemma printed the call as prose.
    "prose": "Sure, get_weather{} for Paris.",
    # A JSON reply with an enum value the tool does not take and an invented argument.
    "json": '{"name": "get_weather", "arguments": {"location": "Paris", "unit": "kelvin", "wind": 1}}',
}
RESCUED = '{"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}'
QWEN_PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
               "What is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n")
# Qwen2.5-0.5B's live near miss: double braces copied from its template; here with a bad enum too.
QWEN_NEAR_MISS = ('Checking. <tool_call>\n{{"name": "get_weather", "arguments": {"location": "Paris", '
                  '"unit": "kelvin"}}}\n</tool_call>')


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    from harness.backends.embedded.generate import load_model
    from harness.scripted import Vocab

    tmp = tmp_path_factory.mktemp("grammar-standins")
    vocab = Vocab(SMOL)
    n_prompt = len(vocab.prompt_ids(PROMPT))
    out = {}
    for key, reply in SMOL_REPLIES.items():
        # One model per reply: a Turn owns its positions whatever the prompt says.
        s = build_standin(tmp / f"{key}.gguf", SMOL, [Turn(n_prompt, (*vocab.prompt_ids(reply), "<|endoftext|>"))],
                          vocab=vocab)
        out[key] = load_model(s.path, n_ctx=256, n_threads=1)
    q = vocab_for("qwen2.5")  # <tool_call> is one (user-defined) token here, as in Qwen2.5
    s = build_standin(tmp / "qwen.gguf", "qwen2.5",
                      [Turn(len(q.prompt_ids(QWEN_PROMPT)), (*q.prompt_ids(QWEN_NEAR_MISS), "<|im_end|>"))])
    out["qwen"] = load_model(s.path, n_ctx=256, n_threads=1)
    return out


def gated_generate(llm, prompt: str, spec, max_tokens: int = 48) -> str:
    """Greedy generation through a GrammarGate: the grammar is applied to all candidates only when it refuses
    the model's own choice (llama.cpp's fast path)."""
    import numpy as np

    llm.reset()
    llm.eval(llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
    gate = GrammarGate.for_spec(llm._model.vocab, spec)
    vocab, out = llm._model.vocab, []
    for _ in range(max_tokens):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))
        token = int(np.argmax(logits))
        if not gate.allows(token):
            token = int(np.argmax(gate.mask(logits)))
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            break
        gate.accept(token)
        out.append(token)
        llm.eval([token])
    gate.close()
    return llm.detokenize(out, special=True).decode("utf-8")


def valid_call(result):
    return (result.accepted and len(result.calls) == 1 and result.calls[0].name in PARAMS
            and type_arguments(result.calls[0].arguments, PARAMS[result.calls[0].name]).ok)


def test_generate_with_a_required_grammar_turns_a_bad_call_into_a_valid_one(standins):
    from harness.backends.embedded.generate import generate

    llm = standins["json"]
    assert generate(llm, PROMPT, max_tokens=48, temperature=0.0).text == SMOL_REPLIES["json"]
    spec = build_grammar(None, TOOLS[:2], "required")
    constrained = generate(llm, PROMPT, max_tokens=48, temperature=0.0, grammar=spec.gbnf)
    assert (constrained.text, constrained.finish_reason) == (RESCUED, "stop")
    assert valid_call(fam(spec.family).parse(constrained.text))
    assert gated_generate(llm, PROMPT, spec) == RESCUED  # the fast path samples the same reply


def test_generic_grammar_on_a_model_without_tool_format(standins):
    spec = build_grammar(None, TOOLS[:2], "auto")
    assert fam(spec.family).parse(SMOL_REPLIES["json"]).accepted  # it parses, but is no valid call of the tool
    assert gated_generate(standins["json"], PROMPT, spec) == RESCUED  # held to a valid call
    # Prose is not let through: the reply is JSON from its first character (this stand-in knows nothing
    # but its script, so what it writes inside the object is noise; a real model picks a call or an answer).
    prose = gated_generate(standins["prose"], PROMPT, spec)
    assert prose != SMOL_REPLIES["prose"] and prose.startswith("{"), prose


def test_lazy_hermes_grammar_triggers_on_the_tool_call_token(standins):
    llm = standins["qwen"]
    spec = build_grammar("hermes", TOOLS[:2], "auto", lazy=True)
    assert fam("hermes").parse(QWEN_NEAR_MISS).deviation == dev.DOUBLE_BRACES
    reply = gated_generate(llm, QWEN_PROMPT, spec, max_tokens=64)
    result = fam("hermes").parse(reply)
    assert reply.startswith("Checking. <tool_call>\n{") and valid_call(result), reply
    assert result.content == "Checking." and result.calls[0].arguments["location"] == "Paris"


def test_gate_failures_are_grammar_runtime_errors(standins):
    llm = standins["json"]
    gate = GrammarGate.for_spec(llm._model.vocab, build_grammar("hermes", TOOLS[:2], "required"))
    outside = llm.tokenize(b"Hello", add_bos=False, special=False)[0]
    with pytest.raises(GrammarRuntimeError, match="outside the grammar"):
        gate.accept(outside)
    # A trigger that would replay text the grammar refuses (llama.cpp aborts there) is refused first.
    hermes = build_grammar("hermes", TOOLS[:2], "auto", lazy=True)
    naive = GrammarGate(llm._model.vocab, hermes.gbnf, ["<tool_call>"])
    tokens = llm.tokenize(b'Hi <tool_call>"x', add_bos=False, special=False)
    with pytest.raises(GrammarRuntimeError, match="trigger fired"):
        for token in tokens:
            naive.accept(token)


def test_generate_takes_a_grammar_spec_and_samples_what_the_gate_allows(standins):
    """generate(grammar=GrammarSpec) runs the gate in its own loop: the same replies as the greedy reference
    loop, lazy (prose untouched) and required alike."""
    from harness.backends.embedded.generate import generate

    generic = build_grammar(None, TOOLS[:2], "auto")
    rescued = generate(standins["json"], PROMPT, max_tokens=48, temperature=0.0, grammar=generic)
    assert (rescued.text, rescued.grammar_from) == (RESCUED, 0)  # not lazy: constrained from the start
    hermes = build_grammar("hermes", TOOLS[:2], "auto", lazy=True)
    prose = generate(standins["prose"], PROMPT, max_tokens=48, temperature=0.0, grammar=hermes)
    # No <tool_call>: the lazy grammar never took over, and the reply says so (how a report tells
    # "grammar = native" apart).
    assert (prose.text, prose.grammar_from) == (SMOL_REPLIES["prose"], None)
    reply = generate(standins["qwen"], QWEN_PROMPT, max_tokens=64, temperature=0.0, grammar=hermes)
    assert valid_call(fam("hermes").parse(reply.text)), reply.text
    assert reply.grammar_from == reply.text.index("<tool_call>")  # characters, after the text before it
    required = generate(standins["json"], PROMPT, max_tokens=48, temperature=0.0,
                        grammar=build_grammar(None, TOOLS[:2], "required"))
    assert required.grammar_from == 0
    assert generate(standins["json"], PROMPT, max_tokens=48, temperature=0.0).grammar_from is None
    # Unconstrained, the same stand-in writes the near miss: the spec is what changed the reply.
    assert generate(standins["qwen"], QWEN_PROMPT, max_tokens=64, temperature=0.0).text.startswith(QWEN_NEAR_MISS[:20])



def test_auto_grammar_holds_a_marker_less_call_from_its_first_token_and_counts_what_it_refused(standins):
    """Qwen2.5-Coder's habit under a Hermes template: the call as bare JSON, no <tool_call>. A lazy grammar
    waits for the marker and changes nothing; the "auto" grammar refuses the opening brace, and the reply
    records how many sampled tokens were refused (the measure of whether the grammar acted)."""
    from harness.backends.embedded.generate import generate

    bare = SMOL_REPLIES["json"]
    assert fam("hermes").parse(bare).deviation  # a near miss natively
    lazily = generate(standins["json"], PROMPT, max_tokens=48, temperature=0.0,
                      grammar=build_grammar("hermes", TOOLS[:2], "auto", lazy=True))
    assert (lazily.text, lazily.grammar_from, lazily.grammar_refused) == (bare, None, 0)
    auto = generate(standins["json"], PROMPT, max_tokens=48, temperature=0.0,
                    grammar=build_grammar("hermes", TOOLS[:2], "auto"))
    assert auto.grammar_from == 0 and auto.grammar_refused >= 1
    assert not auto.text.lstrip().startswith(("{", "[", "```")), auto.text
    # A reply the grammar lets through as written refuses nothing.
    call = generate(standins["qwen"], QWEN_PROMPT, max_tokens=64, temperature=0.0,
                    grammar=build_grammar("hermes", TOOLS[:2], "auto"))
    assert call.text.startswith("Checking. <tool_call>\n{") and valid_call(fam("hermes").parse(call.text))
    assert call.grammar_refused >= 1  # the near miss's doubled brace, refused after the marker
    prose = generate(standins["prose"], PROMPT, max_tokens=48, temperature=0.0,
                     grammar=build_grammar("hermes", TOOLS[:2], "auto"))
    assert (prose.text, prose.grammar_refused) == (SMOL_REPLIES["prose"], 0)
