"""How much CPU a server process and the processes it started have used, read from Linux's /proc: a request that
got no answer by its deadline while its server kept computing is slow (the machine is loaded, the reply long);
one whose server used next to no CPU meanwhile is hung (a deadlock, a lost request), and waiting longer would
only lose time. Elsewhere (no /proc) nothing can be told, and callers fall back to waiting.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds used by `pid`'s threads in user and kernel mode and by the children it has reaped),
    or None when it is gone. A worker that ends mid-request leaves the tree, and its CPU would drop out of the sum
    (a server computing through short-lived workers would look idle): once reaped it is counted in its parent."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold blanks or ")": the fields start after the last.
    fields = raw[raw.rfind(")") + 2:].split()
    try:
        # utime, stime, cutime, cstime: fields 14 to 17 of proc(5), counted from the state (field 3).
        return int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICKS
    except (IndexError, ValueError):
        return None


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds used so far by process `pid` and its living descendants (a server that hands requests to
    worker processes computes there), or None when /proc cannot tell or the process is gone."""
    if pid is None:
        return None
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                stats[int(entry.name)] = stat
    if pid not in stats:
        return None
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stats[current][1]
        todo.extend(children.get(current, ()))
    return round(total, 2)
