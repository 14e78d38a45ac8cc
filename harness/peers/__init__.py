"""The peers: other projects' tool parsers (vLLM, SGLang), run in an environment of their own.

They pin torch and an older transformers, so they never enter harness's venv: scripts/setup_peers.sh builds
PEERS_VENV in the cache, and `Peers` runs worker.py (this folder) under its python, one JSON line per request.
The reply is tokenized there with the family's vocabulary: llama.cpp's vocabulary GGUF of the template's
scripted-model profile (harness.scripted), with that profile's edits, written once to the cache.
"""

from __future__ import annotations

from pathlib import Path

from harness.scripted.vocab import vocab_for, write_vocab_gguf
from harness.core import constants
from harness.core.environments import ENVIRONMENTS
from harness.core.errors import PeerError
from harness.peers.process import WorkerProcess

ENVIRONMENT = ENVIRONMENTS["peers"]
PEERS_VENV, SETUP_COMMAND = ENVIRONMENT.venv, ENVIRONMENT.setup_command
WORKER = Path(__file__).with_name("worker.py")


def peers_python(venv: Path | None = None) -> Path | None:
    return ENVIRONMENT.python(venv)


def vocab_file(profile: str) -> Path:
    """The profile's vocabulary GGUF (tokens, types, merges; no tensors), written once to the cache."""
    path = constants.CACHE_DIR / "peers" / f"{profile}-vocab.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_vocab_gguf(vocab_for(profile), tmp)
        tmp.replace(path)
    return path


class Peers(WorkerProcess):
    """One worker process; `ask` sends a request and returns its answer. Use as a context manager."""

    name = "the peers worker"
    error = PeerError

    def __init__(self, python: Path | str):
        super().__init__(python, WORKER)

    def hello(self) -> dict:
        return self.ask({"op": "hello"})

    def parse(self, project: str, parser: str, profile: str, reply: str, tools: list, splits: int = 20,
              seed: int = 0, added_tokens=(), tokenizer_config=None) -> dict:
        return self.ask({"op": "parse", "project": project, "parser": parser, "tokenizer": str(vocab_file(profile)),
                         "added_tokens": list(added_tokens), "tokenizer_config": dict(tokenizer_config or {}),
                         "reply": reply, "tools": tools, "splits": splits, "seed": seed})

    def detect(self, template: str, vocab=()) -> dict:
        """SGLang's `--tool-call-parser auto` on a template's text with this vocabulary (worker.detect)."""
        return self._answered(self.ask({"op": "detect", "project": "sglang", "template": template,
                                        "vocab": sorted(vocab)}), "template detection")

    def detectors(self) -> dict:
        """Every SGLang tool-call parser name and the detector class behind it."""
        return self._answered(self.ask({"op": "detectors", "project": "sglang"}), "parser table")["detectors"]

    def _answered(self, answer: dict, what: str) -> dict:
        # A rule that raises is passed over in the worker, as SGLang does; an error here is the environment's
        # (a module SGLang's detection imports is missing), the same for every template.
        if "error" in answer:
            raise PeerError(f"SGLang's {what} failed in the peers environment: {answer['error']}; rebuild it with: "
                            f"{SETUP_COMMAND}")
        return answer
