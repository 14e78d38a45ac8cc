"""The embedded backend: a GGUF loaded in this process through llama-cpp-python. The only backend that holds a
lazy grammar (its sampler is ours) and that batches the first replies of many samples."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import llama_cpp
from llama_cpp._internals import LlamaModel

from harness.backends.base import Backend
from harness.backends.embedded.batch import generate_samples
from harness.backends.embedded.decoding import prompt_token_ids, token_bytes
from harness.backends.embedded.generate import LOADING, generate, load_model
from harness.core.replies import Generation


class EmbeddedBackend(Backend):
    name = "embedded"
    holds_grammar = True
    batches_samples = True
    loads_model_files = True

    def __init__(self, llm, path: str | None = None):
        self.llm, self.path = llm, path

    @classmethod
    def load(cls, path: str | Path, *, n_ctx: int, n_threads: int | None = None) -> "EmbeddedBackend":
        return cls(load_model(path, n_ctx=n_ctx, n_threads=n_threads), str(path))

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
        return generate(self.llm, prompt, seed=seed, timeout=timeout, grammar=grammar, **sampling)

    def complete_many(self, prompt: str, sampling: dict, seeds: Sequence[int], *,
                      timeout: float | None = None) -> list:
        batch = generate_samples(self.llm, prompt, len(seeds), seeds=seeds, timeout=timeout, **sampling)
        return batch.generations

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
        self.llm.close()
