"""The seam every backend sits behind. A backend writes a raw reply to a prompt the harness rendered itself
(`complete`, the strict path: the template and parser under test are ours), and says by its capability flags
what else it can do, so the live loop asks it, never its type."""

from __future__ import annotations

from typing import ClassVar, Sequence

from harness.core.errors import GenerationError
from harness.core.replies import Generation


class Backend:
    name: ClassVar[str] = ""
    # Can constrain a reply with a (lazy) grammar: grammar mode and fallback's retries need this.
    holds_grammar: ClassVar[bool] = False
    # Writes the first replies of many seeds to one prompt in one batch (complete_many), reading it once.
    batches_samples: ClassVar[bool] = False
    # Answers the runtime's own way too (chat, applied_template): runtime checks need this.
    serves_chat: ClassVar[bool] = False

    def complete(self, chat, prompt: str, sampling: dict, seed: int, grammar=None) -> Generation:
        """One raw reply to `prompt`, special tokens kept as text; `chat` carries the step timeout and tokens."""
        raise NotImplementedError

    def complete_many(self, chat, prompt: str, sampling: dict, seeds: Sequence[int]) -> list:
        raise GenerationError(f"the {self.name} backend does not batch samples")

    def describe(self) -> dict:
        """What a transcript records about where the replies came from."""
        return {"backend": self.name}

    def close(self) -> None:
        """Free what the backend holds (a loaded model, connections); it is not used afterwards."""
