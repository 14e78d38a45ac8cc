"""The side environments: third-party stacks that pin what harness's own venv cannot hold (torch, another
transformers, a serving stack of several GB), each built into a venv of its own in the harness cache by a script
of its own. This module is the one place that says, for each, where its venv is, which script builds it, which
pytest marker a test that needs it carries, and what a missing one is called: the modules that drive them, the
test markers (tests/requirements.py) and the setup scripts read it.

The scripts ask it for their venv with the system python, before any venv exists:

    python3 -m harness.core.environments venv peers

so this module and what it imports stay standard library only (harness.core.constants)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.core import constants


@dataclass(frozen=True)
class Environment:
    name: str           # how the scripts and this table name it
    folder: str         # the venv's folder in the harness cache
    script: str         # the script that builds it, from the repository's root
    marker: str | None  # the pytest marker of a test that needs it (None: the tests check for it themselves)
    called: str         # what a message calls it: "the peers environment (vLLM, SGLang)"

    @property
    def venv(self) -> Path:
        return constants.CACHE_DIR / self.folder

    @property
    def setup_command(self) -> str:
        return f"bash {self.script}"

    def python(self, venv: Path | None = None) -> Path | None:
        """Its python, or None while it is not built."""
        return constants.venv_python(venv or self.venv)

    def missing(self) -> str | None:
        """Why a test that needs it cannot run here, with the command that builds it; None when it is built."""
        return None if self.python() else f"{self.called} is not built: {self.setup_command}"


ENVIRONMENTS = {e.name: e for e in (
    Environment("peers", "peers-venv", "scripts/setup_peers.sh", "needs_peers",
                "the peers environment (vLLM, SGLang)"),
    Environment("vllm-cpu", "vllm-cpu-venv", "scripts/setup_vllm_cpu.sh", "needs_vllm_cpu",
                "the vLLM CPU environment"),
    Environment("mistralrs", "mistralrs-venv", "scripts/setup_mistralrs.sh", "needs_mistralrs",
                "the mistral.rs environment"),
    Environment("bfcl", "bfcl-venv", "scripts/setup_bfcl.sh", None, "BFCL's checker environment"),
)}


def main(argv: list) -> int:
    if len(argv) != 2 or argv[0] != "venv" or argv[1] not in ENVIRONMENTS:
        print(f"usage: python3 -m harness.core.environments venv {{{','.join(ENVIRONMENTS)}}}", file=sys.stderr)
        return 2
    print(ENVIRONMENTS[argv[1]].venv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
