"""The child process every chat template renders in, with limits the template cannot sidestep.

The checks in harness.template.limits name what a template did wrong, but they are cooperative: they run in
Jinja's hooks, and a loop that touches no hook (`{% for a in s %}{% for b in s %}` over a long string) or one
slow C or library call (`wordwrap(1)`) never reaches them. So renders run in a child process the parent can
kill: its address space is capped (RLIMIT_AS), its CPU time is capped per render (RLIMIT_CPU), and the parent
waits for each render at most its time budget, then kills the child and forks a fresh one for the next call.

One child serves many calls (a process per render would cost more than the render), and one call may run many
renders (a whole detection, a template's whole conformance check): each render announces itself to the parent
(`started`), so the time bound stays per render however many a call makes. Forking keeps every module the
parent imported, so a new child costs milliseconds.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import resource
import signal
import threading
from typing import Any, Callable

from harness.core.errors import HarnessError, TemplateError

# Address space the child may add to what it inherits: real templates need a few megabytes; the size budget
# (8 M characters, up to 32 MB a string) leaves room for several values at once.
MEMORY_HEADROOM = 1 << 30
# The parent's wait past a render's own budget: the cooperative check inside usually reports first, with the
# template line that ran long.
GRACE_SECONDS = 1.0

class RenderLimitError(TemplateError):
    """A render went past its time, size or memory budget: the template, not its input, is at fault, and
    asking again with other input is not worth the wait."""


_inside = False            # True in the child
_conn = None               # the child's end of the pipe
_lock = threading.Lock()   # one call at a time talks to the child
_worker: "_Worker | None" = None


def inside() -> bool:
    """True in the render process itself, where renders run directly."""
    return _inside


def started(seconds: float) -> None:
    """A render begins in the child: give it `seconds` of CPU from now and tell the parent to wait that long."""
    if _conn is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 2
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    _conn.send(("tick", seconds))


def call(func: Callable, args: tuple = (), kwargs: dict | None = None, *, seconds: float) -> Any:
    """func(*args, **kwargs) in the render process; what it returns or raises comes back here. `seconds` bounds
    the call until its first render announces itself, and each render after. func must be a module-level
    function (it is sent by name)."""
    global _worker
    if _inside:
        return func(*args, **(kwargs or {}))
    with _lock:
        if _worker is None or _worker.owner != os.getpid() or not _worker.process.is_alive():
            _worker = _Worker()
        worker = _worker
        try:
            kind, value = worker.call(func, args, kwargs or {}, seconds)
        except BaseException:
            # Killed, timed out, or interrupted (Ctrl-C) mid-call: its answer would reach the next caller.
            worker.stop()
            _worker = None
            raise
    if kind == "ok":
        return value
    exc, cause = value
    if cause is not None:
        exc.__cause__ = cause
    raise exc


class _Worker:
    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self.owner = os.getpid()       # a forked copy of this process must start a child of its own
        self.conn, child_end = context.Pipe()
        # The death signal follows the thread that forks, so only a child forked by the main thread takes it.
        tied = threading.current_thread() is threading.main_thread()
        self.process = context.Process(target=_serve, args=(child_end, self.conn, tied), daemon=True,
                                       name="harness-template-render")
        self.process.start()
        child_end.close()

    def call(self, func: Callable, args: tuple, kwargs: dict, seconds: float) -> tuple:
        self.conn.send((func, args, kwargs))
        budget = seconds
        while True:
            if not self.conn.poll(budget + GRACE_SECONDS):
                raise RenderLimitError(f"render stopped: render took longer than {budget:g} s "
                                    "(its process was killed)")
            try:
                kind, value = self.conn.recv()
            except (EOFError, OSError):
                self.process.join(5)
                raise RenderLimitError(f"render stopped: {_death(self.process.exitcode)}") from None
            if kind != "tick":
                return kind, value
            budget = value

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


def _death(code: int | None) -> str:
    if code == -signal.SIGXCPU:
        return "the render used more CPU time than its budget (its process was killed)"
    if code == -signal.SIGKILL:
        return "the render process was killed (out of memory?)"
    if code is not None and code < 0:
        return f"the render process died of signal {signal.Signals(-code).name}"
    return f"the render process exited unexpectedly (exit status {code})"


def _serve(conn, parent_end, tied: bool) -> None:
    global _inside, _conn
    parent_end.close()       # else the child never sees end-of-file when the parent dies
    _inside, _conn = True, conn
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the parent's to handle; it then kills this
    if tied:
        _die_with_parent()
    _cap_memory()
    while True:
        try:
            func, args, kwargs = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        try:
            answer = ("ok", func(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 -- every failure goes back to the caller, who raises it
            answer = ("raise", (exc, exc.__cause__))
        conn.send(_sendable(answer))


def _sendable(answer: tuple) -> tuple:
    # What cannot be pickled cannot cross: an exception loses its cause first, then becomes its text.
    for candidate in _fallbacks(answer):
        try:
            pickle.dumps(candidate)
            return candidate
        except Exception:  # noqa: BLE001 -- anything pickle refuses
            continue
    return ("raise", (HarnessError("the render's result cannot be sent back from its process"), None))


def _fallbacks(answer: tuple):
    yield answer
    kind, value = answer
    if kind == "raise":
        exc, _ = value
        yield ("raise", (exc, None))
        wrapper = TemplateError if isinstance(exc, TemplateError) else HarnessError
        yield ("raise", (wrapper(f"{type(exc).__name__}: {exc}"), None))
    else:
        yield ("raise", (HarnessError(f"the render's result ({type(value).__name__}) cannot be sent back"), None))


def _cap_memory() -> None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return       # not Linux: time is still bounded, and the size checks still run
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + MEMORY_HEADROOM
    for bound in (soft, hard):
        if bound != resource.RLIM_INFINITY:
            limit = min(limit, bound)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _die_with_parent() -> None:
    # Linux's PR_SET_PDEATHSIG: a parent killed with -9 takes the child along instead of leaving it running.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
