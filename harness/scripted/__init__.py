"""Scripted models: real GGUFs (a family's real vocabulary and a chat template) whose tiny weights write given
replies to given conversations, so a runtime's handling of exact replies can be tested whatever it serves.

builder.py writes the weights (Script: first-order token chains; Turn: a reply after a prompt of exactly N
tokens) of the GPT-2 models llama.cpp-based runtimes load, rotary.py the llama (rotary) models of turns for a
runtime that loads no GPT-2 GGUF (mistral.rs), vocab.py the vocabularies. Importing this package needs the `gguf` package (a dependency of the
harness); counting a prompt's tokens (Vocab.prompt_ids) loads the vocabulary in llama.cpp through the embedded
backend."""

from harness.scripted.builder import (  # noqa: F401
    MIN_MARGIN, Script, StandIn, Turn, build_standin,
)
from harness.scripted.vocab import (  # noqa: F401
    BYTE, CONTEXT_LENGTH, CONTROL, NORMAL, PROFILES, UNKNOWN, UNUSED, USER_DEFINED, Item, Profile, Vocab,
    llama_cpp_models, read_gguf_kv, vocab_for,
)
