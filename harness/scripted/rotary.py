"""Scripted models in a rotary architecture (llama GGUF), for runtimes that load no GPT-2 GGUF (mistral.rs).

The GPT-2 stand-in (harness.scripted.builder) reads a reply's position off a learned position embedding; a llama
model has none, so this one computes it. Every token but BOS has the same embedding, so a prompt's text changes
nothing and, as in the GPT-2 model, a reply is keyed to the prompt's length alone (Turn(after=N, reply)).

- Attention: head 0 has no query and no key (their weights are zero), so every score is exactly 0 and it
  attends uniformly over the causal prefix, whatever precision the scores are kept in and whatever the rotary
  embedding does. Its value is 1 at BOS (position 0, which the template writes) and 0 elsewhere, so at position i
  it gives w(i) = 1/(i + 1): one feature, falling strictly with i by a part in i + 1 per token, which f32 (7
  digits) resolves over the whole context. Heads that score BOS higher (1/(1 + i·e^-alpha), centred near
  e^alpha) were tried: a part in e^alpha + i per token is never finer, and their scores must then stay exact in
  a half-precision cache. The other heads are zero (a llama block's attention is as wide as its embedding).
- Feed-forward (SwiGLU): three units per scripted position p make a triangle on w, 1 at p and 0 from p-1 and
  p+1 on (silu(s·x)/s is relu(x) to 3e-6 where |x| >= 0.5), written into the pair of code dimensions naming the
  token scripted after p (builder._pair_codes). Positions that lead to the end of turn, and every unscripted one,
  get no code. The weighted sum of the attention (1/(i + 1)) and what follows must run in f32: a runtime that
  weighs the values in f16 loses positions past ~1,000.
- Output: RMS norm, then a head whose row for a coded token reads its two code dimensions and is pulled down by
  the constant dimensions (a llama output norm has no bias), so a row sharing one code dimension stays below 0;
  the end of turn reads the constant dimensions. Off the script the end of turn leads, as in the GPT-2 model.

build_rotary computes the logits of every position from the weights it writes (in f32, as the runtime does;
harness.scripted.rotary_forward) and refuses a model whose scripted token leads by less than builder.MIN_MARGIN.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Sequence

import numpy as np
from gguf import GGMLQuantizationType

from harness.scripted.rotary_forward import HEAD_DIM, ROPE_BASE, check_margins
from harness.scripted.builder import StandIn, Turn, _links, _pair_codes, _q8_0
from harness.scripted.vocab import CONTEXT_LENGTH, CONTROL, PROFILES, FastGGUFWriter, Profile, Vocab, write_tokenizer_kv

ARCH = "llama"
ROTARY_VERSION = 2            # changes when the same turns get other weights (in the model files' names)
RMS_EPS = 1e-6
EMBED = 4.0                   # every embedding entry: a group of n/16 entries of 4 normalises to exactly 4 each
FEATURE_GAIN = 0.25           # attention output into the residual: the feature stays small next to the constant
SHARP = 24.0                  # silu(SHARP·x)/SHARP is relu(x) to |x|·e^-(SHARP·|x|): 3e-6 where |x| >= 0.5
STEP_RATIO = 1.5              # a triangle is 1.5 steps wide at the nearer neighbour: its units stay 0.5 off 0
CODE = 32.0                   # a code dimension's value at a scripted position (the constant ones are EMBED)
POSITION_LOGIT = 56.0         # the scripted token's logit
EOT_LOGIT = 40.0              # the end of turn's logit where nothing is scripted
SHARED_PULL = 1.2             # a row sharing one code dimension gets (1 - SHARED_PULL)/2 of a scripted logit

# The position feature needs exactly one BOS, at position 0. Runtimes disagree on adding one (mistral.rs adds
# none to a byte-level BPE prompt whatever the GGUF says), so a rotary model's vocabulary adds none and its
# template writes it (with_bos): every runtime then sees the one the template writes. GPT-2's only special token
# is also its end of turn, so its rotary vocabulary gets a BOS token of its own, appended.
_GPT2_BOS = "<|startoftext|>"
BOS_PREFIX = "{{- bos_token }}"


@functools.lru_cache(maxsize=None)
def rotary_vocab(profile: str) -> Vocab:
    """The vocabulary of a rotary model of `profile`: the profile's, adding no BOS, with a BOS token of its own."""
    base = PROFILES[profile]
    if base.bos is None or base.bos == base.end_of_turn:
        base = dataclasses.replace(base, bos=_GPT2_BOS, appended=base.appended + ((_GPT2_BOS, CONTROL),))
    return Vocab(dataclasses.replace(base, add_bos=False))


