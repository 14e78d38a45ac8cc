"""Scripted-model vocabularies: llama.cpp's vocabulary GGUFs with the edits that make them a family's.

Part of the scripted-model builder (harness.scripted.builder): the family profiles (read with
harness.scripted.gguf_read), naming a token by its text, spelling text with distinct tokens, counting a prompt's
tokens, and writing the tokenizer keys.
"""

from __future__ import annotations

import functools
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, Union

import numpy as np
from gguf import GGUFValueType, GGUFWriter

from harness.core import constants
from harness.pins.archives import archive_tree
from harness.scripted.gguf_read import read_gguf_header, read_gguf_kv  # noqa: F401 -- re-exported

# llama.cpp's models/ folder (its ggml-vocab-*.gguf files) comes out of the pinned llama-cpp-python sdist,
# fetched, verified and unpacked into the cache the first time a test needs it (harness.pins.archives).
LLAMA_CPP_ARCHIVE = constants.BINDING_ARCHIVE


@functools.cache
def llama_cpp_models() -> Path:
    return archive_tree(LLAMA_CPP_ARCHIVE)


# GGUF token types (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

CONTEXT_LENGTH = 8192  # rows of the position embedding: load stand-ins with n_ctx <= this

Item = Union[str, bytes, int]  # a token's text, one raw byte (byte token), or a token id


@dataclass(frozen=True)
class Profile:
    """A family's tokenizer: a llama.cpp vocabulary file plus the edits that make it that family's."""

    name: str
    vocab_file: str
    end_of_turn: str  # the token the instruct model ends its turn with; also what unscripted tokens lead to
    bos: str | None
    add_bos: bool
    template: str | None  # a file in models/templates, embedded as tokenizer.chat_template
    renames: dict[int, tuple[str, int]] = field(default_factory=dict)  # id -> (new text, token type)
    appended: tuple[tuple[str, int], ...] = ()  # new tokens at the end (or, where the text is one, its new type)
    note: str = ""
    # Added tokens a family's real tokenizer marks special (True) or not (False), written into the GGUF as
    # harness.tokens.* so its HF form says the same (the GGUF type alone cannot: llama.cpp's converter makes
    # "<|…|>" tokens control tokens even where the real tokenizer does not mark them special).
    hf_special: tuple[tuple[str, bool], ...] = ()


_QWEN25_ADDED = [
    "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
    "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]
_QWEN25_USER = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="qwen2.5",
            vocab_file="ggml-vocab-qwen2.gguf",
            end_of_turn="<|im_end|>",
            bos="<|endoftext|>",
            add_bos=False,
            template="Qwen-Qwen2.5-7B-Instruct.jinja",
            # The vocabulary file predates Qwen2.5: ids 151646.. are padding there. Qwen2.5 puts its added
            # tokens at exactly these ids, <tool_call> as a user-defined (not control) token.
            renames={
                **{151646 + i: (t, CONTROL) for i, t in enumerate(_QWEN25_ADDED)},
                **{151657 + i: (t, USER_DEFINED) for i, t in enumerate(_QWEN25_USER)},
            },
            note="Qwen2 vocabulary with Qwen2.5's added tokens at their real ids",
        ),
        Profile(
            name="llama3.1",
            vocab_file="ggml-vocab-llama-bpe.gguf",
            end_of_turn="<|eot_id|>",
            bos="<|begin_of_text|>",
            add_bos=True,
            template="meta-llama-Llama-3.1-8B-Instruct.jinja",
            # Llama 3.0's reserved tokens 4 and 5 became <|eom_id|> and <|python_tag|> in 3.1, same ids.
            renames={128008: ("<|eom_id|>", CONTROL), 128010: ("<|python_tag|>", CONTROL)},
            note="Llama 3 vocabulary with Llama 3.1's <|eom_id|> and <|python_tag|> at their real ids",
        ),
        Profile(
            name="mistral",
            vocab_file="ggml-vocab-llama-spm.gguf",
            end_of_turn="</s>",
            bos="<s>",
            add_bos=True,
            template="mistralai-Mistral-Nemo-Instruct-2407.jinja",
            # Mistral v0.3's control tokens (ids 3-9 there) appended to a 32k SentencePiece vocabulary with byte
            # fallback; the ids differ from Mistral's, the token kinds and texts do not.
            appended=tuple((t, CONTROL) for t in (
                "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[CALL_ID]", "[ARGS]",
                "[THINK]", "[/THINK]")),
            note="Llama SentencePiece vocabulary plus Mistral's control tokens (v0.3, then v7 and later; appended ids)",
        ),
        Profile(
            name="gpt2",
            vocab_file="ggml-vocab-gpt-2.gguf",
            end_of_turn="<|endoftext|>",
            bos="<|endoftext|>",
            add_bos=False,
            template=None,
            note="GPT-2's 50k byte-level BPE: spells any text (a template's markers as plain text), a third of "
                 "Qwen2.5's vocabulary, so a model of it writes and loads faster",
        ),
    )
}


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's byte-level BPE alphabet: printable bytes stand for themselves, the rest map above U+0100.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ENCODER = _bytes_to_unicode()


