"""A numpy forward pass of a one-block llama GGUF (harness.scripted.rotary), in f32 as a runtime on CPU runs it:
the builder checks every position's logits with it before writing a model, and the tests check a written file
(read back with gguf's reader) against llama.cpp and mistral.rs.

It is the whole block (RMS norm, rotary attention over the causal prefix, SwiGLU, output norm and head), not the
builder's own arithmetic run again: a weight that does not do what the builder meant shows here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.scripted.builder import MIN_MARGIN

# The one-block llama the rotary scripted models are (harness.scripted.rotary builds them with these numbers).
HEAD_DIM = 4                  # the width mistral.rs and llama.cpp were checked with; queries and keys are zero
ROPE_BASE = 10000.0           # llama's default: with no query or key the rotary embedding changes nothing

CHUNK = 512     # query positions per attention step: 512 × 8192 scores per head


def _rms(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)) * weight).astype(np.float32)


def _rope(x: np.ndarray, positions: np.ndarray, base: float, head_dim: int) -> np.ndarray:
    """llama's rotary embedding as a llama GGUF takes it: dims 2j and 2j+1 of a head turn by pos·base^(-2j/d)."""
    inv = (1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)).astype(np.float32)
    angle = positions[:, None, None].astype(np.float32) * inv[None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def forward(tensors: dict, head_rows: np.ndarray, ids: np.ndarray, eps: float, base: float, head_dim: int):
    """Logits (positions × len(head_rows's rows)) of the sequence `ids` for the head rows given (rows of the
    head as f32: the others are zero in a scripted model, so their logits are 0)."""
    x = tensors["token_embd"][ids].astype(np.float32)
    n, d = x.shape
    n_head = tensors["blk.0.attn_q"].shape[0] // head_dim
    h = _rms(x, tensors["blk.0.attn_norm"], eps)
    pos = np.arange(n)
    q = _rope((h @ tensors["blk.0.attn_q"].T).reshape(n, n_head, head_dim), pos, base, head_dim)
    k = _rope((h @ tensors["blk.0.attn_k"].T).reshape(n, n_head, head_dim), pos, base, head_dim)
    v = (h @ tensors["blk.0.attn_v"].T).reshape(n, n_head, head_dim)
    attn = np.empty((n, n_head, head_dim), np.float32)
    # A head whose queries and keys are all zero scores every key 0, so its softmax over the causal prefix is
    # exactly uniform: weights 1/(i + 1) (exp(0) = 1 summed i + 1 times, exact in f32), its output the mean of the
    # values so far. Computed so, without the n × n scores (the scripted models' heads are all of this kind: an
    # 8,192-position check then takes a second, not fifteen). Any other head takes the whole softmax below.
    flat = np.array([not q[:, h].any() and not k[:, h].any() for h in range(n_head)])
    if flat.any():
        weight = np.float32(1) / np.arange(1, n + 1, dtype=np.float32)
        attn[:, flat] = np.cumsum(v[:, flat], axis=0, dtype=np.float32) * weight[:, None, None]
    scored = np.flatnonzero(~flat)
    scale = np.float32(1 / np.sqrt(head_dim))
    for start in range(0, n, CHUNK) if scored.size else ():
        stop = min(n, start + CHUNK)
        scores = np.einsum("qhd,khd->hqk", q[start:stop][:, scored], k[:stop][:, scored]) * scale
        causal = np.arange(stop)[None, :] > np.arange(start, stop)[:, None]
        scores[:, causal] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        attn[start:stop, scored] = np.einsum("hqk,khd->qhd", weights, v[:stop][:, scored])
    x = x + attn.reshape(n, -1) @ tensors["blk.0.attn_output"].T
    h = _rms(x, tensors["blk.0.ffn_norm"], eps)
    gate, up = h @ tensors["blk.0.ffn_gate"].T, h @ tensors["blk.0.ffn_up"].T
    with np.errstate(over="ignore"):            # silu(-1e5): exp overflows to inf, the unit is exactly 0 (-0)
        silu = gate / (np.float32(1) + np.exp(-gate))
    x = x + (silu * up) @ tensors["blk.0.ffn_down"].T
    return _rms(x, tensors["output_norm"], eps) @ head_rows.T


def head_rows(written: np.ndarray) -> tuple:
    """(ids of the head's non-zero rows, those rows as f32): the head as stored, Q8_0 bytes (uint8) or floats."""
    if written.dtype == np.uint8:
        from gguf.quants import Q8_0
        rows = np.flatnonzero(np.any(written != 0, axis=1))
        return rows, Q8_0.dequantize_blocks(written[rows].reshape(-1, 34)).reshape(rows.size, -1).astype(np.float32)
    rows = np.flatnonzero(np.any(written != 0, axis=1))
    return rows, written[rows].astype(np.float32)


def position_ids(bos: int, other: int, n: int) -> np.ndarray:
    """A prompt of n tokens: BOS, then any token (every token but BOS has one embedding in a rotary model)."""
    ids = np.full(n, other, dtype=np.int64)
    ids[0] = bos
    return ids


def check_margins(tensors: dict, written: np.ndarray, by_position: dict, eot: int, bos: int, eps: float) -> None:
    """Every position from 1 on: the scripted token (the end of turn where none is) leads every other token by
    MIN_MARGIN, and no token but those two scores above the unscripted tokens' 0."""
    from harness.scripted.vocab import CONTEXT_LENGTH

    rows, head = head_rows(written)
    other = 1 if bos == 0 else 0
    logits = forward(tensors, head, position_ids(bos, other, CONTEXT_LENGTH), eps, ROPE_BASE, HEAD_DIM)
    where = {int(t): j for j, t in enumerate(rows)}
    for i in range(1, CONTEXT_LENGTH):
        want = by_position.get(i, eot)
        row = logits[i]
        top = row[where[want]] if want in where else 0.0
        others = np.delete(row, where[want]) if want in where else row
        rival = max(float(others.max(initial=0.0)), 0.0)
        if top - rival < MIN_MARGIN:
            raise ValueError(f"position {i}: the scripted token {want} leads by only {top - rival:.1f}")
        above = [int(t) for t, v in zip(rows, row) if v > 0 and int(t) not in (want, eot)]
        if above:
            raise ValueError(f"position {i}: token {above[0]} scores above the unscripted tokens")


def read_tensors(path: Path) -> tuple:
    """(tensors as the forward pass takes them, the head as stored, rms eps) of a rotary GGUF on disk."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    tensors, head = {}, None
    for t in reader.tensors:
        name = t.name.removesuffix(".weight")
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        if name == "output":
            head = np.array(t.data).reshape(shape[0], -1)
        else:
            tensors[name] = np.array(t.data, dtype=np.float32).reshape(shape)
    eps = float(reader.fields["llama.attention.layer_norm_rms_epsilon"].parts[-1][0])
    return tensors, head, eps
