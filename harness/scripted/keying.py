"""The prompt length a runtime gives a request, so a scripted reply is keyed to the runtime's own prompt.

The runtime's module says how it shows that length (harness.backends.runtimes: Runtime.prompt_key): llama-server
renders the request (/apply-template) and counts it (/tokenize); any other OpenAI-compatible server answers a
one-token chat completion of the same request, whose usage.prompt_tokens is its own count (its prompt text
stays unseen). Without a server: our render, counted with the scripted model's vocabulary
(harness.scripted.vocab). Each answer says which of these it came from; a request the runtime refuses comes
back with its error."""

from __future__ import annotations

from harness.backends import runtimes
from harness.backends.runtimes.base import PromptKey

OUR_RENDER = "our render, counted with the scripted vocabulary (the runtime does not show its prompt)"

__all__ = ["OUR_RENDER", "PromptKey", "render_key", "runtime_key"]


def render_key(vocab, prompt: str) -> PromptKey:
    return PromptKey(len(vocab.prompt_ids(prompt)), OUR_RENDER, prompt)


def runtime_key(kind: str, base_url: str, model: str, body: dict, timeout: float = 120.0) -> PromptKey:
    return runtimes.get(kind).prompt_key(base_url, model, body, timeout)
