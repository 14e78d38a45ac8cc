"""Generation under a GrammarSpec: the token loop that holds a GrammarGate beside sampling.

Why not the binding's Llama.generate with the grammar in its sampler chain: a grammar in the chain is applied to
every candidate of every token (40-150 ms per token with a 150k vocabulary here) and llama.cpp's own lazy
sampler aborts the process on a trigger the grammar refuses. harness.grammar's author recommends the gate
instead: sample as usual; only if the gate refuses the token, sample again from the masked logits; accept.
Failures inside the gate are GrammarRuntimeError and propagate unwrapped (the tool loop retries unconstrained).

The loop keeps Llama's own bookkeeping (input_ids, n_tokens) so a later generate() still reuses the prefix.
The grammar-free path (harness.backends.embedded.generate) is untouched by this module and keeps its speed.
"""

from __future__ import annotations

import ctypes
import time

import llama_cpp
import numpy as np

from harness.backends.embedded.batch import sampler_chain
from harness.backends.embedded.decoding import Reply, shared_prefix
from harness.core.errors import GenerationError
from harness.backends.embedded.grammar_sampler import GrammarGate


class _Candidates:
    """One llama_token_data array over the whole vocabulary, refilled from logits for each sampling."""

    def __init__(self, n_vocab: int):
        self.n = n_vocab
        self.data = (llama_cpp.llama_token_data * n_vocab)()
        self.view = np.frombuffer(self.data, dtype=np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]))
        self.array = llama_cpp.llama_token_data_array(data=self.data, size=n_vocab, selected=-1, sorted=False)
        self.ids = np.arange(n_vocab, dtype=np.int32)

    def sample(self, chain, logits) -> int:
        self.view["id"] = self.ids
        self.view["logit"] = logits
        self.view["p"] = 0.0
        self.array.size, self.array.selected, self.array.sorted = self.n, -1, False
        llama_cpp.llama_sampler_apply(chain, ctypes.byref(self.array))
        if self.array.selected < 0:
            raise GenerationError("the sampler chain selected no token")
        return int(self.data[self.array.selected].id)


def _reuse_prefix(llm, ids: list) -> list:
    """What must still be evaluated of `ids`, after keeping the longest prefix already in the context (as
    Llama.generate does). At least one token is evaluated so the logits are fresh."""
    prefix = min(shared_prefix(llm, ids), len(ids) - 1)
    llm.n_tokens = prefix
    return ids[prefix:]


def generate_gated(llm, prompt: str, ids: list, reply: Reply, spec, *, seed: int, ends: float | None,
                   temperature: float, top_p: float, top_k: int, min_p: float,
                   repeat_penalty: float) -> tuple[int | None, int]:
    """Write `reply` for the tokenized prompt under `spec` (a GrammarSpec). `prompt` tells the gate whether
    the prompt already opened a reasoning block. Returns (the character offset in the reply where the grammar
    took over (0: not lazy), None when its trigger never fired; how many sampled tokens the grammar refused).
    The count is what says whether the grammar acted: a grammar that refused nothing left the reply as the
    model's own sampling wrote it."""
    gate = GrammarGate.for_spec(llm._model.vocab, spec, prompt)
    chain = sampler_chain(llm, seed, temperature, top_p, top_k, min_p, repeat_penalty, None)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llm._model.vocab)
    candidates = _Candidates(n_vocab)
    refused = 0
    try:
        todo = _reuse_prefix(llm, list(ids))
        while True:
            try:
                llm.eval(todo)
            except RuntimeError as exc:  # the binding raises RuntimeError when llama_decode fails
                raise GenerationError(f"llama.cpp failed while generating: {exc}") from exc
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,))
            token = candidates.sample(chain, logits)
            if not gate.allows(token):
                refused += 1
                token = candidates.sample(chain, gate.mask(logits))
            llama_cpp.llama_sampler_accept(chain, token)
            if not llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                gate.accept(token)  # may raise GrammarRuntimeError: left to the caller, unwrapped
            if reply.push(token):
                break
            if ends is not None and time.monotonic() >= ends:
                reply.finish("deadline")
                break
            todo = [token]
    finally:
        llama_cpp.llama_sampler_free(chain)
        gate.close()
    if gate.triggered_at is None:
        return None, refused
    return gate.text_offset(gate.triggered_at), refused
