"""A runtime's server process on a model in HF form (vLLM's CPU build, `transformers serve`), started from the
scripts that serve them (scripts/deployment_hf.py, scripts/hf_runtime_conformance.py): started in a session of
its own, ready once /v1/models answers, stopped with its whole process group, and a start that fails said in the
server's own words from its log. Standard library only: the runtimes run in environments of their own."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from harness.core.errors import ServerExitedError, ServerStartError


def start_failure(log: Path, why: str, work_dir: Path) -> str:
    """Why a server did not start, in its own words: the last error line of its log, else `why`; the folders it
    names relative to the work folder (records are committed: no machine's paths in them)."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    errors = [line.strip() for line in lines if "Error:" in line or "Error " in line]
    return (f"{why}: {errors[-1]}" if errors else why).replace(f"{work_dir}/", "")


def wait_ready(proc: subprocess.Popen, url: str, limit: float) -> str | None:
    """None once /v1/models answers; else why not (the process exited, or `limit` seconds passed)."""
    ends = time.monotonic() + limit
    while time.monotonic() < ends:
        if proc.poll() is not None:
            return f"the server exited with status {proc.returncode}"
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as answer:
                if answer.status == 200:
                    return None
        except OSError:
            pass
        time.sleep(2)
    return f"no answer on /v1/models after {limit:g} s"


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's own process group (it was started in a session of its own: the API server, its
    engine core and workers), then SIGKILL to what is left after 60 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class FolderServer:
    """A runtime started on an HF folder, as the driver starts a LocalServer: start() until /v1/models answers
    (ServerExitedError with its log's last error line if the process ends first), stop(), running."""

    def __init__(self, command: list, cwd: Path, log: Path, port: int, limit: float, env: dict | None = None,
                 work_dir: Path | None = None):
        self.command, self.cwd, self.log, self.port, self.limit = command, cwd, log, port, limit
        self.env, self.work_dir = env or {}, work_dir or log.parent
        self.base_url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_status(self) -> str | None:
        code = self.proc.poll() if self.proc else None
        return None if code is None else f"exit code {code}"

    def start(self) -> "FolderServer":
        if self.running:
            return self
        # transformers serve lists /v1/models from the Hub cache and answers 500 where that folder does not exist;
        # an empty one of our own, offline, lists nothing and loads only the folders named.
        hub = self.work_dir / "hub-cache"
        hub.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", **self.env}
        with open(self.log, "w", encoding="utf-8") as sink:
            self.proc = subprocess.Popen(self.command, stdout=sink, stderr=subprocess.STDOUT, cwd=self.cwd, env=env,
                                         start_new_session=True)
        why = wait_ready(self.proc, self.base_url, self.limit)
        if why is None:
            return self
        exited = self.proc.poll() is not None
        stop(self.proc)
        words = start_failure(self.log, why, self.work_dir)
        raise (ServerExitedError if exited else ServerStartError)(words)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
