"""Scripted models in Hugging Face form: a scripted GGUF (harness.scripted.builder) rewritten as an HF folder
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json with the chat template,
generation_config.json), for runtimes that do not load a GGUF: vLLM's CPU build, `transformers serve`.

The weights are the GGUF's own, read back from the file (Q8_0 blocks dequantized: these weights are exact in it),
so the folder is the same model, not a second build of the same scripts. Architecture: GPT-2 (learned absolute
positions, layer norm), as the GGUF's. One thing differs. vLLM's CPU attention takes only some head sizes
(32, 64, 80, 96, 112, 128, …) and the GGUF has one head as wide as the model (16, 48, 160, …), so:
- the folder splits the width into heads of 32: attention and feed-forward are all zeros, so how many heads
  share them changes nothing (a GGUF whose attention is not zero is refused);
- a width that is not a multiple of 32 is widened by copying the residual stream: every embedding written
  twice, [x, x], has the same mean and variance as x, so each layer norm gives [x̂, x̂]; the head reads the first
  copy only and the norm biases are copied, so every logit is the GGUF's.

The tokenizer is written from the GGUF's own vocabulary (tokens, merges, token types, llama.cpp's pre-tokenizer
name): byte-level BPE (GPT-2, Qwen2, Llama 3) only; SentencePiece vocabularies (the Mistral profile) are refused.
Control tokens become special added tokens (hidden from decoded text, as the real models' are), user-defined
ones (Qwen2.5's <tool_call>) added tokens that are not special, as in the real Qwen2.5 tokenizer; a family's
markers are marked as the GGUF's harness.tokens.* keys say the real tokenizer marks them."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from harness.scripted.vocab import CONTEXT_LENGTH, CONTROL, PROFILES, USER_DEFINED, read_gguf_header

HEAD_DIM = 32  # a head size vLLM's CPU attention takes, and a divisor of every width it is given here

# llama.cpp's pre-tokenizer names and the splitting Hugging Face's tokenizer.json of the same model does.
_LETTERS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
_REST = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
PRE_TOKENIZERS = {
    "gpt-2": None,                                   # ByteLevel's own regex, as GPT-2's tokenizer.json
    "qwen2": _LETTERS + r"\p{N}" + _REST,            # digits one by one
    "llama-bpe": _LETTERS + r"\p{N}{1,3}" + _REST,   # digits in threes
}
_NFC = {"qwen2"}             # Qwen2's tokenizer normalizes to NFC first
_IGNORE_MERGES = {"llama-bpe"}  # Llama 3 takes a whole word that is a token before merging

_TYPES = {0: (np.float32, 4), 1: (np.float16, 2)}  # GGML F32, F16; Q8_0 is read by blocks


def has_hf_form(profile: str) -> bool:
    """Whether a vocabulary profile's models can be written in HF form, without reading its vocabulary: llama.cpp
    names each vocabulary file by its pre-tokenizer (ggml-vocab-PRE.gguf), and tokenizer_json takes only those
    of PRE_TOKENIZERS (byte-level BPE); llama-spm, SentencePiece, is refused."""
    vocab_file = PROFILES[profile.split("+")[0]].vocab_file
    return vocab_file.removeprefix("ggml-vocab-").removesuffix(".gguf") in PRE_TOKENIZERS


def read_tensors(path: Path) -> tuple[dict, dict]:
    """(key/values, name -> float32 array in numpy's row order) of a GGUF."""
    kv, n_tensors, buf, pos = read_gguf_header(path)
    infos = []
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, pos)
        name = bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8")
        pos += 8 + n
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
        qtype, offset = struct.unpack_from("<IQ", buf, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        infos.append((name, tuple(reversed(dims)), qtype, offset))
    align = int(kv.get("general.alignment", (0, None, 32))[2])
    start = (pos + align - 1) // align * align
    tensors = {}
    for name, shape, qtype, offset in infos:
        count = math.prod(shape)
        if qtype == GGMLQuantizationType.Q8_0:
            raw = np.frombuffer(buf, dtype=np.uint8, count=count // 32 * 34, offset=start + offset)
            values = dequantize(raw.reshape(shape[0], -1), GGMLQuantizationType.Q8_0)
        elif qtype in _TYPES:
            dtype, _ = _TYPES[qtype]
            values = np.frombuffer(buf, dtype=dtype, count=count, offset=start + offset)
        else:
            raise ValueError(f"{path}: tensor {name} has GGML type {qtype}, which a scripted model never uses")
        tensors[name] = np.asarray(values, dtype=np.float32).reshape(shape)
    return kv, tensors


def hf_weights(tensors: dict) -> tuple[dict, int, int]:
    """(HF GPT-2 state dict, its width, copies of the GGUF's width in it)."""
    n = tensors["token_embd.weight"].shape[1]
    for name, t in tensors.items():
        if name.startswith("blk.0.") and "norm" not in name and np.any(t != 0):
            raise ValueError(f"{name} is not zero: only a scripted model with zero attention and feed-forward "
                             "can be split into other heads")
    copies = HEAD_DIM // math.gcd(n, HEAD_DIM)
    width = n * copies

    def tile(t):  # the residual stream written `copies` times side by side
        return np.tile(t, copies) if t.ndim == 1 else np.tile(t, (1, copies))

    head = np.zeros((tensors["output.weight"].shape[0], width), dtype=np.float32)
    head[:, :n] = tensors["output.weight"]
    zeros = np.zeros
    state = {
        "transformer.wte.weight": tile(tensors["token_embd.weight"]),
        "transformer.wpe.weight": tile(tensors["position_embd.weight"]),
        "transformer.h.0.ln_1.weight": tile(tensors["blk.0.attn_norm.weight"]),
        "transformer.h.0.ln_1.bias": tile(tensors["blk.0.attn_norm.bias"]),
        # Conv1D weights are (in, out); all zero, as checked above.
        "transformer.h.0.attn.c_attn.weight": zeros((width, 3 * width)),
        "transformer.h.0.attn.c_attn.bias": zeros(3 * width),
        "transformer.h.0.attn.c_proj.weight": zeros((width, width)),
        "transformer.h.0.attn.c_proj.bias": zeros(width),
        "transformer.h.0.ln_2.weight": tile(tensors["blk.0.ffn_norm.weight"]),
        "transformer.h.0.ln_2.bias": tile(tensors["blk.0.ffn_norm.bias"]),
        "transformer.h.0.mlp.c_fc.weight": zeros((width, width)),
        "transformer.h.0.mlp.c_fc.bias": zeros(width),
        "transformer.h.0.mlp.c_proj.weight": zeros((width, width)),
        "transformer.h.0.mlp.c_proj.bias": zeros(width),
        "transformer.ln_f.weight": tile(tensors["output_norm.weight"]),
        "transformer.ln_f.bias": tile(tensors["output_norm.bias"]),
        "lm_head.weight": head,
    }
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}, width, copies


def write_safetensors(path: Path, state: dict) -> None:
    """The safetensors format by hand (a length, a JSON header of offsets, the raw little-endian bytes): the
    harness does not depend on the safetensors package for one file of float32 arrays."""
    header, offset = {}, 0
    for name, t in state.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for t in state.values():
            f.write(t.astype("<f4", copy=False).tobytes())


def tokenizer_json(kv: dict) -> dict:
    model = kv["tokenizer.ggml.model"][2]
    pre = kv.get("tokenizer.ggml.pre", (0, None, "gpt-2"))[2]
    if model != "gpt2" or pre not in PRE_TOKENIZERS:
        raise ValueError(f"a {model!r} vocabulary with pre-tokenizer {pre!r} has no HF form here (byte-level BPE "
                         f"only: {', '.join(PRE_TOKENIZERS)})")
    tokens = kv["tokenizer.ggml.tokens"][2]
    types = [int(t) for t in kv["tokenizer.ggml.token_type"][2]]
    # A family's markers say how the real tokenizer marks them (harness.scripted.plan.profile_with_tokens); any
    # other added token is special when the GGUF makes it a control token.
    flags = {t: flag for key, flag in (("harness.tokens.special", True), ("harness.tokens.not_special", False))
             for t in kv.get(key, (0, 0, []))[2]}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": flags.get(t, k == CONTROL)}
             for i, (t, k) in enumerate(zip(tokens, types)) if k in (CONTROL, USER_DEFINED)]
    regex = PRE_TOKENIZERS[pre]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": regex is None}
    pre_tokenizer = byte_level if regex is None else {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}, byte_level]}
    bos = _token(kv, "tokenizer.ggml.bos_token_id")
    post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    if _add_bos(kv) and bos is not None:
        bid = kv["tokenizer.ggml.bos_token_id"][2]
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [bid], "tokens": [bos]}}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"} if pre in _NFC else None,
        "pre_tokenizer": pre_tokenizer, "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": pre in _IGNORE_MERGES, "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": list(kv["tokenizer.ggml.merges"][2])},
    }


