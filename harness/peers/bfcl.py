"""BFCL's own checker, driven in an environment of its own (scripts/setup_bfcl.sh builds BFCL_VENV).

bfcl_worker.py (this folder) runs under that environment's python; `BFCLChecker` starts it, and before judging
anything compares the SHA-256 of the checker modules it imported with the same files of the pinned wheel
(harness.evaluation.bfcl's archive): a checker that is not BFCL's, byte for byte, judges nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.core import constants
from harness.core.errors import HarnessError
from harness.pins.digest import file_digest

BFCL_VENV = constants.CACHE_DIR / "bfcl-venv"
SETUP_COMMAND = "bash scripts/setup_bfcl.sh"
WORKER = Path(__file__).with_name("bfcl_worker.py")


class BFCLCheckerError(HarnessError):
    """The checker environment is missing, is not the pinned BFCL, or the worker broke its protocol."""


def bfcl_python(venv: Path = BFCL_VENV) -> Path | None:
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None


class BFCLChecker:
    """One worker process. `judge` answers {"valid", "error_type", "errors"} or {"error"}. A context manager."""

    def __init__(self, python: Path | str | None = None, tree: Path | None = None):
        python = python or bfcl_python()
        if python is None:
            raise BFCLCheckerError(f"BFCL's checker environment is not built: {SETUP_COMMAND}")
        self.proc = subprocess.Popen([str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        self.sent = 0
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
        self.sent += 1
        self.proc.stdin.write(json.dumps({**request, "id": self.sent}, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise BFCLCheckerError(f"the BFCL checker worker exited (code {self.proc.wait()}) on request {self.sent}")
        answer = json.loads(line)
        if answer.get("id") != self.sent:
            raise BFCLCheckerError(f"the BFCL checker worker answered request {answer.get('id')} for {self.sent}")
        answer.pop("id")
        return answer

    def judge(self, category: str, functions: list, calls: list, answer) -> dict:
        """BFCL's verdict on `calls` ([{name: {param: value}}], BFCL's decoded form) for one case."""
        return self.ask({"op": "judge", "category": category, "functions": functions, "calls": calls,
                         "answer": answer})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
