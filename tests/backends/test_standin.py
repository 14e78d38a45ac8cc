"""The stand-in builder: vocabularies as the families have them, and scripts it refuses to write."""

from __future__ import annotations

import pytest
from gguf import GGUFValueType, GGUFWriter

from harness.scripted import vocab as standin_vocab
from harness.scripted import CONTEXT_LENGTH, CONTROL, PROFILES, USER_DEFINED, Script, Turn, build_standin, vocab_for


def test_fast_array_packing_writes_the_same_bytes_as_gguf():
    fast, plain = standin_vocab.FastGGUFWriter(None, arch="gpt2"), GGUFWriter(None, arch="gpt2")
    v, m = vocab_for("llama3.1"), vocab_for("mistral")
    # Slices keep gguf's own (slow) packer quick; the tails hold the odd unicode and the control tokens.
    arrays = [(v.tokens[-3000:], GGUFValueType.STRING), (v.types[-3000:], GGUFValueType.INT32),
              (v.copied["tokenizer.ggml.merges"][2][-3000:], GGUFValueType.STRING),
              (m.scores[-3000:], GGUFValueType.FLOAT32), (m.tokens[-3000:], GGUFValueType.STRING)]
    for values, kind in arrays:
        assert fast._pack_val(values, GGUFValueType.ARRAY, True, kind) == \
            plain._pack_val(values, GGUFValueType.ARRAY, True, kind)


def test_profiles_carry_the_family_tokens_with_their_kinds():
    q, ll, m = vocab_for("qwen2.5"), vocab_for("llama3.1"), vocab_for("mistral")
    assert (q.id("<tool_call>"), q.types[q.id("<tool_call>")]) == (151657, USER_DEFINED)  # Qwen2.5's id
    assert (ll.id("<|python_tag|>"), ll.types[128010]) == (128010, CONTROL)
    assert ll.id("<|eom_id|>") == 128008
    assert m.types[m.id("[TOOL_CALLS]")] == CONTROL
    assert m.id(b"\xe2") == m.tokens.index("<0xE2>")  # SentencePiece byte fallback
    with pytest.raises(KeyError):
        q.id("not one token at all")


@pytest.mark.needs_binding
def test_prompt_ids_follow_the_bos_rule():
    ll = vocab_for("llama3.1")
    assert ll.prompt_ids("hi")[0] == ll.id("<|begin_of_text|>")
    assert ll.prompt_ids("<|begin_of_text|>hi") == ll.prompt_ids("hi")
    assert vocab_for("qwen2.5").prompt_ids("<|im_start|>")[0] == 151644


def test_segment_spells_text_without_repeating_a_token():
    q = vocab_for("qwen2.5")
    text = "a b a b"
    ids = q.segment(text)
    assert len(set(ids)) == len(ids)
    assert "".join(q.tokens[i] for i in ids) == q._internal(text)
    with pytest.raises(ValueError, match="without repeating"):
        q.segment("\x00\x00")  # byte 0 has one token and pairs with nothing
    assert q.segment("\x00\x00", repeats=True) == [q.id(b"\x00")] * 2


def test_contradicting_scripts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="followed by both"):
        build_standin(tmp_path / "x.gguf", "mistral", [Script("[INST]", ("Hello",)), Script("[INST]", ("Done",))])
    with pytest.raises(ValueError, match="followed by both"):
        build_standin(tmp_path / "x.gguf", "mistral", [Turn(5, ("Hello", "Done")), Turn(6, ("Yes",))])
    with pytest.raises(ValueError, match="does not fit"):
        build_standin(tmp_path / "x.gguf", "mistral", [Turn(CONTEXT_LENGTH, ("Hello",))])
    assert not (tmp_path / "x.gguf").exists()


def test_every_profile_builds(tmp_path):
    for name in PROFILES:
        s = build_standin(tmp_path / f"{name}.gguf", name, [Script(PROFILES[name].end_of_turn, ("Hello",))])
        assert s.path.stat().st_size > 1_000_000 and s.turn_positions == frozenset()


def test_a_model_of_turns_alone_is_compact_and_ranks_off_script_tokens_as_a_one_slot_model(tmp_path):
    import numpy as np
    from gguf import GGUFReader

    from harness.backends.embedded.generate import load_model

    vocab = vocab_for("qwen2.5")
    eot = vocab.id(PROFILES["qwen2.5"].end_of_turn)
    reply = tuple(range(1000, 1100))            # 100 distinct tokens: 101 slots, width 128, one slot each
    stand_in = build_standin(tmp_path / "turns.gguf", "qwen2.5", [Turn(5, (*reply, eot))], vocab=vocab, quantized=True)
    head = next(t for t in GGUFReader(stand_in.path).tensors if t.name == "output.weight")
    assert head.shape.tolist()[0] == 32
    llm = load_model(stand_in.path, n_ctx=256, logits_all=True)
    for prompt, want in (([10, 11, 12, 13, 14], reply[0]), ([10, 11, 12], eot), ([10] * 105, eot)):
        llm.reset()
        llm.eval(prompt)
        logits = np.array(llm.scores[llm.n_tokens - 1])
        assert int(logits.argmax()) == want
        # Off the script (a grammar refusing `want`), the end of turn comes first, then every unscripted token at
        # 0, then the other scripted tokens: the order a model with one slot per token gives.
        others = np.delete(np.arange(len(logits)), [want, eot])
        assert logits[others].max() <= 1e-3 and (want == eot or logits[eot] > 1e-3)
        assert (logits[list(set(reply) - {want})] < -1e-3).all()
    llm.reset()
    llm.eval([10, 11, 12, 13, 14, *reply[:50]])          # mid-reply: the turn goes on
    assert int(np.array(llm.scores[llm.n_tokens - 1]).argmax()) == reply[50]
