"""The llama.cpp side of a GrammarSpec: the grammar sampler to put in a sampler chain, and where a lazy grammar
takes over (the same rule llama.cpp applies, read in Python, for checks and tests)."""

from __future__ import annotations

import ctypes
import re

import llama_cpp

from harness.core.errors import GrammarError, GrammarRuntimeError
from harness.formats.reasoning import prompt_opens


def make_sampler(vocab, gbnf: str, trigger_patterns=(), root: str = "root"):
    """A llama.cpp grammar sampler (llama_sampler_p) for `vocab` (llama_model_get_vocab / Llama._model.vocab):
    lazy (llama_sampler_init_grammar_lazy_patterns) when trigger_patterns are given. The caller adds it to a
    sampler chain (llama_sampler_chain_add, which then owns it) or frees it. llama.cpp returns NULL for a
    grammar or pattern it cannot parse; that is a GrammarError here, never a NULL in a chain."""
    patterns = list(trigger_patterns)
    if patterns:
        words = (ctypes.c_char_p * len(patterns))(*(p.encode("utf-8") for p in patterns))
        sampler = llama_cpp.llama_sampler_init_grammar_lazy_patterns(
            vocab, gbnf.encode("utf-8"), root.encode("utf-8"), words, len(patterns), (llama_cpp.llama_token * 0)(), 0)
    else:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), root.encode("utf-8"))
    if not sampler:
        raise GrammarError(f"llama.cpp could not parse the grammar (root {root!r}):\n{gbnf}")
    return sampler


def trigger_start(patterns, buffer: bytes) -> int | None:
    """Where llama.cpp's lazy grammar would start in `buffer` (the bytes generated so far), or None.

    Mirrors llama_grammar_trigger_pattern::find: a ^…$ pattern must match the whole buffer; others are searched
    anywhere ($ is the end of the buffer); the grammar starts at the first non-empty capture group, else at the
    match."""
    for pattern in patterns:
        source = pattern.encode("utf-8")
        if pattern.startswith("^") and pattern.endswith("$"):
            m = re.fullmatch(source[1:-1], buffer)
        else:
            m = re.search(source[:-1] + rb"\Z" if pattern.endswith("$") else source, buffer)
        if m:
            for i in range(1, (m.lastindex or 0) + 1):
                if m.group(i):
                    return m.start(i)
            return m.start()
    return None