def _token(kv: dict, key: str) -> str | None:
    return kv["tokenizer.ggml.tokens"][2][kv[key][2]] if key in kv else None


def _add_bos(kv: dict) -> bool:
    return bool(kv.get("tokenizer.ggml.add_bos_token", (0, None, False))[2])


def write_hf_folder(gguf_path: str | Path, folder: str | Path | None = None) -> Path:
    """Write the HF form of a scripted GGUF into `folder` (default: beside it, the file's name without
    .gguf); returns the folder. Files are written whole and renamed into place, so a folder is complete or
    absent of each file."""
    gguf_path = Path(gguf_path)
    folder = Path(folder) if folder else gguf_path.with_suffix("")
    kv, tensors = read_tensors(gguf_path)
    if kv["general.architecture"][2] != "gpt2":
        raise ValueError(f"{gguf_path}: not a scripted model (architecture {kv['general.architecture'][2]!r})")
    state, width, copies = hf_weights(tensors)
    tokens = kv["tokenizer.ggml.tokens"][2]
    eos_id = kv["tokenizer.ggml.eos_token_id"][2]
    bos_id = kv.get("tokenizer.ggml.bos_token_id", (0, None, eos_id))[2]
    template = kv.get("tokenizer.chat_template", (0, None, None))[2]
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": len(tokens),
        "n_positions": CONTEXT_LENGTH, "n_ctx": CONTEXT_LENGTH, "n_embd": width, "n_layer": 1,
        "n_head": width // HEAD_DIM, "n_inner": width, "activation_function": "gelu_new",
        "layer_norm_epsilon": float(kv.get("gpt2.attention.layer_norm_epsilon", (0, None, 1e-5))[2]),
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": False,
        "bos_token_id": bos_id, "eos_token_id": eos_id, "dtype": "float32", "torch_dtype": "float32",
        "scripted": {"gguf": gguf_path.name, "gguf_width": width // copies, "copies": copies},
    }
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": CONTEXT_LENGTH,
        "bos_token": tokens[bos_id], "eos_token": tokens[eos_id], "pad_token": tokens[eos_id],
        "add_bos_token": _add_bos(kv), "add_eos_token": False, "clean_up_tokenization_spaces": False,
        **({"chat_template": template} if template else {}),
    }
    generation = {"bos_token_id": bos_id, "eos_token_id": eos_id}
    folder.mkdir(parents=True, exist_ok=True)

    def put(name: str, write) -> None:
        tmp = folder / f".{name}.part"
        write(tmp)
        tmp.replace(folder / name)

    def text(value) -> callable:
        return lambda p: p.write_text(json.dumps(value, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    put("model.safetensors", lambda p: write_safetensors(p, state))
    put("tokenizer.json", text(tokenizer_json(kv)))
    put("tokenizer_config.json", text(tok_config))
    put("generation_config.json", text(generation))
    if template:
        put("chat_template.jinja", lambda p: p.write_text(template, encoding="utf-8"))
    put("config.json", text(config))
    return folder
