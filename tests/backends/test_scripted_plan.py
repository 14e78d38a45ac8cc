"""Planning scripted models: the vocabulary a template gets, a reply's tokens (spelt back from the vocabulary's
own token texts; tests/live/test_runtime_conformance.py reads them back through real servers), and packing turns
into models by the positions they own."""

import pytest

from harness.scripted import CONTEXT_LENGTH, vocab_for
from harness.scripted.plan import pack, profile_for, reply_ids
from harness.scripted.vocab import BYTE_ENCODER
from harness.core import constants


@pytest.mark.parametrize("template, profile", [
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "qwen2.5"), ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3.1"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"), ("GLM-4.6.jinja", "gpt2")])
def test_a_template_gets_the_vocabulary_whose_end_of_turn_it_writes(template, profile):
    assert profile_for((constants.TEMPLATES_DIR / template).read_text()) == profile


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
