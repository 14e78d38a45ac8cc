"""What a backend hands back for one prompt: the raw reply and how it ended. Every backend (embedded or HTTP)
returns these, so everything above the backends reads one shape."""

from __future__ import annotations

from dataclasses import dataclass

FINISH_REASONS = ("stop", "length", "deadline", "stop_string")


@dataclass(frozen=True)
class Timings:
    prompt_seconds: float  # wall time to read the prompt and sample the first token
    generation_seconds: float  # wall time for the tokens after the first
    tokens_per_second: float  # tokens after the first / generation_seconds (0.0 when there are none)


@dataclass(frozen=True)
class Generation:
    text: str  # the raw reply: special tokens as text, without the end-of-generation token's text
    tokens: list[int]  # every sampled id, including the end-of-generation token when that ended the reply
    prompt_tokens: int
    completion_tokens: int  # len(tokens)
    finish_reason: str  # one of FINISH_REASONS
    timings: Timings
    seed: int
    # Under a GrammarSpec: the character offset in `text` where the grammar took over (0 for a grammar that is
    # not lazy), None when its trigger never fired. None too when no grammar was given.
    grammar_from: int | None = None
    # Under a GrammarSpec: how many tokens the model sampled that the grammar refused (each sampled again from
    # the logits the grammar masked): 0 means the grammar changed nothing in this reply. None without a grammar.
    grammar_refused: int | None = None
    # Handed back by the embedded backend's memo: the same request's reply, written earlier in this process
    # (harness.backends.embedded.reply_memo); its timings are zero, it took none.
    reused: bool = False
