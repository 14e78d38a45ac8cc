"""The embedded backend: a GGUF loaded in this process through llama-cpp-python. The only backend that holds a
lazy grammar (its sampler is ours) and that batches the first replies of many samples.

A context keeps the prompt it last read, and a prompt that extends it is read from where they part. A run sends
prompts of a few kinds in turn (fallback at every step: the model's own prompt, then the retry under a preamble
that opens differently), and in one context each kind evicts the other, so every step would read its whole prompt
again. The backend therefore holds up to CONTEXTS contexts on the same file (its weights are memory-mapped, so
read into memory once) and sends each prompt to the one that already holds the longest part of it. A request
asked again (fallback's first attempt is native's) is answered from the replies already written
(harness.backends.embedded.reply_memo)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import llama_cpp
from llama_cpp._internals import LlamaModel

from harness.backends.base import Backend
from harness.backends.embedded.batch import generate_samples
from harness.backends.embedded.decoding import prompt_token_ids, shared_prefix, token_bytes
from harness.backends.embedded.generate import LOADING, generate, load_model
from harness.backends.embedded.reply_memo import ReplyMemo, request_key
from harness.core.replies import Generation

# Contexts one backend may hold: the model's own prompt, fallback's retry held to a call and its answer-or-call
# steps after a tool ran each keep their own. Each costs its KV cache (about 50 MB for a 0.5B model at 4096
# positions), not the weights.
CONTEXTS = 3


class EmbeddedBackend(Backend):
    name = "embedded"
    holds_grammar = True
    batches_samples = True
    loads_model_files = True
    contexts = CONTEXTS     # a subclass with 1 reads every prompt in one context (benchmarks/context_pool_bench.py)

    def __init__(self, llm, path: str | None = None, load_context=None):
        """load_context: makes another context on the same model file (None: this one context only)."""
        self.llm, self.path = llm, path
        self._contexts, self._load_context = [llm], load_context
        self._last_used = [0]
        self.memo = ReplyMemo()

    @classmethod
    def load(cls, path: str | Path, *, n_ctx: int, n_threads: int | None = None) -> "EmbeddedBackend":
        load = lambda: load_model(path, n_ctx=n_ctx, n_threads=n_threads)  # noqa: E731
        return cls(load(), str(path), load_context=load)

    def _context_for(self, prompt: str):
        """The context whose held prompt shares the most with `prompt` (the least recently used on a tie); a new
        one, while fewer than CONTEXTS are open, when none holds half of it (an empty one first)."""
        if self._load_context is None or self.contexts == 1:
            return self.llm
        ids = prompt_token_ids(self.llm, prompt)
        shares = [shared_prefix(c, ids) for c in self._contexts]
        best = max(range(len(self._contexts)), key=lambda i: (shares[i], -self._last_used[i]))
        if 2 * shares[best] < len(ids):
            empty = [i for i, c in enumerate(self._contexts) if c.n_tokens == 0]
            if empty:
                best = empty[0]
            elif len(self._contexts) < self.contexts:
                self._contexts.append(self._load_context())
                self._last_used.append(0)
                best = len(self._contexts) - 1
        self._last_used[best] = max(self._last_used) + 1
        return self._contexts[best]

    @staticmethod
    def prompt_tokenizer(path: str | Path):
        """prompt -> the token ids generate() feeds a model of this vocabulary (special tokens parsed, the BOS
        rule applied), from a GGUF opened vocabulary-only: no weights, no context."""
        # Llama(vocab_only=True) would still open a context and warn about it: the model alone is enough.
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        with LOADING:
            model = LlamaModel(path_model=str(path), params=params, verbose=False)
        tokenizer = SimpleNamespace(tokenize=model.tokenize, token_bos=model.token_bos, _model=model)
        return lambda prompt: prompt_token_ids(tokenizer, prompt)

    def complete(self, prompt: str, sampling: dict, seed: int, grammar=None, *, bos_token: str = "",
                 timeout: float | None = None) -> Generation:
        # bos_token is not needed: the prompt is tokenized here, where the vocabulary's BOS rule is applied.
        return self.memo.answer(request_key(prompt, sampling, (seed,), grammar), lambda: [
            generate(self._context_for(prompt), prompt, seed=seed, timeout=timeout, grammar=grammar, **sampling)])[0]

    def complete_many(self, prompt: str, sampling: dict, seeds: Sequence[int], *,
                      timeout: float | None = None) -> list:
        # A batch is its own request: its replies may differ from one-at-a-time ones by the batch's arithmetic.
        return self.memo.answer(request_key(prompt, sampling, ("batch", *seeds)), lambda: generate_samples(
            self.llm, prompt, len(seeds), seeds=seeds, timeout=timeout, **sampling).generations)

    def forget(self) -> None:
        """Empty every context and the memo: the next prompts are read from the start and every reply is written
        (a benchmark's cold arm)."""
        for llm in self._contexts:
            llm.reset()
        self.memo.clear()

    def decoded_tokens(self) -> int:
        """Tokens llama.cpp has decoded in this backend's contexts so far, prompts and replies (its own count)."""
        counts = [llama_cpp.llama_perf_context(c._ctx.ctx) for c in self._contexts]
        return sum(perf.n_p_eval + perf.n_eval for perf in counts)

    def embedded_template(self) -> str | None:
        """The chat template the GGUF carries (tokenizer.chat_template), None when it has none."""
        return self.llm.metadata.get("tokenizer.chat_template") or None

    def special_tokens(self) -> tuple:
        """(BOS, EOS) as text, special tokens kept; '' for a token the vocabulary lacks."""
        return self._token_text(self.llm.token_bos()), self._token_text(self.llm.token_eos())

    def _token_text(self, token: int) -> str:
        return token_bytes(self.llm, token).decode("utf-8", errors="replace") if token >= 0 else ""

    def describe(self) -> dict:
        return {"backend": self.name, "path": self.path, "binding": f"llama-cpp-python {llama_cpp.__version__}",
                "threads": getattr(self.llm, "n_threads", None)}

    def close(self) -> None:
        for llm in self._contexts:
            llm.close()
