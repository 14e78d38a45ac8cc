"""Shared pieces of local generation: results, prompt tokenization, token decoding, stop rules.

Decoding keeps special tokens: every token goes through llama_token_to_piece with special=True, bytes are
joined by an incremental UTF-8 decoder so a character split across byte tokens comes out whole, and a reply
ends at any end-of-generation token as llama.cpp defines them (llama_vocab_is_eog), whose text is left out.

Private binding access, pinned at llama-cpp-python 0.3.36: `llm._model.vocab`, the vocabulary handle that
llama_vocab_is_eog and llama_token_to_piece need (the binding's own completion reads it the same way).
"""

from __future__ import annotations

import codecs
import ctypes
import random
import time
from typing import Callable, Sequence

import llama_cpp
import numpy as np
from llama_cpp import Llama, LlamaGrammar

from harness.core.errors import GenerationError
from harness.core.replies import Generation, Timings
from harness.core.values import MAX_SEED

def prompt_token_ids(llm: Llama, prompt: str) -> list[int]:
    """Tokenize a rendered prompt with special tokens parsed, adding BOS only if the model wants one and the
    template did not already write it (llama-cpp-python's completion adds it unconditionally: double BOS)."""
    ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    bos = llm.token_bos()
    if llm._model.add_bos_token() and bos >= 0 and ids[:1] != [bos]:
        ids.insert(0, bos)
    return ids


def shared_prefix(llm: Llama, ids: list) -> int:
    """How many of `ids` the context already holds, from the start (what Llama.generate would not read again)."""
    held = llm.input_ids[: min(llm.n_tokens, len(ids))]
    differ = np.nonzero(held != np.asarray(ids[: len(held)], dtype=held.dtype))[0]
    return int(differ[0]) if len(differ) else len(held)


def token_bytes(llm: Llama, token: int) -> bytes:
    """A token's bytes with control tokens rendered as their text (the binding's helper caps pieces at 32 bytes)."""
    vocab = llm._model.vocab
    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
    return buf.raw[:n]


def deadline_from(deadline: float | None, timeout: float | None) -> float | None:
    ends = [d for d in (deadline, None if timeout is None else time.monotonic() + timeout) if d is not None]
    return min(ends) if ends else None


def check_sampling(max_tokens: int, temperature: float, top_p: float, top_k: int, min_p: float,
                    repeat_penalty: float) -> None:
    problems = []
    if max_tokens < 1:
        problems.append(f"max_tokens={max_tokens} (must be >= 1)")
    if temperature < 0:
        problems.append(f"temperature={temperature} (must be >= 0; 0 is greedy)")
    if not 0 < top_p <= 1:
        problems.append(f"top_p={top_p} (must be in (0, 1])")
    if top_k < 0:
        problems.append(f"top_k={top_k} (must be >= 0; 0 disables it)")
    if not 0 <= min_p <= 1:
        problems.append(f"min_p={min_p} (must be in [0, 1])")
    if repeat_penalty <= 0:
        problems.append(f"repeat_penalty={repeat_penalty} (must be > 0; 1 disables it)")
    if problems:
        raise GenerationError("bad sampling settings: " + "; ".join(problems))


def pick_seed(seed: int | None) -> int:
    if seed is None:
        return random.randint(0, MAX_SEED)
    if not 0 <= seed <= MAX_SEED:
        raise GenerationError(f"seed {seed} out of range 0..{MAX_SEED}")
    return seed


def grammar_source(grammar: LlamaGrammar | str | None) -> tuple[str, str] | None:
    if grammar is None:
        return None
    if isinstance(grammar, LlamaGrammar):
        return grammar._grammar, grammar._root
    return grammar, "root"


def grammar_sampler(llm: Llama, grammar: tuple[str, str]):
    """llama.cpp returns NULL for a grammar it cannot parse; adding NULL to a sampler chain would crash."""
    sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar[0].encode("utf-8"),
                                                   grammar[1].encode("utf-8"))
    if not sampler:
        raise GenerationError(f"llama.cpp could not parse the grammar (root {grammar[1]!r}):\n{grammar[0]}")
    return sampler


class Reply:
    """One reply being written: turns sampled ids into text and decides when it is finished."""

    def __init__(self, llm: Llama, limit: int, stop_strings: Sequence[str],
                 on_text: Callable[[str], None] | None):
        self.vocab = llm._model.vocab
        self.llm = llm
        self.limit = limit
        self.stops = tuple(s for s in stop_strings if s)
        self.on_text = on_text
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self.emitted = 0
        self.first_token_at: float | None = None
        self.finished_at: float | None = None

    def push(self, token: int) -> bool:
        """Take one sampled token; True when the reply is finished."""
        if self.first_token_at is None:
            self.first_token_at = time.monotonic()
        self.tokens.append(token)
        if llama_cpp.llama_vocab_is_eog(self.vocab, token):
            return self.finish("stop")
        self.text += self.decoder.decode(token_bytes(self.llm, token))
        if self.stops and self._cut_at_stop_string():
            return True
        if len(self.tokens) >= self.limit:
            return self.finish("length")
        self._emit(len(self.text) - self._partial_stop_len())
        return False

    def finish(self, reason: str) -> bool:
        if self.finish_reason is None:
            self.finish_reason = reason
            self.finished_at = time.monotonic()
            if reason != "stop_string":
                self.text += self.decoder.decode(b"", final=True)  # dangling bytes become U+FFFD, not lost
            self._emit(len(self.text))
        return True

    def _cut_at_stop_string(self) -> bool:
        start = max(0, self.emitted - max(map(len, self.stops)) + 1)
        hits = [i for i in (self.text.find(s, start) for s in self.stops) if i >= 0]
        if not hits:
            return False
        self.text = self.text[:min(hits)]
        return self.finish("stop_string")

    def _partial_stop_len(self) -> int:
        best = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.text)), best, -1):
                if self.text.endswith(s[:k]):
                    best = k
                    break
        return best

    def _emit(self, end: int) -> None:
        if self.on_text is not None and end > self.emitted:
            self.on_text(self.text[self.emitted:end])
        self.emitted = max(self.emitted, end)

    def result(self, prompt_tokens: int, started: float, seed: int, grammar_from: int | None = None,
               grammar_refused: int | None = None) -> Generation:
        first = self.first_token_at or self.finished_at or time.monotonic()
        end = self.finished_at or time.monotonic()
        gen_seconds = max(0.0, end - first)
        after_first = max(0, len(self.tokens) - 1)
        return Generation(
            text=self.text, tokens=list(self.tokens), prompt_tokens=prompt_tokens,
            completion_tokens=len(self.tokens), finish_reason=self.finish_reason or "length",
            timings=Timings(prompt_seconds=max(0.0, first - started), generation_seconds=gen_seconds,
                            tokens_per_second=after_first / gen_seconds if gen_seconds > 0 else 0.0),
            seed=seed, grammar_from=grammar_from, grammar_refused=grammar_refused)


def prepare_prompt(llm: Llama, prompt: str, max_tokens: int) -> tuple[list[int], int]:
    ids = prompt_token_ids(llm, prompt)
    if not ids:
        raise GenerationError("empty prompt: nothing to condition the reply on")
    n_ctx = llm.n_ctx()
    if len(ids) >= n_ctx:
        raise GenerationError(f"prompt of {len(ids)} tokens does not fit the context window of {n_ctx}")
    # The reply ends at the context window if that comes before max_tokens ("length" either way).
    return ids, min(max_tokens, n_ctx - len(ids))