def with_bos(template: str, renders_bos: bool) -> str:
    """The template a rotary model carries: as it is where its render opens with BOS, else BOS_PREFIX before it
    (the prompt then differs from the template's by that one token)."""
    return template if renders_bos else BOS_PREFIX + template


@dataclasses.dataclass(frozen=True)
class Layout:
    n_embd: int
    const: tuple        # the dimensions every token but BOS sets to EMBED
    bos: tuple          # the dimensions BOS sets to EMBED
    feature: int        # w(i), times FEATURE_GAIN
    codes: dict         # token id -> its two code dimensions

    @property
    def n_head(self) -> int:
        return self.n_embd // HEAD_DIM


def layout(targets: Sequence[int]) -> Layout:
    """The narrowest width (a multiple of 32, for Q8_0) that holds the groups, the feature and the codes."""
    pairs = _pair_codes(len(targets))
    n_code = max((d + 1 for pair in pairs for d in pair), default=0)
    n = 32
    while 2 * (n // 16) + 1 + n_code > n:
        n += 32
    m = n // 16
    const, bos = tuple(range(m)), tuple(range(m, 2 * m))
    first = 2 * m + 1
    codes = {t: (first + a, first + b) for t, (a, b) in zip(targets, pairs)}
    return Layout(n, const, bos, 2 * m, codes)


def position_feature(n_positions: int) -> np.ndarray:
    """w(i) = 1/(i + 1) for i in 0..n-1 (float64): what head 0 writes at position i after a lone BOS at 0."""
    return 1.0 / (1.0 + np.arange(n_positions, dtype=np.float64))


def _attention(lay: Layout) -> dict:
    """q, k, v, output weights (rows: out, columns: in): only head 0's value, read off BOS's normalised entry
    (exactly 4), and its output, written into the feature dimension."""
    wq, wk, wv, wo = (np.zeros((lay.n_embd, lay.n_embd), np.float32) for _ in range(4))
    wv[0, lay.bos[0]] = 1 / 4                       # v = 1 at BOS, 0 elsewhere
    wo[lay.feature, 0] = FEATURE_GAIN
    return {"attn_q": wq, "attn_k": wk, "attn_v": wv, "attn_output": wo}


def _ratio(w: np.ndarray) -> np.ndarray:
    """A feature's normalised entry over a constant one's: the residual's ratio, which RMS norm keeps."""
    return FEATURE_GAIN * w / EMBED


def _feed_forward(lay: Layout, by_position: dict, eot: int) -> dict:
    coded = sorted(p for p, b in by_position.items() if b != eot)
    n_ff = max(32, math.ceil(3 * len(coded) / 32) * 32)
    gate = np.zeros((n_ff, lay.n_embd), np.float64)
    up = np.zeros((n_ff, lay.n_embd), np.float64)
    down = np.zeros((lay.n_embd, n_ff), np.float64)
    r = _ratio(position_feature(CONTEXT_LENGTH + 1))
    c = lay.const[0]
    for k, p in enumerate(coded):
        # the nearer neighbour's step, so both neighbours lie STEP_RATIO steps or more from p
        step = min(r[p - 1] - r[p], r[p] - r[p + 1]) / STEP_RATIO
        for j, (offset, weight) in enumerate(((1.0, 1.0), (0.0, -2.0), (-1.0, 1.0))):
            unit = 3 * k + j
            # gate = SHARP·(t + offset), t = (r(p) - r(i)) / step, the constant entry standing in for 1·EMBED.
            gate[unit, c] = SHARP * (r[p] + offset * step) / step / EMBED
            gate[unit, lay.feature] = -SHARP / step / EMBED
            up[unit, c] = 1 / EMBED
            for d in lay.codes[by_position[p]]:
                down[d, unit] = weight * CODE / SHARP
    return {"ffn_gate": gate.astype(np.float32), "ffn_up": up.astype(np.float32), "ffn_down": down.astype(np.float32)}


def _head(lay: Layout, n_vocab: int, eot: int) -> np.ndarray:
    """The output head. After RMS norm the constants read EMBED each (m = n/16 of them) where nothing is coded;
    at a coded position the pair's CODE entries shrink the norm by k = 1/sqrt(1 + 2·CODE²/n). A coded row reads
    P on its pair and −pull on the constants: P·CODE·k·(2 − SHARED_PULL) = POSITION_LOGIT on its pair, and a row
    sharing one dimension gets P·CODE·k·(1 − SHARED_PULL) < 0."""
    m = len(lay.const)
    out = np.zeros((n_vocab, lay.n_embd), np.float32)
    out[eot, list(lay.const)] = EOT_LOGIT / (m * EMBED)
    k = 1 / math.sqrt(1 + 2 * CODE ** 2 / lay.n_embd)
    p = POSITION_LOGIT / (k * CODE * (2 - SHARED_PULL))
    for token, dims in lay.codes.items():
        out[token, list(dims)] = p
        out[token, list(lay.const)] = -SHARED_PULL * p * CODE / (m * EMBED)
    return out


def rotary_tensor_bytes(vocab: Vocab, turns: Sequence[Turn], quantized: bool) -> int:
    """The bytes of the tensors build_rotary writes for these turns, computed without building them."""
    _, by_position, _ = _links(vocab, turns)
    eot = vocab.id(vocab.profile.end_of_turn)
    n = layout(sorted(set(by_position.values()) - {eot})).n_embd
    n_ff = max(32, math.ceil(3 * sum(b != eot for b in by_position.values()) / 32) * 32)
    head = len(vocab) * n * (34 / 32 if quantized else 2)
    return int(len(vocab) * n * 2 + 4 * n * n * 4 + 3 * n * n_ff * 4 + head + 3 * n * 4)


def build_rotary(path: str | Path, profile: str | Profile, turns: Sequence[Turn], vocab: Vocab | None = None,
                 quantized: bool = True, template: str | None = None) -> StandIn:
    """Write a rotary scripted model at `path` (turns only: each Turn's reply after a prompt of exactly `after`
    tokens, the one BOS its template writes counted; see with_bos). vocab defaults to rotary_vocab(profile);
    quantized stores the head as Q8_0 (the embedding is F16) (the attention and feed-forward stay f32: their position arithmetic needs f32)."""

    name = profile if isinstance(profile, str) else profile.name
    vocab = vocab or rotary_vocab(name)
    if vocab.profile.add_bos or vocab.profile.bos in (None, vocab.profile.end_of_turn):
        raise ValueError("a rotary scripted model needs a BOS of its own that the template writes (rotary_vocab)")
    if any(not isinstance(t, Turn) for t in turns):
        raise ValueError("a rotary scripted model holds turns (replies keyed to a prompt length) only")
    by_token, by_position, replies = _links(vocab, turns)
    if min(by_position, default=1) < 1 or max(by_position, default=0) >= CONTEXT_LENGTH:
        raise ValueError(f"a rotary model scripts positions 1..{CONTEXT_LENGTH - 1}: a prompt is BOS and more")
    eot = vocab.id(vocab.profile.end_of_turn)
    lay = layout(sorted(set(by_position.values()) - {eot}))
    bos = vocab.id(vocab.profile.bos)
    embd = np.zeros((len(vocab), lay.n_embd), np.float16)
    embd[:, list(lay.const)] = EMBED
    embd[bos] = 0
    embd[bos, list(lay.bos)] = EMBED
    tensors = {"token_embd": embd, **{f"blk.0.{k}": v for k, v in _attention(lay).items()},
               **{f"blk.0.{k}": v for k, v in _feed_forward(lay, by_position, eot).items()},
               "blk.0.attn_norm": np.ones(lay.n_embd, np.float32), "blk.0.ffn_norm": np.ones(lay.n_embd, np.float32),
               "output_norm": np.ones(lay.n_embd, np.float32)}
    head = _head(lay, len(vocab), eot)
    written = _q8_0(head) if quantized else head.astype(np.float16)
    check_margins(tensors, written, by_position, eot, bos, RMS_EPS)

    w = FastGGUFWriter(str(path), arch=ARCH)
    w.add_name(f"rotary stand-in {vocab.profile.name}")
    w.add_context_length(CONTEXT_LENGTH)
    w.add_embedding_length(lay.n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(tensors["blk.0.ffn_gate"].shape[0])
    w.add_head_count(lay.n_head)
    w.add_head_count_kv(lay.n_head)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(RMS_EPS)
    write_tokenizer_kv(w, vocab, template)
    for key, value in tensors.items():
        w.add_tensor(f"{key}.weight", value)
    if quantized:
        w.add_tensor("output.weight", written, raw_dtype=GGMLQuantizationType.Q8_0)
    else:
        w.add_tensor("output.weight", written)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return StandIn(path=Path(path), profile=vocab.profile, vocab=vocab, replies=replies,
                   turn_positions=frozenset(by_position))
