"""N samples of one prompt that share the prompt's evaluation: one prompt decode, one batch per step.

Llama() creates its context with one sequence, so this opens a second context on the same loaded weights
(`llm._model.model`, private to llama-cpp-python 0.3.36) with n_seq_max = N and a unified KV cache: the prompt
is decoded once into sequence 0, llama_memory_seq_cp shares its cells with sequences 1..N-1 (in a unified
cache a copy only tags the cells, it does not duplicate them), and each step decodes the last token of every
unfinished sequence in a single llama_batch. Each sequence has its own sampler chain, built exactly as
Llama.generate builds its own (penalties, grammar, top-k, typical, top-p, min-p, temperature, dist(seed)).

Determinism: the same prompt, n and seeds give the same samples, and with n=1 a sample equals
generate(..., seed) token for token. With n>1 llama.cpp computes the logits in a wider batch, whose float
rounding differs in the last bits from a single sequence's, so on a real model sample i can part from
generate(seed=seeds[i]) after some tokens (measured: SmolLM2-135M Q4_1, n=3, at tokens 13-17 of 40). The
stand-in tests, whose logits are exact, check that the chains and seeds themselves are the same.

Cost: generate() also avoids re-reading a prompt it has just read (Llama.generate reuses the evaluated prefix),
so what batching adds is decoding N tokens per llama_decode; on 2 loaded cores, 3 samples of 40 tokens after a
200-token prompt took 16 s batched against 19 s as three generate() calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import llama_cpp
from llama_cpp import Llama, LlamaGrammar

from harness.backends.embedded.decoding import (
    Reply, check_sampling, deadline_from, grammar_sampler, grammar_source, pick_seed, prepare_prompt,
)
from harness.core.errors import GenerationError
from harness.core.replies import Generation
from harness.core.values import DEFAULT_SAMPLING


@dataclass(frozen=True)
class Samples:
    generations: list[Generation]  # one per seed, in the order of the seeds
    prompt_tokens_evaluated: int  # prompt tokens sent through llama_decode: the prompt once, for all samples
    decoded_tokens: int  # llama.cpp's own count (perf counters) of every token decoded in the batch context


def sampler_chain(llm: Llama, seed: int, temperature: float, top_p: float, top_k: int, min_p: float,
           repeat_penalty: float, grammar: tuple[str, str] | None):
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    add = lambda s: llama_cpp.llama_sampler_chain_add(chain, s)  # noqa: E731  (the chain owns what it is given)
    try:
        add(llama_cpp.llama_sampler_init_penalties(llm.n_vocab(), llm.last_n_tokens_size, repeat_penalty, 0.0, 0.0))
        if grammar is not None:
            add(grammar_sampler(llm, grammar))
        if temperature == 0:
            add(llama_cpp.llama_sampler_init_greedy())
        else:
            add(llama_cpp.llama_sampler_init_top_k(top_k))
            add(llama_cpp.llama_sampler_init_typical(1.0, 1))
            add(llama_cpp.llama_sampler_init_top_p(top_p, 1))
            add(llama_cpp.llama_sampler_init_min_p(min_p, 1))
            add(llama_cpp.llama_sampler_init_temp(temperature))
            add(llama_cpp.llama_sampler_init_dist(seed))
    except Exception:
        llama_cpp.llama_sampler_free(chain)
        raise
    return chain


def _fill(batch, entries: Sequence[tuple[int, int, int, bool]]) -> None:
    """entries: (token, position, sequence, wants logits)."""
    for i, (token, pos, seq, logits) in enumerate(entries):
        batch.token[i] = token
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = logits
    batch.n_tokens = len(entries)


def _decode(ctx, batch) -> None:
    rc = llama_cpp.llama_decode(ctx, batch)
    if rc != 0:
        raise GenerationError(f"llama_decode returned {rc} in the batch context")


def generate_samples(llm: Llama, prompt: str, n: int, *, seeds: Sequence[int], max_tokens: int,
                     temperature: float = DEFAULT_SAMPLING["temperature"], top_p: float = DEFAULT_SAMPLING["top_p"],
                     top_k: int = DEFAULT_SAMPLING["top_k"], min_p: float = DEFAULT_SAMPLING["min_p"],
                     repeat_penalty: float = DEFAULT_SAMPLING["repeat_penalty"],
                     grammar: LlamaGrammar | str | None = None, deadline: float | None = None,
                     timeout: float | None = None, stop_strings: Sequence[str] = ()) -> Samples:
    """Write n replies to one rendered prompt, reading the prompt once. seeds[i] seeds sample i.

    Same rules as generate() per sample; the deadline is shared and ends every unfinished sample."""
    check_sampling(max_tokens, temperature, top_p, top_k, min_p, repeat_penalty)
    if not isinstance(grammar, (LlamaGrammar, str, type(None))):
        # A GrammarSpec needs a GrammarGate per sequence beside sampling (harness.backends.embedded.gated); the batch's sampler
        # chains hold none, so grammar-mode samples are written one by one with generate().
        raise GenerationError("generate_samples takes GBNF text or a LlamaGrammar; write samples under a "
                              "GrammarSpec one by one with generate()")
    if n < 1:
        raise GenerationError(f"n={n}: ask for at least one sample")
    if n > llama_cpp.llama_max_parallel_sequences():
        raise GenerationError(f"n={n}: llama.cpp decodes at most {llama_cpp.llama_max_parallel_sequences()} "
                              "sequences in one context")
    if len(seeds) != n:
        raise GenerationError(f"{len(seeds)} seeds for {n} samples")
    seeds = [pick_seed(s) for s in seeds]
    ends = deadline_from(deadline, timeout)
    started = time.monotonic()
    ids, limit = prepare_prompt(llm, prompt, max_tokens)
    source = grammar_source(grammar)
    replies = [Reply(llm, limit, stop_strings, None) for _ in range(n)]
    if ends is not None and started >= ends:
        for r in replies:
            r.finish("deadline")
        return Samples([r.result(len(ids), started, s) for r, s in zip(replies, seeds)], 0, 0)

    params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
    params.n_seq_max = n
    params.kv_unified = True
    params.n_ctx = len(ids) + n * limit  # the prompt's cells are shared; each sample adds at most `limit`
    params.n_batch = max(params.n_batch, n)
    params.n_ubatch = max(params.n_ubatch, n)
    params.no_perf = False
    chains, ctx, batch = [], None, None
    try:
        chains = [sampler_chain(llm, s, temperature, top_p, top_k, min_p, repeat_penalty, source) for s in seeds]
        ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not ctx:
            raise GenerationError(f"llama.cpp could not create a context for {n} sequences of "
                                  f"{params.n_ctx} cells")
        batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
        mem = llama_cpp.llama_get_memory(ctx)

        step = params.n_batch
        for at in range(0, len(ids), step):
            chunk = ids[at:at + step]
            last = at + len(chunk) == len(ids)
            _fill(batch, [(t, at + i, 0, last and i == len(chunk) - 1) for i, t in enumerate(chunk)])
            _decode(ctx, batch)
        for s in range(1, n):
            llama_cpp.llama_memory_seq_cp(mem, 0, s, -1, -1)
        logits_at = {s: batch.n_tokens - 1 for s in range(n)}  # every sample starts from the prompt's logits

        pos = len(ids)
        active = list(range(n))
        while True:
            sampled = {s: llama_cpp.llama_sampler_sample(chains[s], ctx, logits_at[s]) for s in active}
            for s in active:
                if replies[s].push(sampled[s]):
                    llama_cpp.llama_memory_seq_rm(mem, s, -1, -1)
            active = [s for s in active if replies[s].finish_reason is None]
            if not active:
                break
            if ends is not None and time.monotonic() >= ends:
                for s in active:
                    replies[s].finish("deadline")
                break
            _fill(batch, [(sampled[s], pos, s, True) for s in active])
            _decode(ctx, batch)
            logits_at = {s: i for i, s in enumerate(active)}
            pos += 1
        perf = llama_cpp.llama_perf_context(ctx)
        decoded = perf.n_p_eval + perf.n_eval
    finally:
        for c in chains:
            llama_cpp.llama_sampler_free(c)
        if batch is not None:
            llama_cpp.llama_batch_free(batch)
        if ctx:
            llama_cpp.llama_free(ctx)
    return Samples([r.result(len(ids), started, s) for r, s in zip(replies, seeds)], len(ids), decoded)
