"""Writing inside a folder without leaving it: every file the harness writes under a results folder (a
transcript it appends to, a report it rewrites) goes through here.

A symbolic link planted at `results/summary.md` or `results/transcripts/m.jsonl` would otherwise carry the write
to wherever it points (the link is followed by open()), and a folder on the way that is a link (`transcripts ->
/elsewhere`) would do the same for every file under it. Such a write is refused with the path, never followed
and never silently replaced: the link is the user's, and so is the decision. Reports are written whole to a
temporary file beside the target and renamed over it, so a reader or a crash sees the old file or the new one,
never half of one."""

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

from harness.core.errors import UnsafeWriteError


def default_file_mode() -> int:
    """The permissions a new file gets under the process's umask (0o666 masked): mkstemp creates 0600, and a file
    written beside and renamed into place should get what any other new file would."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def check_target(path, root) -> Path:
    """`path` if writing it stays inside `root`: every folder from root down to it resolves inside root, and
    the file itself, when it exists, is a regular file and not a link. Else UnsafeWriteError naming the path."""
    path, root = Path(path), Path(root)
    real_root = root.resolve()
    real_parent = path.parent.resolve()
    if real_parent != real_root and real_root not in real_parent.parents:
        raise UnsafeWriteError(f"refusing to write {path}: its folder leads to {real_parent}, outside {root} "
                               "(a symbolic link on the way); the harness writes nothing through a link")
    try:
        info = path.lstat()
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeWriteError(f"refusing to write {path}: it is a symbolic link to {os.readlink(path)}; the "
                               "harness writes nothing through a link (remove the link or write elsewhere)")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeWriteError(f"refusing to write {path}: it is not a regular file")
    return path


def open_append(path, root):
    """`path` opened to read and append (binary, created if missing), refused as check_target refuses. The link
    check is repeated by the open itself (O_NOFOLLOW), so a link planted between the check and the open is
    refused too; a second name for the file (a hard link) is refused, since appending would change that file."""
    path = check_target(path, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_target(path, root)         # mkdir may have gone through a folder link planted meanwhile
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        if path.is_symlink():
            raise UnsafeWriteError(f"refusing to write {path}: it is a symbolic link to {os.readlink(path)}; "
                                   "the harness writes nothing through a link") from None
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "it is not a regular file"
    elif info.st_nlink > 1:
        problem = f"it has {info.st_nlink} names (a hard link): appending would change the file under the other too"
    if problem:
        os.close(fd)
        raise UnsafeWriteError(f"refusing to write {path}: {problem}")
    os.set_blocking(fd, True)
    # Unbuffered: a write that fails (a full disk) leaves nothing in a buffer to be flushed later, behind a
    # caller that has already cut the file back to its last whole line.
    return os.fdopen(fd, "a+b", buffering=0)


@contextmanager
def replacing(path, root):
    """Yields a temporary path beside `path` (same suffix, hidden name) for a writer that takes a path (a
    picture library, say); when the block ends without an error it is renamed over `path`, else removed. The
    rename replaces the directory entry, so it writes through no link; check_target refuses one first."""
    path = check_target(path, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The same suffix: a writer that picks its format by the name (matplotlib's savefig) picks the right one.
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix or ".partial")
    os.close(fd)
    temp = Path(temp)
    try:
        yield temp
        with open(temp, "rb+") as f:
            os.fsync(f.fileno())
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        os.chmod(temp, mode)
        check_target(path, root)    # a link planted while the file was written is still refused
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def write_atomically(path, data, root) -> Path:
    """`data` (text as UTF-8, or bytes) written whole to `path` inside `root` (see replacing)."""
    blob = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path, root) as temp:
        temp.write_bytes(blob)
    return Path(path)


def check_writable(root, what: str) -> Path:
    """`root` if a file can be written into it (made if missing), tried by writing one: a command that works for
    minutes before it writes finds out first. Else UnsafeWriteError saying why (a file in the way, a read-only
    or full disk); `what` names what would be written there."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=root, prefix=".harness-write-check.", suffix=".partial")
        try:
            os.write(fd, b"\n")
            os.fsync(fd)        # a full disk may refuse the block only when it is flushed
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            reason = "a file is in the way of the folder"
        raise UnsafeWriteError(f"cannot write {what} into {root}: {reason}; nothing was done (give a folder "
                               "that can be written)") from None
    return root


def lock_holder(fd: int) -> str:
    """Who holds the flock() on the open file `fd`: "process PID (its command line)" from the kernel's table of
    locks (/proc/locks, Linux), else "another process" where there is no such table to read."""
    info = os.fstat(fd)
    key = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return "another process"
    for line in table:
        # "1: FLOCK  ADVISORY  WRITE 14499 fe:00:2146675 0 EOF"; a process waiting for the lock has a "->" line
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key and parts[4].isdigit():
            return _process(int(parts[4]))
    return "another process"


def _process(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"process {pid}"
    command = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    if len(command) > 200:
        command = command[:199] + "…"
    return f"process {pid} ({command})" if command else f"process {pid}"
