"""Check a text against a grammar with llama.cpp's own grammar machinery, without a model's weights.

A vocabulary-only GGUF gives llama.cpp a tokenizer; the text is tokenized and each token is offered to the
grammar sampler alone (llama_sampler_apply on a one-candidate array): a token the grammar rejects comes back
with logit -inf, an accepted one is then accepted (llama_sampler_accept). The text is a complete sentence of the
grammar when the end-of-generation token is allowed after its last token.

Lazy grammars are checked with llama.cpp's lazy sampler. Before a token is accepted, this module works out in
Python (the same regex on the same bytes) whether it fires a trigger, and checks the text llama.cpp will replay
into the grammar with a separate, non-lazy sampler first: a replay the grammar rejects would abort the process
(see harness.grammar), so it is reported as TriggerHazard instead of being fed to llama.cpp."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
from llama_cpp import Llama
from llama_cpp._internals import LlamaModel
from llama_cpp._logger import set_verbose

from harness.core.errors import GrammarError
from harness.core.errors import GrammarRuntimeError
from harness.backends.embedded.generate import LOADING
from harness.backends.embedded.grammar_sampler import GrammarGate, make_sampler, trigger_start

__all__ = ["GrammarChecker", "TriggerHazard", "Verdict", "trigger_start"]


class TriggerHazard(AssertionError):
    """A trigger pattern fires on text its grammar rejects: llama.cpp would abort while sampling."""


@dataclass(frozen=True)
class Verdict:
    status: str  # "complete", "prefix" (every token accepted, the grammar wants more) or "rejected"
    offset: int | None = None  # rejected: character offset of the first rejected token
    token: str | None = None  # rejected: that token's text
    triggered_at: int | None = None  # lazy: byte offset where the grammar took over

    @property
    def accepted(self) -> bool:
        return self.status == "complete"


class GrammarChecker:
    """Grammar checks on one vocabulary: a vocabulary-only GGUF path, or an already loaded Llama."""

    def __init__(self, model: str | Path | Llama):
        if isinstance(model, Llama):
            self._model = model._model
        else:
            # The model alone, no context: a vocabulary-only Llama() would still open one (and warn). Quiet, as
            # Llama(verbose=False) is: llama.cpp logs every lazy-grammar step at debug level otherwise.
            set_verbose(False)
            params = llama_cpp.llama_model_default_params()
            params.vocab_only = True
            with LOADING:
                self._model = LlamaModel(path_model=str(model), params=params, verbose=False)
        self.vocab = self._model.vocab
        self.eog = llama_cpp.llama_vocab_eos(self.vocab)
        self._data = (llama_cpp.llama_token_data * 1)()
        self._array = llama_cpp.llama_token_data_array(data=self._data, size=1, selected=-1, sorted=False)
        self._piece = ctypes.create_string_buffer(256)
        self._pristine: dict = {}

    def sampler(self, gbnf: str, patterns=(), root: str = "root"):
        """A fresh grammar sampler; a clone of one parsed once per grammar (parsing a grammar and compiling
        its trigger regexes is most of the cost of a check)."""
        key = (gbnf, tuple(patterns), root)
        if key not in self._pristine:
            self._pristine[key] = make_sampler(self.vocab, gbnf, patterns, root)
        return llama_cpp.llama_sampler_clone(self._pristine[key])

    def __del__(self):
        for sampler in getattr(self, "_pristine", {}).values():
            llama_cpp.llama_sampler_free(sampler)

    def compiles(self, gbnf: str, patterns=()) -> bool:
        try:
            llama_cpp.llama_sampler_free(self.sampler(gbnf, patterns))
        except GrammarError:
            return False
        return True

    def tokens(self, text: str | bytes) -> list:
        data = text.encode("utf-8") if isinstance(text, str) else text
        return self._model.tokenize(data, add_bos=False, special=False)

    def piece(self, token: int) -> bytes:
        """The token's bytes as llama.cpp's grammar sees them (special tokens as their text)."""
        n = llama_cpp.llama_token_to_piece(self.vocab, token, self._piece, len(self._piece), 0, True)
        return self._piece.raw[:n]

    def _allowed(self, sampler, token: int) -> bool:
        self._data[0].id, self._data[0].logit, self._data[0].p = token, 0.0, 0.0
        self._array.size, self._array.selected = 1, -1
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(self._array))
        return self._data[0].logit != float("-inf")

    def check(self, gbnf: str, text: str | bytes, patterns=()) -> Verdict:
        """Run `text` through the grammar (lazy when `patterns` are given)."""
        tokens = self.tokens(text)
        sampler = self.sampler(gbnf, patterns)
        try:
            return self._run(sampler, gbnf, tokens, patterns)
        finally:
            llama_cpp.llama_sampler_free(sampler)

    def _run(self, sampler, gbnf, tokens, patterns) -> Verdict:
        buffer, triggered_at = b"", (None if patterns else 0)  # a grammar that is not lazy holds from the start
        for token in tokens:
            piece = self.piece(token)
            if not self._allowed(sampler, token):
                text = buffer.decode("utf-8", errors="replace")
                return Verdict("rejected", len(text), piece.decode("utf-8", errors="replace"), triggered_at)
            if patterns and triggered_at is None:
                start = trigger_start(patterns, buffer + piece)
                if start is not None:
                    replay = (buffer + piece)[start:]
                    if self.check(gbnf, replay).status == "rejected":
                        raise TriggerHazard(f"a trigger fires on {replay!r}, which the grammar rejects")
                    triggered_at = start
            buffer += piece
            llama_cpp.llama_sampler_accept(sampler, token)
        complete = self._allowed(sampler, self.eog)
        if patterns and triggered_at is None and not complete:
            raise TriggerHazard("llama.cpp's grammar took over where the trigger patterns, read in Python, do not fire")
        return Verdict("complete" if complete else "prefix", triggered_at=triggered_at)

    def check_gate(self, spec, text: str | bytes, prompt: str = "") -> Verdict:
        """Run `text` through a GrammarGate for `spec` (laziness handled in Python, as a generation loop would)."""
        gate = GrammarGate.for_spec(self.vocab, spec, prompt)
        consumed = b""
        try:
            for token in self.tokens(text):
                piece = self.piece(token)
                try:
                    gate.accept(token)
                except GrammarRuntimeError:
                    offset = len(consumed.decode("utf-8", errors="replace"))
                    return Verdict("rejected", offset, piece.decode("utf-8", errors="replace"), gate.triggered_at)
                consumed += piece
            status = "complete" if gate.allows(self.eog) else "prefix"
            return Verdict(status, triggered_at=gate.triggered_at)
        finally:
            gate.close()
