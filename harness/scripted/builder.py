"""Scripted models (stand-ins): real vocabularies, tiny scripted weights.

A stand-in is a one-block GPT-2-architecture GGUF that loads and runs in llama.cpp like any model, with the
tokenizer of a real family (copied from llama.cpp's `models/ggml-vocab-*.gguf`, plus the edits that make it
that family's), a chat template, and weights that make it write scripted replies. Any llama.cpp-based runtime
serves it (`harness scripted-model`, docs/scripted-models.md); the tests use it to drive the real binding end
to end without a multi-GB download.

How the weights script a reply. Attention and feed-forward are zero, so the residual stream that reaches the
output head is the token embedding plus the (learned, absolute) position embedding. Both are one-hot:
- every token named in a `Script` has its own token slot, all other tokens share slot 0; the head maps a token
  slot to the token that follows it. That is a first-order lookup "next = f(current token)": the last prompt
  token (the script's trigger) picks the first reply token, each reply token the next. A token has one
  successor per model, so a reply cannot repeat a token (Vocab.segment spells text without repeats), but a
  `loop` script can run forever.
- every position named by a `Turn` sets a position slot, ~8x stronger than a token slot; the head maps it to
  the token scripted for the next position. Positions that lead to the same token share its slot, so the
  model's width grows with the distinct tokens of the replies, not with their length. A `Turn(after=N, reply)`
  is written after a prompt of exactly N tokens (Vocab.prompt_ids counts them), whatever the prompt says;
  replies may repeat any token, and turns at different prompt lengths script a multi-turn conversation. A
  turn owns its positions for every prompt: a first-order reply that runs into them (a `loop` script, say) is
  taken over by the turn, so keep first-order prompts and replies below StandIn.turn_positions, or build them
  into a separate model.
- a model of turns alone is built compact: a position's token is named by a pair of position dimensions
  instead of a slot of its own, d dimensions naming d(d-1)/2 tokens, and a position whose next token is the end
  of turn names none (the end of turn is what an unscripted position writes). The width is most of the work
  per generated token (the head is vocabulary × width): the runtime-conformance suite's models shrink from 128
  to 32. A head row that shares one dimension with the pair would get about half the logit, so the output
  norm's bias pulls every code dimension down until such a row is below 0: off the script (where a runtime's
  grammar refuses the scripted token) the model ranks the other tokens in the tiers a one-slot model has: the end
  of turn first, then every unscripted token at 0, then the other scripted tokens below (their order among
  themselves is the encoding's). The margin check below holds every compact model to that.
Anything unscripted is followed by the profile's end-of-turn token. build_standin computes the logits of
every scripted state from the weights it writes and refuses a model whose margins are too small.
For replies that depend on more than this, drive generation with a grammar (llama.cpp grammars can name
control tokens as `<|python_tag|>` or `<[id]>`).

The vocabularies and profiles live in harness.scripted.vocab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import Q8_0

from harness.scripted.vocab import (
    CONTEXT_LENGTH, PROFILES, FastGGUFWriter, Item, Profile, Vocab, vocab_for, write_vocab_kv,
)

# Logits of the scripted next token (every unscripted token gets ~0): e^-40 times a 152k vocabulary is
# ~1e-12, so sampling at any usual temperature, after a repeat penalty, still picks the scripted token.
TOKEN_LOGIT = 40.0  # a token slot alone (first-order lookup)
POSITION_LOGIT = 56.0  # a position slot, which also outweighs the token slot present at the same time
POSITION_GAIN = 8.0  # position slots are this much stronger than token slots in the residual stream
CODE_PULL = 0.6  # compact models: the output norm's bias on a code dimension, in units of an active one
MIN_MARGIN = 25.0  # build_standin refuses weights whose scripted token leads the runner-up by less
WEIGHTS_VERSION = 2  # changes when the same scripts get other weights (2: compact models of turns alone)


# --- scripts and the model --------------------------------------------------------------------------

@dataclass(frozen=True)
class Script:
    """First-order: after `trigger` (the last prompt token) the model writes `reply`, token by token.

    With loop=True the last reply token leads back to the first, so the model never stops by itself;
    otherwise it leads to the profile's end-of-turn token (so ending `reply` with it is optional)."""

    trigger: Item
    reply: tuple[Item, ...]
    loop: bool = False


