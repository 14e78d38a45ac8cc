"""Planning scripted models: the vocabulary a template gets, a reply's tokens (spelt back from the vocabulary's
own token texts; tests/live/test_runtime_conformance.py reads them back through real servers), and packing turns
into models by the positions they own."""

import pytest

from harness.scripted import CONTEXT_LENGTH, vocab_for
from harness.scripted.plan import pack, profile_for, profile_with_tokens, reply_ids
from harness.scripted.vocab import BYTE_ENCODER, CONTROL, USER_DEFINED
from harness.families import get as family
from harness.core import constants


@pytest.mark.parametrize("template, profile", [
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "qwen2.5"), ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3.1"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"), ("GLM-4.6.jinja", "gpt2")])
def test_a_template_gets_the_vocabulary_whose_end_of_turn_it_writes(template, profile):
    assert profile_for((constants.TEMPLATES_DIR / template).read_text()) == profile


def test_a_familys_markers_are_the_real_models_tokens_of_the_type_its_gguf_gives_them():
    """DeepSeek V3.1's markers are not marked special in its tokenizer, yet llama.cpp's converter makes <｜…｜>
    control tokens; Gemma 4's <|tool_call> is special but does not look it; Qwen3's <think> is neither. A reply and
    a prompt spell each as one token, and the HF form marks it as the real tokenizer does."""
    template = (constants.TEMPLATES_DIR / "deepseek-ai-DeepSeek-V3.1.jinja").read_text()
    name = profile_with_tokens(template, family("deepseek-v3.1"))
    vocab = vocab_for(name)
    assert name == "gpt2+deepseek-v3.1" and len(vocab) == len(vocab_for("gpt2")) + 11
    begin = vocab.id("<｜tool▁calls▁begin｜>")
    assert vocab.types[begin] == CONTROL and vocab.types[vocab.id("<think>")] == USER_DEFINED
    assert dict(vocab.profile.hf_special)["<｜tool▁calls▁begin｜>"] is False
    reply = reply_ids(vocab, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}")
    assert reply[:2] == (begin, vocab.id("<｜tool▁call▁begin｜>"))
    assert vocab.prompt_ids("a <｜tool▁calls▁begin｜> b").count(begin) == 1
    gemma = vocab_for(profile_with_tokens((constants.TEMPLATES_DIR / "google-gemma-4-31B-it.jinja").read_text(),
                                          family("gemma4")))
    assert gemma.types[gemma.id("<|tool_call>")] == CONTROL          # special, though it does not look it
    assert gemma.types[gemma.id('<|"|>')] == USER_DEFINED            # a piece: the look rule is for added tokens
    qwen3 = vocab_for(profile_with_tokens((constants.TEMPLATES_DIR / "Qwen-Qwen3-0.6B.jinja").read_text(),
                                          family("hermes")))
    # Qwen2.5's vocabulary already holds <tool_call> (user-defined, at its real id); <think> is added.
    assert qwen3.id("<tool_call>") == vocab_for("qwen2.5").id("<tool_call>") == 151657
    assert qwen3.types[qwen3.id("<think>")] == USER_DEFINED and len(qwen3) == len(vocab_for("qwen2.5")) + 2
    # A family that lists no tokens keeps the base vocabulary.
    assert profile_with_tokens(template, family("functionary-v3.1")) == "gpt2"


@pytest.mark.parametrize("profile, text", [
    ("qwen2.5", '<tool_call>\n{"name": "f", "arguments": {"t": "Café \\"Zürich\\" 東京 🎉"}}\n</tool_call>'),
    ("llama3.1", '<|python_tag|>{"name": "f", "parameters": {"x": "🎉 null"}}'),
    ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {"a": [1, 2]}}]'),
])
def test_reply_tokens_spell_the_text_exactly_and_end_the_turn(profile, text):
    vocab = vocab_for(profile)
    ids = reply_ids(vocab, text)
    assert ids[-1] == vocab.id(vocab.profile.end_of_turn)
    spelt = b"".join(_piece(vocab, i) for i in ids[:-1]).decode("utf-8")
    assert spelt == text
    named = [vocab.tokens[i] for i in ids if vocab.types[i] != 1]
    assert named[-1] == vocab.profile.end_of_turn
    if profile != "llama3.1":                                # llama3.1's <|python_tag|> is a control token too
        assert {"<tool_call>", "[TOOL_CALLS]"} & set(named)


def _piece(vocab, token: int) -> bytes:
    text = vocab.tokens[token]
    if vocab.types[token] != 1:
        return text.encode("utf-8")
    if vocab.model == "gpt2":
        decoder = {v: k for k, v in BYTE_ENCODER.items()}
        return bytes(decoder[c] for c in text)
    if text.startswith("<0x") and text.endswith(">"):
        return bytes([int(text[3:-1], 16)])
    return text.replace("\u2581", " ").encode("utf-8")


def test_turns_share_a_model_unless_their_positions_overlap():
    a, b = (1, 2, 3), (4, 5)
    models, refused = pack([("x", 10, a), ("y", 10, a), ("z", 12, b), ("w", 20, b), ("v", CONTEXT_LENGTH - 1, a)])
    assert [[(s.after, s.requests) for s in m.slots] for m in models] == \
        [[(10, ["x", "y"]), (20, ["w"])], [(12, ["z"])]]
    assert refused and refused[0][0] == "v" and "do not fit" in refused[0][1]


def test_two_writers_of_one_model_each_write_a_file_of_their_own_before_it_takes_its_name(tmp_path, monkeypatch):
    # Two conformance workers can plan the same model (one case under two tool_choice values): each writes its
    # own part file, and the named file is always a whole one.
    import threading
    from harness.scripted import plan as plan_module

    written, both = [], threading.Barrier(2)

    def build(tmp, profile, turns, **kwargs):
        both.wait(30)                       # both writers are in the build at once
        tmp.write_bytes(b"model")
        written.append(tmp.name)

    monkeypatch.setattr(plan_module, "build_standin", build)
    models, _ = pack([("a", 5, (1, 2))])
    paths = []
    writers = [threading.Thread(target=lambda: paths.append(plan_module.build_models(
        tmp_path, "stem", "qwen2.5", "{{ x }}", models))) for _ in range(2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
    assert len(written) == 2 and written[0] != written[1] and all(n.endswith(".part") for n in written)
    assert paths[0] == paths[1] and paths[0][0].read_bytes() == b"model"
    assert sorted(p.name for p in tmp_path.iterdir()) == [paths[0][0].name]
