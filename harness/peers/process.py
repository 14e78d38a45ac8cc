"""A worker in an environment of its own: a python script started under that environment's interpreter that
reads one JSON request a line on stdin and answers one JSON line on stdout. The peers' parsers and BFCL's checker
both run this way, since their dependencies never enter harness's venv."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.core.errors import HarnessError


class WorkerProcess:
    """One worker process; `ask` sends a request (numbered) and returns its answer, checked to be the answer to
    that request. Use as a context manager. Subclasses name the worker and the error its failures raise."""

    name = "the worker"
    error: type[HarnessError] = HarnessError

    def __init__(self, python: Path | str, script: Path):
        self.proc = subprocess.Popen([str(python), str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        self.sent = 0

    def ask(self, request: dict) -> dict:
        self.sent += 1
        try:
            self.proc.stdin.write(json.dumps({**request, "id": self.sent}, ensure_ascii=False) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            # The worker is gone before reading the request. Left as it is, the command line would take it
            # for its own reader leaving (`harness list | head`) and exit without a word.
            raise self.error(f"{self.name} exited (code {self.proc.wait()}) before request {self.sent}") from None
        line = self.proc.stdout.readline()
        if not line:
            raise self.error(f"{self.name} exited (code {self.proc.wait()}) on request {self.sent}")
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            raise self.error(f"{self.name} answered request {self.sent} with a line that is not a JSON object: "
                             f"{line[:200]!r}")
        if answer.get("id") != self.sent:
            raise self.error(f"{self.name} answered request {answer.get('id')} for {self.sent}")
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
