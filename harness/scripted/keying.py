"""The prompt length a runtime gives a request, so a scripted reply is keyed to the runtime's own prompt.

- llama-server shows its prompt: /apply-template renders the request's messages, tools and switches as a chat
  completion would, and /tokenize (special tokens parsed, BOS added, as a chat completion tokenizes) counts it.
- Any other OpenAI-compatible server: a one-token chat completion of the same request, whose
  usage.prompt_tokens is the runtime's own count (its prompt text stays unseen).
- Without a server: our render, counted with the scripted model's vocabulary (harness.scripted.vocab).
Each answer says which of these it came from; a request the runtime refuses comes back with its error."""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends.transport import request_json
from harness.core.errors import ServerReplyError

APPLY_TEMPLATE = "llama-server /apply-template + /tokenize"
USAGE = "usage.prompt_tokens of a one-token chat completion"
OUR_RENDER = "our render, counted with the scripted vocabulary (the runtime does not show its prompt)"


@dataclass
class PromptKey:
    tokens: int | None
    source: str
    prompt: str | None = None       # the runtime's prompt text, where it shows it
    error: str | None = None        # the runtime refused the request (HTTP status and its words)

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "source": self.source, "error": self.error}


def llama_server_key(base_url: str, body: dict, timeout: float = 120.0) -> PromptKey:
    try:
        prompt = request_json(f"{base_url}/apply-template", body, timeout).get("prompt")
        if not isinstance(prompt, str):
            return PromptKey(None, APPLY_TEMPLATE, error="/apply-template answered without a prompt")
        tokens = request_json(f"{base_url}/tokenize", {"content": prompt, "add_special": True, "parse_special": True},
                           timeout).get("tokens")
    except ServerReplyError as exc:
        return PromptKey(None, APPLY_TEMPLATE, error=str(exc))
    if not isinstance(tokens, list):
        return PromptKey(None, APPLY_TEMPLATE, prompt, error="/tokenize answered without a list of tokens")
    return PromptKey(len(tokens), APPLY_TEMPLATE, prompt)


def usage_key(base_url: str, model: str, body: dict, timeout: float = 120.0) -> PromptKey:
    request = {**body, "model": model, "max_tokens": 1, "temperature": 0.0, "stream": False}
    try:
        answer = request_json(f"{base_url}/v1/chat/completions", request, timeout)
    except ServerReplyError as exc:
        return PromptKey(None, USAGE, error=str(exc))
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        return PromptKey(None, USAGE, error="the answer carries no usage.prompt_tokens")
    return PromptKey(tokens, USAGE)


def render_key(vocab, prompt: str) -> PromptKey:
    return PromptKey(len(vocab.prompt_ids(prompt)), OUR_RENDER, prompt)


def runtime_key(kind: str, base_url: str, model: str, body: dict, timeout: float = 120.0) -> PromptKey:
    return llama_server_key(base_url, body, timeout) if kind == "llama-server" else \
        usage_key(base_url, model, body, timeout)
