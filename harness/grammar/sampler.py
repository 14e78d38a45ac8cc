"""The llama.cpp side of a GrammarSpec: the grammar sampler to put in a sampler chain, and where a lazy grammar
takes over (the same rule llama.cpp applies, read in Python, for checks and tests)."""

from __future__ import annotations

import ctypes
import re

import llama_cpp

from harness.errors import GrammarError


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


def spec_sampler(vocab, spec):
    """make_sampler for a GrammarSpec (lazy when the spec is)."""
    return make_sampler(vocab, spec.gbnf, spec.trigger_patterns, spec.root)


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