class GrammarGate:
    """A grammar held beside sampling instead of inside the sampler chain, lazy in Python.

    Use: sample as usual; if not allows(token), sample again from mask(logits); then accept(token). Three
    reasons to prefer it to llama.cpp's own lazy sampler in a sampler chain:
    - cost: a grammar applied to every candidate costs 40-150 ms per token with a 150k vocabulary on this
      machine; a model that follows the grammar almost never needs that (llama.cpp's common sampler does the same);
    - triggers: llama.cpp runs each trigger regex over everything generated so far, after every token (O(n²):
      seconds on a long reply; a pattern with an unbounded repeat crashed it at 60k characters). Here
      anywhere-patterns only see the last WINDOW bytes (a match must end at the end);
    - reasoning: as the parsers read it, a reasoning block that opens the reply holds no call, so no trigger
      fires inside it, and ^-anchored patterns apply after it (a whole-reply call after `<think>…</think>`);
    - failures: a token the grammar refuses is never accepted, and a trigger whose text the grammar refuses is
      caught; both are GrammarRuntimeError (the tool loop retries once unconstrained) instead of an abort.
    Once a trigger fires, the text from the trigger on is tokenized again and fed to a plain grammar sampler:
    a grammar reads characters, so any tokenization of the same text leaves it in the same state."""

    WINDOW = 4096

    def __init__(self, vocab, gbnf: str, trigger_patterns=(), root: str = "root", reasoning=(), prompt: str = ""):
        self.vocab = vocab
        self.gbnf, self.root = gbnf, root
        self.patterns = tuple(trigger_patterns)
        # (open, close, opened by the prompt) per reasoning pair, as the parsers read reasoning.
        self.reasoning = tuple((o.encode("utf-8"), c.encode("utf-8"), prompt_opens(prompt, o)) for o, c in reasoning)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        self.sampler = None if self.patterns else make_sampler(vocab, gbnf, (), root)
        self.triggered_at: int | None = None if self.patterns else 0
        self._buffer = b""
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self._all = None
        self._piece = ctypes.create_string_buffer(256)

    @classmethod
    def for_spec(cls, vocab, spec, prompt: str = "") -> "GrammarGate":
        """`prompt` (the rendered generation prompt) tells whether it already opened a reasoning block."""
        return cls(vocab, spec.gbnf, spec.trigger_patterns, spec.root_for(prompt), spec.reasoning, prompt)

    @property
    def active(self) -> bool:
        return self.sampler is not None

    def allows(self, token: int) -> bool:
        return not self.active or self._apply_one(self.sampler, token)

    def _apply_one(self, sampler, token) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        self._one_array.size, self._one_array.selected = 1, -1
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(self._one_array))
        return self._one[0].logit != float("-inf")

    def mask(self, logits):
        """`logits` (n_vocab floats) with -inf for every token the grammar refuses (a copy)."""
        import numpy as np

        logits = np.asarray(logits, dtype=np.float32)[: self.n_vocab]
        if not self.active:
            return logits.copy()
        if self._all is None:
            self._all = (llama_cpp.llama_token_data * self.n_vocab)()
            self._view = np.frombuffer(self._all, dtype=np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]))
            self._array = llama_cpp.llama_token_data_array(data=self._all, size=self.n_vocab, selected=-1,
                                                           sorted=False)
        self._view["id"] = np.arange(self.n_vocab, dtype=np.int32)
        self._view["logit"] = logits
        self._view["p"] = 0.0
        self._array.size, self._array.selected, self._array.sorted = self.n_vocab, -1, False
        llama_cpp.llama_sampler_apply(self.sampler, ctypes.byref(self._array))
        out = np.full(self.n_vocab, -np.inf, dtype=np.float32)
        out[self._view["id"]] = self._view["logit"]
        if not np.isfinite(out).any():
            raise GrammarRuntimeError("the grammar allows no token here (llama.cpp would sample from nothing)")
        return out

    def accept(self, token: int) -> None:
        if self.active:
            if not self._apply_one(self.sampler, token):
                raise GrammarRuntimeError(f"token {token} is outside the grammar; accepting it would abort llama.cpp")
            llama_cpp.llama_sampler_accept(self.sampler, token)
            return
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._piece, len(self._piece), 0, True)
        if n < 0:  # a piece longer than the buffer: llama.cpp says how long
            self._piece = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, self._piece, len(self._piece), 0, True)
        self._buffer += self._piece.raw[:n]
        start = self._trigger()
        if start is not None:
            self._start(start)

    def _reasoning_end(self) -> int | None:
        """Where the text after a reasoning block that opens the reply starts (0: no such block), or None while
        the block is open (or may still be opening): nothing in it is a call."""
        buffer = self._buffer
        lead = len(buffer) - len(buffer.lstrip())
        rest = buffer[lead:]
        for open_tag, close_tag, opened in self.reasoning:
            if opened or rest.startswith(open_tag):
                end = buffer.find(close_tag, 0 if opened else lead + len(open_tag))
                return None if end < 0 else end + len(close_tag)
            if rest.startswith(close_tag):  # "no reasoning" written as a bare close tag
                return lead + len(close_tag)
            if open_tag.startswith(rest) or close_tag.startswith(rest):
                return None
        return 0

    def _trigger(self) -> int | None:
        base = self._reasoning_end()
        if base is None:
            return None
        buffer = self._buffer[base:]
        anywhere = [p for p in self.patterns if not p.startswith("^")]
        if anywhere:
            offset = max(0, len(buffer) - self.WINDOW)
            found = trigger_start(anywhere, buffer[offset:])
            if found is not None:
                return base + offset + found
        anchored = [p for p in self.patterns if p.startswith("^")]
        found = trigger_start(anchored, buffer) if anchored else None
        return None if found is None else base + found

    def _start(self, start: int) -> None:
        sampler = make_sampler(self.vocab, self.gbnf, (), self.root)
        replay = self._buffer[start:]
        n = -llama_cpp.llama_tokenize(self.vocab, replay, len(replay), None, 0, False, False)
        ids = (llama_cpp.llama_token * max(n, 1))()
        n = llama_cpp.llama_tokenize(self.vocab, replay, len(replay), ids, len(ids), False, False)
        for token in ids[:n]:
            if not self._apply_one(sampler, token):
                llama_cpp.llama_sampler_free(sampler)
                raise GrammarRuntimeError(f"a trigger fired on {replay!r}, which the grammar refuses "
                                          "(llama.cpp's lazy sampler would abort here)")
            llama_cpp.llama_sampler_accept(sampler, token)
        self.sampler, self.triggered_at = sampler, start

    def text_offset(self, byte_offset: int) -> int:
        """The character offset in the reply text of a byte offset in what the gate has read."""
        return len(self._buffer[:byte_offset].decode("utf-8", "replace"))

    def close(self) -> None:
        if self.sampler:
            llama_cpp.llama_sampler_free(self.sampler)
            self.sampler = None

    def __del__(self):
        self.close()
