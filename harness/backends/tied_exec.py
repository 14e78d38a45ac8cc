"""Become a command the kernel kills when the process that started it dies, however that process dies (a SIGKILL
runs no atexit and no finally): `python -I -S tied_exec.py PARENT_PID COMMAND [ARG...]` sets Linux's
PR_SET_PDEATHSIG to SIGKILL, checks that its parent is still PARENT_PID (it may have died before the signal was
set), then execs COMMAND, which keeps this process's pid.

LocalServer starts every server through this file instead of a `preexec_fn`. A preexec_fn runs Python in the
forked child before exec; in a process with several threads (the conformance suite starts servers from two worker
threads at once) a lock another thread held at the fork is never released in the child, which can then wait
forever before exec, and the parent's Popen waits with it (Python's subprocess documentation warns of it). Started
this way the child execs at once, and the signal is set in a process of its own. Standard library only, and it
reads no user site or environment (-I -S): it runs under the harness' python whatever the server is.

Exit 1: the parent died first. Exit 127, after a line on stderr: the command could not be run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1     # linux/prctl.h


def main(argv: list) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print("usage: tied_exec.py PARENT_PID COMMAND [ARG...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[1:]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass            # not Linux: the command runs untied, as it would without this file
    if os.getppid() != parent:
        return 1
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"cannot run {command[0]}: {exc}", file=sys.stderr, flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
