"""Pinned source archives: verified before anything is unpacked, unpacked whole or not at all, never outside."""

import hashlib
import io
import json
import os
import tarfile
import tomllib
from pathlib import Path

import pytest

from harness.pins.archives import MARKER, archive_tree, is_unpacked
from harness.core import constants
from harness.core.constants import BINDING_ARCHIVE, BINDING_VERSION
from harness.core.errors import DownloadError, SourcesError
from harness.pins.sources import Sources, load_sources
from harness.pins.entries import ArchivePin

PREFIX = "pkg-1.0/vendor/models/"


def _tar(path: Path, members: dict) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _sources(tmp_path: Path, archive: Path, **overrides) -> Sources:
    data = archive.read_bytes()
    fields = dict(id="pkg-1.0", package="pkg", version="1.0", filename=archive.name, size=len(data),
                  sha256=hashlib.sha256(data).hexdigest(), extract=PREFIX, origin="test", note=None)
    fields.update(overrides)
    pin = ArchivePin(**fields)
    return Sources(path=tmp_path / "sources.json", templates={}, models={}, archives={pin.id: pin})


@pytest.fixture
def downloads(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    _tar(folder / "pkg-1.0.tar.gz", {PREFIX + "templates/a.jinja": b"{{ a }}", PREFIX + "vocab.gguf": b"GGUF",
                                     "pkg-1.0/setup.py": b"print('not unpacked')"})
    return folder


def test_only_the_pinned_folder_is_unpacked_with_a_marker(tmp_path, downloads):
    sources = _sources(tmp_path, downloads / "pkg-1.0.tar.gz")
    tree = archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=downloads)
    assert (tree / "templates" / "a.jinja").read_bytes() == b"{{ a }}"
    assert sorted(p.name for p in tree.iterdir()) == [MARKER, "templates", "vocab.gguf"]
    assert json.loads((tree / MARKER).read_text())["files"] == 2
    assert not any(p.name.startswith(".pkg-1.0.") and p.is_dir() for p in tree.parent.iterdir())


def test_a_wrong_hash_unpacks_nothing(tmp_path, downloads):
    sources = _sources(tmp_path, downloads / "pkg-1.0.tar.gz", sha256="0" * 64)
    with pytest.raises(DownloadError, match="nothing was unpacked"):
        archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=downloads)
    assert not (tmp_path / "cache" / "archives" / "pkg-1.0").exists()


def test_an_interrupted_unpack_is_redone_and_its_leftovers_removed(tmp_path, downloads):
    sources = _sources(tmp_path, downloads / "pkg-1.0.tar.gz")
    cache = tmp_path / "cache"
    half = cache / "archives" / "pkg-1.0"
    half.mkdir(parents=True)
    (half / "vocab.gguf").write_bytes(b"GG")                      # a tree without its marker
    stale = cache / "archives" / ".pkg-1.0.abc.unpacking"           # what kill -9 mid-unpack leaves
    stale.mkdir()
    assert not is_unpacked(sources.archive("pkg-1.0"), cache)
    tree = archive_tree("pkg-1.0", sources=sources, cache_dir=cache, find_links=downloads)
    assert (tree / "vocab.gguf").read_bytes() == b"GGUF"
    assert not stale.exists()


def test_a_member_climbing_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    archive = _tar(folder / "pkg-1.0.tar.gz", {PREFIX + "ok.txt": b"ok", PREFIX + "../../../../escaped.txt": b"x"})
    sources = _sources(tmp_path, archive)
    with pytest.raises(DownloadError, match="cannot unpack"):
        archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=folder)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (tmp_path / "cache" / "archives" / "pkg-1.0").exists()


@pytest.mark.parametrize("field, value, message", [
    ("filename", "../x.tar.gz", "bare file name"),
    ("extract", "/abs/", "relative folder"),
    ("extract", "a/../../b/", "relative folder"),
    ("extract", "no-slash", "relative folder"),
])
def test_archive_pins_that_would_write_elsewhere_are_refused(tmp_path, field, value, message):
    raw = json.loads((Path(__file__).resolve().parents[2] / "sources.json").read_text(encoding="utf-8"))
    raw["archives"][0][field] = value
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(SourcesError, match=message):
        load_sources(path)


def test_the_llama_cpp_sdist_is_pinned_at_the_binding_version_the_extra_installs():
    pin = load_sources().archive(BINDING_ARCHIVE)
    assert (pin.package, pin.version, pin.filename) == ("llama-cpp-python", BINDING_VERSION,
                                                        f"llama_cpp_python-{BINDING_VERSION}.tar.gz")
    # pyproject.toml cannot read the constant: the extra's pin is held equal to it here.
    project = tomllib.loads((constants.ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["optional-dependencies"]["embedded"] == [f"llama-cpp-python[server]=={BINDING_VERSION}"]


def _tar_with_link(path: Path, target: str) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(PREFIX + "templates/a.jinja")
        info.size = 7
        tar.addfile(info, io.BytesIO(b"{{ a }}"))
        link = tarfile.TarInfo(PREFIX + "templates/b.jinja")
        link.type, link.linkname = tarfile.LNKTYPE, target
        tar.addfile(link)
    return path


def test_a_hard_link_inside_the_folder_is_unpacked(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    sources = _sources(tmp_path, _tar_with_link(folder / "pkg-1.0.tar.gz", PREFIX + "templates/a.jinja"))
    tree = archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=folder)
    assert (tree / "templates" / "b.jinja").read_bytes() == b"{{ a }}"


def test_a_hard_link_to_a_file_outside_the_folder_is_refused(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    sources = _sources(tmp_path, _tar_with_link(folder / "pkg-1.0.tar.gz", "pkg-1.0/setup.py"))
    with pytest.raises(DownloadError, match="is a hard link to pkg-1.0/setup.py, outside"):
        archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=folder)
    assert not (tmp_path / "cache" / "archives" / "pkg-1.0").exists()


@pytest.mark.parametrize("how", ["a-file-in-the-way", "read-only"])
def test_a_cache_that_cannot_be_written_is_a_clear_error(tmp_path, downloads, how):
    sources = _sources(tmp_path, downloads / "pkg-1.0.tar.gz")
    cache = tmp_path / "cache"
    if how == "a-file-in-the-way":
        cache.write_text("not a folder")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder; the file-in-the-way case covers the same path")
        (cache / "archives").mkdir(parents=True)
        (cache / "archives").chmod(0o555)
    with pytest.raises(DownloadError, match="cannot write into the cache at .*HARNESS_CACHE"):
        archive_tree("pkg-1.0", sources=sources, cache_dir=cache, find_links=downloads)


def test_a_hard_link_to_a_member_the_archive_lacks_is_a_clear_error(tmp_path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    sources = _sources(tmp_path, _tar_with_link(folder / "pkg-1.0.tar.gz", PREFIX + "templates/gone.jinja"))
    with pytest.raises(DownloadError, match=r"templates/b.jinja is a hard link to .*templates/gone.jinja, which the "
                                            "archive does not hold; nothing was unpacked"):
        archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=folder)
    assert not (tmp_path / "cache" / "archives" / "pkg-1.0").exists()
