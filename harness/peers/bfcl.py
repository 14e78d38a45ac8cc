"""BFCL's own checker, driven in an environment of its own (scripts/setup_bfcl.sh builds BFCL_VENV).

bfcl_worker.py (this folder) runs under that environment's python; `BFCLChecker` starts it, and before judging
anything compares the SHA-256 of the checker modules it imported with the same files of the pinned wheel
(harness.suites.bfcl.cases's archive): a checker that is not BFCL's, byte for byte, judges nothing."""

from __future__ import annotations

from pathlib import Path

from harness.core.environments import ENVIRONMENTS
from harness.core.errors import BFCLCheckerError
from harness.peers.process import WorkerProcess
from harness.pins.digest import file_digest

ENVIRONMENT = ENVIRONMENTS["bfcl"]
BFCL_VENV, SETUP_COMMAND = ENVIRONMENT.venv, ENVIRONMENT.setup_command
WORKER = Path(__file__).with_name("bfcl_worker.py")


def bfcl_python(venv: Path | None = None) -> Path | None:
    return ENVIRONMENT.python(venv)


class BFCLChecker(WorkerProcess):
    """One worker process. `judge` answers {"valid", "error_type", "errors"} or {"error"}. A context manager."""

    name = "the BFCL checker worker"
    error = BFCLCheckerError

    def __init__(self, python: Path | str | None = None, tree: Path | None = None):
        python = python or bfcl_python()
        if python is None:
            raise BFCLCheckerError(f"BFCL's checker environment is not built: {SETUP_COMMAND}")
        super().__init__(python, WORKER)
        self.hello = self.ask({"op": "hello"})
        if "error" in self.hello:
            self.close()
            raise BFCLCheckerError(f"BFCL's checker does not import: {self.hello['error']} ({SETUP_COMMAND})")
        if tree is not None:
            self._same_as(tree)

    def _same_as(self, tree: Path) -> None:
        for name, sha256 in self.hello["files"].items():
            _, pinned = file_digest(Path(tree) / name)
            if sha256 != pinned:
                self.close()
                raise BFCLCheckerError(f"the checker environment's bfcl_eval/{name} (sha256 {sha256[:16]}…) is not "
                                       f"the pinned wheel's ({pinned[:16]}…): rebuild it with {SETUP_COMMAND}")

    def ask(self, request: dict) -> dict:
        answer = super().ask(request)
        answer.pop("id")
        return answer

    def judge(self, category: str, functions: list, calls: list, answer) -> dict:
        """BFCL's verdict on `calls` ([{name: {param: value}}], BFCL's decoded form) for one case."""
        return self.ask({"op": "judge", "category": category, "functions": functions, "calls": calls,
                         "answer": answer})