@dataclass(frozen=True)
class Turn:
    """Position-keyed: after a prompt of exactly `after` tokens the model writes `reply` (any tokens, repeats
    allowed). End the reply with an end-of-generation token, or it continues by the first-order lookup."""

    after: int
    reply: tuple[Item, ...]


@dataclass
class StandIn:
    path: Path
    profile: Profile
    vocab: Vocab
    replies: list[list[int]]  # the token ids of each script's or turn's reply, in the order given
    turn_positions: frozenset[int]  # positions whose next token a Turn decides, whatever the prompt

    def id(self, item: Item) -> int:
        return self.vocab.id(item)


def _links(vocab: Vocab, scripts: Sequence[Script | Turn]):
    """Token successors (first-order) and position successors (turns), checked for contradictions."""
    by_token: dict[int, int] = {}
    by_position: dict[int, int] = {}
    replies: list[list[int]] = []

    def link(table: dict[int, int], key: int, nxt: int, what: str) -> None:
        if table.get(key, nxt) != nxt:
            raise ValueError(f"{what} would be followed by both {vocab.tokens[table[key]]!r} and "
                             f"{vocab.tokens[nxt]!r}")
        table[key] = nxt

    for n, s in enumerate(scripts):
        ids = [vocab.id(x) for x in s.reply]
        if not ids:
            raise ValueError(f"script {n}: empty reply")
        if isinstance(s, Turn):
            if not 1 <= s.after or s.after + len(ids) > CONTEXT_LENGTH:
                raise ValueError(f"turn {n}: after={s.after} does not fit positions 1..{CONTEXT_LENGTH}")
            for k, tid in enumerate(ids):  # the token at position p yields the token at p + 1
                link(by_position, s.after - 1 + k, tid, f"turn {n}: position {s.after - 1 + k}")
        else:
            chain = [vocab.id(s.trigger), *ids] + ([ids[0]] if s.loop else [])
            for a, b in zip(chain, chain[1:]):
                link(by_token, a, b, f"script {n}: token {a} ({vocab.tokens[a]!r})")
        replies.append(ids)
    return by_token, by_position, replies


