"""The one local generation primitive: rendered prompt in, raw reply (special tokens kept as text) out.

llama-cpp-python's completion decodes generated tokens with special=False, so control tokens such as
Mistral's [TOOL_CALLS] and Llama's <|python_tag|> vanish from its text. generate() instead runs the binding's
token generator (Llama.generate) and decodes each token itself (harness.backends.embedded.decoding): special tokens as text,
UTF-8 intact across tokens, stop at any end-of-generation token, max_tokens, the context window, a stop string
or a deadline. Llama.generate also reuses the longest already-evaluated prefix of the previous call, so a
growing conversation is not re-read from the start.

generate_samples() (harness.backends.embedded.batch) reads a prompt once and writes N replies in one batch per step.
StreamHoldback (harness.backends.holdback) decides which streamed text is safe to show while a call may be opening.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

import llama_cpp
from llama_cpp import Llama, LlamaGrammar

from harness.backends.embedded.batch import Samples, generate_samples
from harness.backends.embedded.decoding import (
    Reply, check_sampling, deadline_from, grammar_sampler, grammar_source, pick_seed, prepare_prompt,
    prompt_token_ids,
)
from harness.backends.embedded.gated import generate_gated
from harness.backends.holdback import StreamHoldback
from harness.core.errors import GenerationError, HarnessError, ModelLoadError
from harness.core.replies import FINISH_REASONS, Generation, Timings
from harness.core.values import DEFAULT_SAMPLING
from harness.grammar import GrammarSpec
from harness.pins.gguf_header import check_gguf_header

__all__ = [
    "DEFAULT_SAMPLING", "FINISH_REASONS", "Generation", "Samples", "StreamHoldback", "Timings",
    "generate", "generate_samples", "load_model", "prompt_token_ids",
]

# llama-cpp-python silences a model's load by pointing the process's fds 1 and 2 at /dev/null and back: two threads
# loading at once (runtime conformance's workers counting prompts) can restore each other's /dev/null, and the
# command's own output is gone for good. Every load in this package holds this lock.
LOADING = threading.Lock()


def load_model(path: str | Path, *, n_ctx: int = 4096, seed: int = 0, n_threads: int | None = None,
               extra_buffer_types: bool = False, **llama_kwargs) -> Llama:
    """Load a GGUF with verbose output off. Extra keyword arguments go to llama_cpp.Llama unchanged.

    extra_buffer_types=False keeps llama.cpp from placing weights in its extra CPU buffer types (AMX tiles,
    repacked layouts). On a machine whose CPU flags advertise AMX but whose hypervisor faults on it (this
    project's CI VM), a native build otherwise dies with SIGILL on the first multi-token decode of a quantized
    model; the cost is the repacked kernels' speed-up. Llama() has no keyword for it, so its default model
    parameters are swapped for the duration of the call.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"model file not found: {path}")
    try:
        # llama.cpp trusts the header's counts and lengths; a malformed one is named here, in bounded work.
        check_gguf_header(path)
    except HarnessError as exc:
        raise ModelLoadError(f"cannot load {path}: {exc}") from None
    try:
        with LOADING, model_params(use_extra_bufts=extra_buffer_types):
            return Llama(model_path=str(path), n_ctx=n_ctx, seed=seed, n_threads=n_threads,
                         n_threads_batch=n_threads, verbose=False, **llama_kwargs)
    except (ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"llama.cpp could not load {path}: {exc}") from exc


@contextlib.contextmanager
def model_params(**fields):
    """While the block runs, llama.cpp's default model parameters carry `fields` (Llama() and llama_cpp.server
    take no keyword for some of them, use_extra_bufts among them)."""
    module = llama_cpp.llama_cpp  # the module Llama.__init__ calls llama_model_default_params() on
    original = module.llama_model_default_params

    def patched():
        params = original()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    module.llama_model_default_params = patched
    try:
        yield
    finally:
        module.llama_model_default_params = original


def generate(llm: Llama, prompt: str, *, max_tokens: int, temperature: float = DEFAULT_SAMPLING["temperature"],
             top_p: float = DEFAULT_SAMPLING["top_p"], top_k: int = DEFAULT_SAMPLING["top_k"],
             min_p: float = DEFAULT_SAMPLING["min_p"], repeat_penalty: float = DEFAULT_SAMPLING["repeat_penalty"],
             seed: int | None = None, grammar=None, deadline: float | None = None,
             timeout: float | None = None, stop_strings: Sequence[str] = (),
             on_text: Callable[[str], None] | None = None) -> Generation:
    """Write one reply to a rendered prompt.

    grammar is a LlamaGrammar or GBNF text (in llama.cpp's sampler chain), or a GrammarSpec (lazy or not: run
    through a GrammarGate in harness.backends.embedded.gated's own token loop; its GrammarRuntimeError propagates). deadline is a time.monotonic() value, timeout seconds from now
    (the earlier wins); both are checked between tokens, and a deadline already past returns at once without
    reading the prompt. on_text receives the reply's text as it becomes final: never half a character, never
    text that a stop string later cuts. seed=None draws one; the one used is in the result.
    """
    check_sampling(max_tokens, temperature, top_p, top_k, min_p, repeat_penalty)
    seed = pick_seed(seed)
    ends = deadline_from(deadline, timeout)
    started = time.monotonic()
    ids, limit = prepare_prompt(llm, prompt, max_tokens)
    if isinstance(grammar, GrammarSpec):
        reply = Reply(llm, limit, stop_strings, on_text)
        took_over, refused = None, 0
        if ends is not None and time.monotonic() >= ends:
            reply.finish("deadline")
        else:
            took_over, refused = generate_gated(llm, prompt, ids, reply, grammar, seed=seed, ends=ends,
                                       temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                                       repeat_penalty=repeat_penalty)
        return reply.result(len(ids), started, seed, grammar_from=took_over, grammar_refused=refused)
    source = grammar_source(grammar)
    llama_grammar = None
    if source is not None:
        llama_cpp.llama_sampler_free(grammar_sampler(llm, source))  # parse once here to fail with a clear error
        llama_grammar = grammar if isinstance(grammar, LlamaGrammar) else LlamaGrammar.from_string(source[0])
    reply = Reply(llm, limit, stop_strings, on_text)
    if ends is not None and time.monotonic() >= ends:
        reply.finish("deadline")
        return reply.result(len(ids), started, seed)
    llm.set_seed(seed)  # Llama.generate seeds its sampler chain from this
    tokens = llm.generate(ids, top_k=top_k, top_p=top_p, min_p=min_p, temp=temperature,
                          repeat_penalty=repeat_penalty, grammar=llama_grammar)
    try:
        for token in tokens:
            if reply.push(token):
                break
            if ends is not None and time.monotonic() >= ends:
                reply.finish("deadline")
                break
    except RuntimeError as exc:  # the binding raises RuntimeError when llama_decode fails
        raise GenerationError(f"llama.cpp failed while generating: {exc}") from exc
    finally:
        tokens.close()
    return reply.result(len(ids), started, seed)
