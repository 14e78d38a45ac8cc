"""Reading a file a user names (a scenario, a tools file, sources.json) or pipes in, within bounds.

A name can point at something that is not a file: a FIFO, whose open waits for a writer and whose read waits for
the writer to close, or a link to /dev/zero, which never ends. Such a path is opened without blocking and checked
on the open descriptor (nothing swapped in between a check and the open is read), and refused by name. What is
read is bounded too: a regular file or a stream larger than any input the harness takes is refused, not held in
memory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness.core.errors import HarnessError

# Far above any project file (sources.json is kilobytes, a scenario or a reply less) and far below what would
# strain memory.
MAX_INPUT_BYTES = 64 << 20


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def open_regular(path, error_type=HarnessError, what: str = ""):
    """`path` opened for reading (binary), or error_type naming it when it is missing, unreadable or not a regular
    file. `what` says what the file was given as ("--tools", "scenario"), for the message."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error_type(f"{label}: cannot read: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise error_type(f"{label}: not a regular file ({kind_of(mode)}); only a regular file is read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bounded(stream, label: str, error_type=HarnessError, limit: int = MAX_INPUT_BYTES):
    """All of a stream (bytes, or str from a text stream, where `limit` counts characters), or error_type when it
    holds more than `limit` (read no further)."""
    try:
        data = stream.read(limit + 1)
    except OSError as exc:
        raise error_type(f"{label}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error_type(f"{label}: more than {limit} {'bytes' if isinstance(data, bytes) else 'characters'}; "
                         "not an input the harness reads")
    return data


def read_regular(path, error_type=HarnessError, what: str = "", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file `path` (see open_regular), at most `limit` of them."""
    label = f"{what} {path}" if what else str(path)
    with open_regular(path, error_type, what) as f:
        if os.fstat(f.fileno()).st_size > limit:      # said at once, not after reading `limit` bytes of it
            raise error_type(f"{label}: more than {limit} bytes; not an input the harness reads")
        return read_bounded(f, label, error_type, limit)


def read_regular_text(path, error_type=HarnessError, what: str = "", limit: int = MAX_INPUT_BYTES) -> str:
    """read_regular, decoded as UTF-8; bytes that are not say where."""
    raw = read_regular(path, error_type, what, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error_type(f"{what + ' ' if what else ''}{path}:{line}: not UTF-8 (byte {raw[exc.start]:#04x} at "
                         f"offset {exc.start})") from None
