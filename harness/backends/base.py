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
    # Runs a model file in this process, made by the classmethod load(path, n_ctx=, n_threads=) (`harness run
    # --model`); otherwise it talks to servers and is made from a list of Endpoints (`--endpoint`), as
    # OpenAIBackend is.
    loads_model_files: ClassVar[bool] = False

    def complete(self, prompt: str, sampling: dict, seed: int, grammar=None, *, bos_token: str = "",
                 timeout: float | None = None) -> Generation:
        """One raw reply to `prompt`, special tokens kept as text. `bos_token`: the BOS the template wrote at the
        start of the prompt (a server that adds its own gets the prompt without it); `timeout`: the step's
        deadline in seconds, for a backend that has none of its own (None: no deadline)."""
        raise NotImplementedError

    def complete_many(self, prompt: str, sampling: dict, seeds: Sequence[int], *,
                      timeout: float | None = None) -> list:
        raise GenerationError(f"the {self.name} backend does not batch samples")

    def describe(self) -> dict:
        """What a transcript records about where the replies came from."""
        return {"backend": self.name}

    def close(self) -> None:
        """Free what the backend holds (a loaded model, connections); it is not used afterwards."""