# --- the vocabulary of a profile ---------------------------------------------------------------------

class Vocab:
    """A profile's vocabulary as it will be written: tokens, types, and how to name a token."""

    def __init__(self, profile: Profile):
        self.profile = profile
        kv = read_gguf_kv(llama_cpp_models() / profile.vocab_file)
        self.model = kv["tokenizer.ggml.model"][2]  # "gpt2" (byte-level BPE) or "llama" (SentencePiece)
        self.tokens: list[str] = list(kv["tokenizer.ggml.tokens"][2])
        self.types: list[int] = [int(t) for t in kv["tokenizer.ggml.token_type"][2]]
        scores = kv.get("tokenizer.ggml.scores")
        self.scores: list[float] | None = [float(s) for s in scores[2]] if scores else None
        for tid, (text, ttype) in profile.renames.items():
            self.tokens[tid], self.types[tid] = text, ttype
        self._id = {t: i for i, t in enumerate(self.tokens)}
        for text, ttype in profile.appended:
            if text in self._id:          # already one token of the vocabulary: it takes the type asked for
                self.types[self._id[text]] = ttype
                continue
            self._id[text] = len(self.tokens)
            self.tokens.append(text)
            self.types.append(ttype)
            if self.scores is not None:
                self.scores.append(0.0)
        self._tokenizer = None  # a vocabulary-only llama_cpp.Llama, made on first prompt_ids()
        if len(self._id) != len(self.tokens):
            raise ValueError(f"profile {profile.name}: duplicate token texts after edits")
        # Keys copied as they are (merges, pre-tokenizer, special ids); the ids we set are overridden below.
        self.copied = {k: v for k, v in kv.items() if k.startswith("tokenizer.") and k not in (
            "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores",
            "tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.add_bos_token", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")}

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, item: Item) -> int:
        """The id of one token named by its text, one raw byte, or its id. Raises if it is not one token."""
        if isinstance(item, int):
            if not 0 <= item < len(self.tokens):
                raise ValueError(f"token id {item} out of range")
            return item
        if isinstance(item, bytes):
            if len(item) != 1:
                raise ValueError(f"a byte item is one byte, got {item!r}")
            key = BYTE_ENCODER[item[0]] if self.model == "gpt2" else f"<0x{item[0]:02X}>"
            return self._id[key]
        if item in self._id and self.types[self._id[item]] in (CONTROL, USER_DEFINED):
            return self._id[item]
        key = self._internal(item)
        if key not in self._id:
            raise KeyError(f"{item!r} is not a single token of the {self.profile.name} vocabulary")
        return self._id[key]

    def _internal(self, text: str) -> str:
        if self.model == "gpt2":
            return "".join(BYTE_ENCODER[b] for b in text.encode("utf-8"))
        return text.replace(" ", "\u2581")

    def segment(self, text: str, avoid: Sequence[int] = (), repeats: bool = False) -> list[int]:
        """Split text into normal tokens, longest first, never reusing an id (nor one in `avoid`) unless
        `repeats`.

        A first-order script cannot visit a token twice, so repeated text ("\\"" in JSON) must be spelt with
        different tokens each time. Raises ValueError when the text cannot be spelt that way. With repeats=True
        it is a plain longest-match spelling, e.g. for a Turn reply that must not start with SentencePiece's
        space prefix (tokenizing "[{" gives "▁[{")."""
        used = set(avoid)
        out: list[int] = []
        dead: set[int] = set()  # with repeats, a position that failed once always fails
        budget = [20_000]  # without repeats the search can explode ("\n" * 300): give up, don't hang
        # A depth-first search with its own stack: one level per token, so a reply of thousands of tokens
        # must not take Python's recursion. frames[k] = [position, the next end to try there]; out[k] is the
        # token frame k chose, on its way to frame k + 1.
        frames: list[list[int]] = []

        def enter(i: int) -> bool:
            budget[0] -= 1
            if i in dead or budget[0] < 0:
                return False
            frames.append([i, min(len(text), i + 24)])
            return True

        def walk() -> bool:
            if not text:
                return True
            if not enter(0):
                return False
            while frames:
                frame = frames[-1]
                i = frame[0]
                while frame[1] > i:
                    j = frame[1]
                    frame[1] -= 1
                    tid = self._id.get(self._internal(text[i:j]))
                    if tid is None or tid in used or self.types[tid] != NORMAL:
                        continue
                    if not repeats:
                        used.add(tid)
                    out.append(tid)
                    if j == len(text):
                        return True
                    if enter(j):
                        break
                    used.discard(tid)
                    out.pop()
                else:
                    # Every end tried from here failed: this position fails, and so does the choice before it.
                    if repeats:
                        dead.add(i)
                    frames.pop()
                    if frames:
                        used.discard(out.pop())
            return False

        if not walk():
            why = "without repeating a token" if not repeats else "with normal tokens"
            raise ValueError(f"cannot spell {text!r} {why}" + (" (search gave up)" if budget[0] < 0 else ""))
        return out

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids generate() feeds the model for `prompt` (special tokens parsed, BOS rule applied), from a
        vocabulary-only GGUF of this profile loaded in llama.cpp. len() of it is a Turn's `after`."""
        if self._tokenizer is None:
            from harness.backends import backend_class

            self._tmp = tempfile.TemporaryDirectory(prefix="scripted-vocab-")
            path = Path(self._tmp.name) / f"{self.profile.name}-vocab.gguf"
            write_vocab_gguf(self, path)
            self._tokenizer = backend_class("embedded").prompt_tokenizer(path)
        return self._tokenizer(prompt)


_PACKED: dict = {}


class FastGGUFWriter(GGUFWriter):
    """GGUFWriter with a fast path for long arrays: packing 300k vocabulary strings one value at a time takes
    seconds. Same bytes (checked by loading the result in llama.cpp); relies on gguf 0.19's _pack_val."""

    def _pack_val(self, val, vtype, add_vtype, sub_type=None):
        if vtype != GGUFValueType.ARRAY or sub_type is None or len(val) < 1024:
            return super()._pack_val(val, vtype, add_vtype, sub_type)
        # A vocabulary's arrays are the same objects in every model built from it: packed once (a suite writes
        # a hundred models from three vocabularies). The entry keeps `val` alive, so its id is not reused.
        if not isinstance(val, list):
            return self._pack_array(val, vtype, add_vtype, sub_type)
        key = (id(val), vtype, add_vtype, sub_type)
        if key not in _PACKED:
            _PACKED[key] = (val, self._pack_array(val, vtype, add_vtype, sub_type))
        return _PACKED[key][1]

    def _pack_array(self, val, vtype, add_vtype, sub_type):
        head = struct.pack("<I", vtype) if add_vtype else b""
        head += struct.pack("<IQ", sub_type, len(val))
        if sub_type == GGUFValueType.STRING:
            parts = [s.encode("utf-8") for s in val]
            lens = np.fromiter((len(b) for b in parts), dtype="<u8", count=len(parts))
            return head + b"".join(l + b for l, b in zip((x.tobytes() for x in lens), parts))
        dtype = {GGUFValueType.INT32: "<i4", GGUFValueType.FLOAT32: "<f4", GGUFValueType.UINT32: "<u4"}.get(sub_type)
        if dtype is None:
            return super()._pack_val(val, vtype, add_vtype, sub_type)
        return head + np.asarray(val, dtype=dtype).tobytes()


def write_vocab_gguf(vocab: Vocab, path: Path) -> None:
    """A vocabulary-only GGUF of the profile (no tensors): enough for a tokenizer, llama.cpp's or transformers'."""
    w = FastGGUFWriter(str(path), arch="gpt2")
    write_vocab_kv(w, vocab, n_embd=16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


@functools.lru_cache(maxsize=None)
def vocab_for(profile: str) -> Vocab:
    """One Vocab per profile per test session: loading a vocabulary and its tokenizer takes about a second."""
    return Vocab(PROFILES[profile])


def write_vocab_kv(w: GGUFWriter, vocab: Vocab, n_embd: int, template: str | None = None) -> None:
    """The keys of a one-block GPT-2 stand-in and its tokenizer (a rotary model writes its own model keys)."""
    w.add_name(f"stand-in {vocab.profile.name}")
    w.add_context_length(CONTEXT_LENGTH)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_embd)
    w.add_head_count(1)
    w.add_layer_norm_eps(1e-5)
    write_tokenizer_kv(w, vocab, template)


def write_tokenizer_kv(w: GGUFWriter, vocab: Vocab, template: str | None = None) -> None:
    profile = vocab.profile
    w.add_vocab_size(len(vocab))
    w.add_file_type(1)  # mostly F16
    w.add_key_value("tokenizer.ggml.tokens", vocab.tokens, GGUFValueType.ARRAY, GGUFValueType.STRING)
    w.add_key_value("tokenizer.ggml.token_type", vocab.types, GGUFValueType.ARRAY, GGUFValueType.INT32)
    if vocab.scores is not None:
        w.add_key_value("tokenizer.ggml.scores", vocab.scores, GGUFValueType.ARRAY, GGUFValueType.FLOAT32)
    for key, (vtype, etype, value) in vocab.copied.items():
        if vtype == GGUFValueType.ARRAY:
            value = value if isinstance(value, list) else value.tolist()
            w.add_key_value(key, value, GGUFValueType.ARRAY, GGUFValueType(etype))
        else:
            w.add_key_value(key, value, GGUFValueType(vtype))
    w.add_eos_token_id(vocab.id(profile.end_of_turn))
    if profile.bos is not None:
        w.add_bos_token_id(vocab.id(profile.bos))
    w.add_add_bos_token(profile.add_bos)
    if template is None and profile.template:
        template = (constants.TEMPLATES_DIR / profile.template).read_text(encoding="utf-8")
    if template:
        w.add_chat_template(template)
    for flag, key in ((True, "harness.tokens.special"), (False, "harness.tokens.not_special")):
        texts = [t for t, special in profile.hf_special if special is flag]
        if texts:
            w.add_key_value(key, texts, GGUFValueType.ARRAY, GGUFValueType.STRING)
