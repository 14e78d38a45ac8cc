"""Which processes listen on a local TCP port, read from Linux's /proc: a server is ready only when the socket
listening on its port is its own, since any other process that took the port first answers the health check too.

/proc/net/tcp{,6} lists each socket with its state and inode; /proc/PID/fd links name the inodes a process
holds ("socket:[INODE]"). Elsewhere (no /proc) nothing can be told, and callers fall back to what they can see.
"""

from __future__ import annotations

import os
from pathlib import Path

_LISTEN = "0A"      # TCP_LISTEN in /proc/net/tcp's state column
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def listening_inodes(port: int) -> set[str] | None:
    """The inodes of the sockets listening on `port` (any address), or None where /proc cannot tell."""
    found, readable = set(), False
    for table in _TABLES:
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found if readable else None


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds open (empty when it is gone or not readable)."""
    inodes = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def holders(inodes: set[str]) -> list[str]:
    """"PID (command)" of each process holding one of these sockets, for a message; empty if none is visible."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and socket_inodes(int(entry.name)) & inodes:
            try:
                comm = (entry / "comm").read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                comm = "?"
            out.append(f"{entry.name} ({comm})")
    return out


def listener_is(pid: int, port: int) -> bool | None:
    """True when every socket listening on `port` is held by `pid`, False when another process holds one or
    none listens, None where /proc cannot tell."""
    inodes = listening_inodes(port)
    if inodes is None:
        return None
    return bool(inodes) and inodes <= socket_inodes(pid)
