"""Backends: where a reply comes from. One table from user-facing name to implementation; its keys are public
(`harness run --backend`). `embedded` runs the GGUF in this process through llama-cpp-python (the default, and
the only one that can hold a lazy grammar); `openai` asks any OpenAI-compatible server (llama-server,
llama-cpp-python's server, vLLM, SGLang, Ollama) over HTTP.

A backend is imported only when it is asked for, so the binding loads only where a model is really driven here
(harness/backends/README.md: a third backend is one file and one line of this table)."""

from __future__ import annotations

from harness.core.registry import Registry

BACKENDS = Registry("backend", {
    "embedded": "harness.backends.embedded.backend:EmbeddedBackend",
    "openai": "harness.backends.openai:OpenAIBackend",
})
# The backend a run uses when it names none: for a model file, and for a model behind --endpoint.
DEFAULT_IN_PROCESS, DEFAULT_SERVED = "embedded", "openai"


def backend_class(name: str):
    """The Backend subclass registered as `name`, imported now."""
    return BACKENDS.get(name)
