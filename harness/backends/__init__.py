"""Backends: where a reply comes from. One table from user-facing name to implementation; its keys are public
(`--backend`). `embedded` runs the GGUF in this process through llama-cpp-python (the default, and the only one
that can hold a lazy grammar); `openai` asks any OpenAI-compatible server (llama-server, llama-cpp-python's
server, vLLM, SGLang, Ollama) over HTTP.

Every backend writes a reply to a prompt the harness rendered itself (`complete`: the strict path, so the
template and parser under test are ours). A server can also be asked the runtime's own way (`chat`: messages and
tools through /v1/chat/completions, the runtime rendering and parsing): harness.runtime_agreement compares both."""

from __future__ import annotations

from harness.backends.openai import Endpoint, OpenAIBackend, RuntimeReply

BACKENDS = {"openai": OpenAIBackend}

__all__ = ["BACKENDS", "Endpoint", "OpenAIBackend", "RuntimeReply"]
