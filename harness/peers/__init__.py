"""The peers: other projects' tool parsers (vLLM, SGLang), run in an environment of their own.

They pin torch and an older transformers, so they never enter harness's venv: scripts/setup_peers.sh builds
PEERS_VENV in the cache, and `Peers` runs worker.py (this folder) under its python, one JSON line per request.
The reply is tokenized there with the family's vocabulary: llama.cpp's vocabulary GGUF of the template's
scripted-model profile (harness.scripted), with that profile's edits, written once to the cache.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.scripted.vocab import vocab_for, write_vocab_gguf
from harness.core import constants

PEERS_VENV = constants.CACHE_DIR / "peers-venv"
SETUP_COMMAND = "bash scripts/setup_peers.sh"
WORKER = Path(__file__).with_name("worker.py")


def peers_python(venv: Path = PEERS_VENV) -> Path | None:
    python = venv / "bin" / "python"
    return python if python.exists() else None


def vocab_file(profile: str) -> Path:
    """The profile's vocabulary GGUF (tokens, types, merges; no tensors), written once to the cache."""
    path = constants.CACHE_DIR / "peers" / f"{profile}-vocab.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_vocab_gguf(vocab_for(profile), tmp)
        tmp.replace(path)
    return path


class PeerError(RuntimeError):
    """The worker died or answered out of protocol."""


class Peers:
    """One worker process; `ask` sends a request and returns its answer. Use as a context manager."""

    def __init__(self, python: Path | str):
        self.proc = subprocess.Popen([str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        self.sent = 0

    def ask(self, request: dict) -> dict:
        self.sent += 1
        self.proc.stdin.write(json.dumps({**request, "id": self.sent}, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise PeerError(f"the peers worker exited (code {self.proc.wait()}) on request {self.sent}")
        answer = json.loads(line)
        if answer.get("id") != self.sent:
            raise PeerError(f"the peers worker answered request {answer.get('id')} for {self.sent}")
        return answer

    def hello(self) -> dict:
        return self.ask({"op": "hello"})

    def parse(self, project: str, parser: str, profile: str, reply: str, tools: list, splits: int = 20,
              seed: int = 0, added_tokens=(), tokenizer_config=None) -> dict:
        return self.ask({"op": "parse", "project": project, "parser": parser, "tokenizer": str(vocab_file(profile)),
                         "added_tokens": list(added_tokens), "tokenizer_config": dict(tokenizer_config or {}),
                         "reply": reply, "tools": tools, "splits": splits, "seed": seed})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