def _q8_0(values: np.ndarray) -> np.ndarray:
    """Q8_0 bytes of a matrix. gguf's quantize() goes row by row (seconds for a 152k-row head); its block
    quantizer over the rows at once gives the same bytes. An all-zero block is all-zero bytes (scale 0, values
    0), and a head has a few hundred non-zero rows out of 152k: only those are quantized."""
    blocks = np.zeros((values.shape[0], values.shape[1] // 32 * 34), dtype=np.uint8)
    rows = np.flatnonzero(np.any(values != 0, axis=1))
    if rows.size:
        blocks[rows] = Q8_0.quantize_blocks(values[rows].astype(np.float32).reshape(-1, 32)).reshape(rows.size, -1)
    return blocks


def _pair_codes(n: int) -> list:
    """n distinct pairs of code dimensions, in the order that needs the fewest: (0,1), (0,2), (1,2), (0,3)…"""
    pairs, j = [], 1
    while len(pairs) < n:
        pairs += [(i, j) for i in range(j)][:n - len(pairs)]
        j += 1
    return pairs


def _active_code_entry(n_embd: int) -> float:
    """A code dimension after layer norm when the residual is the unscripted token slot (1) and a pair code
    (POSITION_GAIN on two dimensions)."""
    mean = (1 + 2 * POSITION_GAIN) / n_embd
    var = (1 + 2 * POSITION_GAIN ** 2) / n_embd - mean ** 2
    return (POSITION_GAIN - mean) / math.sqrt(var + 1e-5)


def _check_margins(out: np.ndarray, embd: np.ndarray, pos: np.ndarray, by_token, by_position, eot,
                   written: np.ndarray | None = None, bias: np.ndarray | None = None) -> None:
    """Run the output head (layer norm and its bias, then the head) on every scripted state; the scripted token
    must lead. `written` is the head's Q8_0 bytes when it is stored quantized: the check runs on what llama.cpp
    reads (Q8_0 rounds an entry against the largest of its 32-wide block). With a bias (a compact model) no token
    but the scripted one and the end of turn may score above the unscripted tokens' 0."""
    rows = np.flatnonzero(np.any(out != 0, axis=1))  # every other token's logit is exactly 0
    if written is None:
        head = out[rows].astype(np.float32)
    else:
        head = Q8_0.dequantize_blocks(written[rows].reshape(-1, 34)).reshape(rows.size, -1)

    def check(x: np.ndarray, want: int, what: str) -> None:
        xn = (x - x.mean()) / np.sqrt(x.var() + 1e-5)
        logits = dict(zip(rows.tolist(), (head @ (xn if bias is None else xn + bias)).tolist()))
        top = logits.get(want, 0.0)
        rival = max([v for k, v in logits.items() if k != want] + [0.0])
        if top - rival < MIN_MARGIN:
            raise ValueError(f"{what}: scripted token leads by only {top - rival:.1f}")
        above = [k for k, v in logits.items() if v > 0 and k not in (want, eot)]
        if bias is not None and above:
            raise ValueError(f"{what}: token {above[0]} scores above the unscripted tokens")

    for tok, nxt in by_token.items():
        check(embd[tok].astype(np.float32), nxt, f"token {tok}")
    unscripted = np.zeros(embd.shape[1], dtype=np.float32)
    unscripted[0] = 1.0
    check(unscripted, eot, "an unscripted token")
    for p, nxt in by_position.items():
        # at a scripted position the current token may be anything: try an unscripted one and each scripted one
        for tok in [None, *by_token]:
            x = pos[p].astype(np.float32).copy()
            x[0 if tok is None else np.flatnonzero(embd[tok])[0]] += 1.0
            check(x, nxt, f"position {p}")


def _layout(by_token: dict, by_position: dict, eot: int, quantized: bool) -> tuple:
    """(token slots, compact, code targets, their codes, code width, model width) of a stand-in."""
    n_tok_slots = 1 + len(by_token)  # slot 0: every unscripted token
    compact = not by_token
    # A compact model's end of turn needs no code: a position without one writes it, as an unscripted one does.
    targets = sorted(set(by_position.values()) - ({eot} if compact else set()))
    dims = _pair_codes(len(targets)) if compact else [(i,) for i in range(len(targets))]
    n_code = max((d + 1 for code in dims for d in code), default=0)
    step = 32 if quantized else 16  # Q8_0 blocks are 32 wide
    n_embd = max(step, math.ceil((n_tok_slots + n_code) / step) * step)
    return n_tok_slots, compact, targets, dims, n_code, n_embd


def tensor_bytes(vocab: Vocab, scripts: Sequence[Script | Turn], quantized: bool) -> int:
    """The bytes of the tensors build_standin writes for these scripts (the file adds its header and
    vocabulary), computed without building them: so a caller can say what a batch of models will take first."""
    by_token, by_position, _ = _links(vocab, scripts)
    n = _layout(by_token, by_position, vocab.id(vocab.profile.end_of_turn), quantized)[-1]
    matrix = (34 / 32) if quantized else 4           # a Q8_0 block: 32 values in 34 bytes
    head = (34 / 32) if quantized else 2
    return int(len(vocab) * n * 2 + CONTEXT_LENGTH * n * 4 + 6 * n * n * matrix + len(vocab) * n * head
               + 12 * n * 4)


def build_standin(path: str | Path, profile: str | Profile, scripts: Sequence[Script | Turn],
                  vocab: Vocab | None = None, quantized: bool = False, template: str | None = None) -> StandIn:
    """Write a stand-in GGUF at `path` that follows `scripts` (vocab defaults to the session's cached one),
    carrying `template` as its chat template (default: the profile's).

    quantized=True stores the matrices as Q8_0 (exact for these weights), so llama.cpp runs the quantized
    matmul kernels and weight buffers a real model uses (F16/F32 stand-ins never reach them)."""
    profile = PROFILES[profile] if isinstance(profile, str) else profile
    vocab = vocab or (vocab_for(profile.name) if PROFILES.get(profile.name) is profile else Vocab(profile))
    by_token, by_position, replies = _links(vocab, scripts)
    eot = vocab.id(profile.end_of_turn)
    n_vocab = len(vocab)
    n_tok_slots, compact, targets, dims, n_code, n_embd = _layout(by_token, by_position, eot, quantized)
    code = {b: [n_tok_slots + d for d in c] for b, c in zip(targets, dims)}

    # After layer norm a lone one-hot entry is ~sqrt(n_embd); next to a position entry POSITION_GAIN times
    # larger it shrinks to ~sqrt(n_embd)/POSITION_GAIN, so the position's token wins there.
    tok_scale = TOKEN_LOGIT / math.sqrt(n_embd)
    active = _active_code_entry(n_embd) if compact else 0.0
    bias = np.zeros(n_embd, dtype=np.float32)
    bias[n_tok_slots:n_tok_slots + n_code] = -CODE_PULL * active
    pos_scale = POSITION_LOGIT / (2 * (1 - CODE_PULL) * active) if compact else POSITION_LOGIT / math.sqrt(n_embd)
    embd = np.zeros((n_vocab, n_embd), dtype=np.float16)
    out = np.zeros((n_vocab, n_embd), dtype=np.float16)
    pos = np.zeros((CONTEXT_LENGTH, n_embd), dtype=np.float32)
    embd[:, 0] = 1.0
    out[eot, 0] = tok_scale
    for slot, (a, b) in enumerate(sorted(by_token.items()), start=1):
        embd[a, 0] = 0.0
        embd[a, slot] = 1.0
        out[b, slot] = tok_scale
    for p, b in by_position.items():
        pos[p, code.get(b, [])] = POSITION_GAIN
    for b, dims_of_b in code.items():
        out[b, dims_of_b] = pos_scale
    head = _q8_0(out) if quantized else out
    _check_margins(out, embd, pos, by_token, by_position, eot, written=head if quantized else None,
                   bias=bias if compact else None)

    path = Path(path)
    w = FastGGUFWriter(str(path), arch="gpt2")
    write_vocab_kv(w, vocab, n_embd, template)
    zeros = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
    ones = np.ones(n_embd, dtype=np.float32)

    def matrix(name: str, values: np.ndarray) -> None:
        if quantized:
            w.add_tensor(name, values if values.dtype == np.uint8 else _q8_0(values), raw_dtype=GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, values)

    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("position_embd.weight", pos)
    w.add_tensor("blk.0.attn_norm.weight", ones)
    w.add_tensor("blk.0.attn_norm.bias", zeros(n_embd))
    matrix("blk.0.attn_qkv.weight", zeros(3 * n_embd, n_embd))
    w.add_tensor("blk.0.attn_qkv.bias", zeros(3 * n_embd))
    matrix("blk.0.attn_output.weight", zeros(n_embd, n_embd))
    w.add_tensor("blk.0.attn_output.bias", zeros(n_embd))
    w.add_tensor("blk.0.ffn_norm.weight", ones)
    w.add_tensor("blk.0.ffn_norm.bias", zeros(n_embd))
    matrix("blk.0.ffn_up.weight", zeros(n_embd, n_embd))
    w.add_tensor("blk.0.ffn_up.bias", zeros(n_embd))
    matrix("blk.0.ffn_down.weight", zeros(n_embd, n_embd))
    w.add_tensor("blk.0.ffn_down.bias", zeros(n_embd))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output_norm.bias", bias)
    matrix("output.weight", head)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return StandIn(path=path, profile=profile, vocab=vocab, replies=replies,
                   turn_positions=frozenset(by_position))
