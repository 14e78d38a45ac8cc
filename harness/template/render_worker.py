"""The child process every chat template renders in, with limits the template cannot sidestep.

The checks in harness.template.limits name what a template did wrong, but they are cooperative: they run in
Jinja's hooks, and a loop that touches no hook (`{% for a in s %}{% for b in s %}` over a long string) or one
slow C or library call (`wordwrap(1)`) never reaches them. So renders run in a child process the parent can
kill: its address space is capped (RLIMIT_AS), its CPU time is capped per render (RLIMIT_CPU), and the parent
waits for each render at most its time budget, then kills the child and forks a fresh one for the next call.

One child serves many calls (a process per render would cost more than the render), and one call may run many
renders (a whole detection, a template's whole conformance check): each render writes when it started and its
budget into memory the parent shares (`started`), so the time bound stays per render however many a call makes,
and the parent wakes only when a budget may have run out, not once per render. Forking keeps every module the
parent imported, so a new child costs milliseconds.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import pickle
import resource
import signal
import threading
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

from harness.core.errors import HarnessError, RenderLimitError, TemplateError

# Address space the child may add to what it inherits: real templates need a few megabytes; the size budget
# (8 M characters, up to 32 MB a string) leaves room for several values at once.
MEMORY_HEADROOM = 1 << 30
# The parent's wait past a render's own budget: the cooperative check inside usually reports first, with the
# template line that ran long.
GRACE_SECONDS = 1.0
# How often the parent looks at the running render's clock while it waits.
WAKE_SECONDS = 0.25
# A batch this small is written at once (a socket pair's buffer holds far more); a larger one by a thread.
INLINE_BYTES = 32 * 1024


_inside = False            # True in the child
_clock = None              # in the child: the shared [start, budget] of the render running
_lock = threading.RLock()  # one batch at a time talks to the child (threads take turns)
_worker: "_Worker | None" = None


def inside() -> bool:
    """True in the render process itself, where renders run directly."""
    return _inside


def started(seconds: float) -> None:
    """A render begins in the child: give it `seconds` of CPU from now and tell the parent to wait that long."""
    if _clock is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 2
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    # CLOCK_MONOTONIC is one clock for every process of the machine, so the parent can compare it with its own.
    _clock[0], _clock[1] = time.monotonic(), seconds


def call(func: Callable, args: tuple = (), kwargs: dict | None = None, *, seconds: float) -> Any:
    """func(*args, **kwargs) in the render process; what it returns or raises comes back here. `seconds` bounds
    the call until its first render begins, and each render after. func must be a module-level function (it
    is sent by name)."""
    if _inside:
        return func(*args, **(kwargs or {}))
    (ok, value), = map_calls(_apply, [(func, args, kwargs or {})], seconds=seconds)
    if ok:
        return value
    raise value


def _apply(packed: tuple) -> Any:
    func, args, kwargs = packed
    return func(*args, **kwargs)


def map_calls(func: Callable, items: list, *, seconds: float) -> list:
    """[(True, func(item)) or (False, the exception it raised)] for every item, in order, run in the render
    process one after another: the child does not wait for this process between items, so a batch costs no
    round trip per item. An item past its limits gets a RenderLimitError, and the items after it go to a fresh
    process. func must be a module-level function."""
    if _inside:
        return [_attempt(func, item) for item in items]
    out: list = []
    pending = list(items)
    with _lock:
        while pending:
            worker = _current()
            try:
                got, failure = worker.map(func, pending, seconds)
            except BaseException:
                # Interrupted (Ctrl-C) mid-batch: the answers still on their way would reach the next caller.
                _discard(worker)
                raise
            out += got
            if failure is None:
                break
            _discard(worker)
            out.append((False, failure))
            pending = pending[len(got) + 1:]
    return out


def _current() -> "_Worker":
    global _worker
    with _lock:
        if _worker is None or _worker.owner != os.getpid() or not _worker.process.is_alive():
            _worker = _Worker()
        return _worker


def _discard(worker: "_Worker") -> None:
    global _worker
    with _lock:
        worker.stop()
        if _worker is worker:
            _worker = None


def _attempt(func: Callable, item: Any) -> tuple:
    try:
        return True, func(item)
    except Exception as exc:  # noqa: BLE001 -- every failure goes back to the caller, who decides
        return False, exc


def stop() -> None:
    """End the render process (the next render forks a fresh one): its caches go with it."""
    global _worker
    with _lock:
        if _worker is not None and _worker.owner == os.getpid():
            _worker.stop()
        _worker = None


class _Worker:
    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self.owner = os.getpid()       # a forked copy of this process must start a child of its own
        self.conn, child_end = context.Pipe()
        self.sending: threading.Thread | None = None
        self.clock = context.RawArray("d", 2)       # the running render's start (monotonic) and budget
        # The death signal follows the thread that forks, so only a child forked by the main thread takes it.
        tied = threading.current_thread() is threading.main_thread()
        self.process = context.Process(target=_serve, args=(child_end, self.conn, self.clock, tied), daemon=True,
                                       name="harness-template-render")
        # Objects that exist now are left out of the child's collections: a collection touches every object it
        # scans, and each page it touches is copied from the parent.
        gc.freeze()
        try:
            self.process.start()
        finally:
            gc.unfreeze()
        child_end.close()

    def map(self, func: Callable, items: list, seconds: float) -> tuple:
        """(the answers received, None) or (those before the failing item, its RenderLimitError)."""
        self.clock[0], self.clock[1] = time.monotonic(), seconds
        # Pickled here (what cannot be pickled raises to the caller). A batch larger than the pipe holds is written
        # by a thread of its own: a child that never reads (hung before its first read) would leave it waiting
        # here forever, where the deadline below ends it (the child is then killed and the write fails).
        data = ForkingPickler.dumps((func, items, seconds))
        if len(data) <= INLINE_BYTES:        # the pipe is empty between batches and holds this much: no wait
            self.conn.send_bytes(data)
        else:
            self.sending = threading.Thread(target=_write, args=(self.conn, data), daemon=True,
                                            name="harness-render-send")
            self.sending.start()
        got: list = []
        while len(got) < len(items):
            start, budget = self.clock[0], self.clock[1]
            left = start + budget + GRACE_SECONDS - time.monotonic()
            if left <= 0:
                return got, RenderLimitError(f"render stopped: render took longer than {budget:g} s "
                                             "(its process was killed)")
            # Woken a few times a second to see whether a shorter budget began (a render after a compile).
            if not self.conn.poll(min(left, WAKE_SECONDS)):
                continue
            try:
                ok, value = self.conn.recv()
            except (EOFError, OSError):
                self.process.join(5)
                return got, RenderLimitError(f"render stopped: {_death(self.process.exitcode, self.clock[1])}")
            if not ok:
                exc, cause = value
                if cause is not None:
                    exc.__cause__ = cause
                value = exc
            got.append((ok, value))
        return got, None

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        if self.sending is not None:      # its write fails once the child is gone: closed after it, not under it
            self.sending.join(5)
        self.conn.close()


def _write(conn, data) -> None:
    try:
        conn.send_bytes(data)
    except Exception:  # noqa: BLE001 -- the child died or was killed: the reader says how
        pass


def _death(code: int | None, budget: float) -> str:
    if code == -signal.SIGXCPU:
        return f"render took longer than {budget:g} s of CPU time (its process was killed)"
    if code == -signal.SIGKILL:
        return "the render process was killed (out of memory?)"
    if code is not None and code < 0:
        return f"the render process died of signal {signal.Signals(-code).name}"
    return f"the render process exited unexpectedly (exit status {code})"


def _serve(conn, parent_end, clock, tied: bool) -> None:
    global _inside, _clock
    parent_end.close()       # else the child never sees end-of-file when the parent dies
    _close_inherited(conn.fileno())
    _inside, _clock = True, clock
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the parent's to handle; it then kills this
    # A command's SIGTERM handler (it stops a run cleanly) came along with the fork; here a terminate, as the
    # parent's exit sends its daemon children, must just end this process, not raise in its read loop.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if tied:
        _die_with_parent()
    _cap_memory()
    while True:
        try:
            func, items, seconds = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        for item in items:
            clock[0], clock[1] = time.monotonic(), seconds
            ok, value = _attempt(func, item)
            conn.send(_sendable((ok, value if ok else (value, value.__cause__))))


def _close_inherited(keep: int) -> None:
    """A fork copies every descriptor the parent holds: the pipes to other workers (whose readers then never
    see end-of-file while this process lives), server sockets, open files. Templates need none of them, and
    untrusted code should not hold them, so all but the standard streams and this process's own pipe go."""
    try:
        held = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every descriptor number up to the limit
        os.closerange(3, keep)
        os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        return
    for fd in held:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the descriptor of the listing itself, already closed


def _sendable(answer: tuple) -> tuple:
    # What cannot be pickled cannot cross: an exception loses its cause first, then becomes its text.
    for candidate in _fallbacks(answer):
        try:
            pickle.dumps(candidate)
            return candidate
        except Exception:  # noqa: BLE001 -- anything pickle refuses
            continue
    return (False, (HarnessError("the render's result cannot be sent back from its process"), None))


def _fallbacks(answer: tuple):
    yield answer
    ok, value = answer
    if not ok:
        exc, _ = value
        yield (False, (exc, None))
        wrapper = TemplateError if isinstance(exc, TemplateError) else HarnessError
        yield (False, (wrapper(f"{type(exc).__name__}: {exc}"), None))
    else:
        yield (False, (HarnessError(f"the render's result ({type(value).__name__}) cannot be sent back"), None))


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
