"""An unpacked archive is used only as it was unpacked: a file changed, removed or added afterwards (a BFCL question
edited by hand) is refused where the tree is used and reported by `harness verify`, naming the file and how to
unpack it again; unpacking again restores it."""

import json
import os

import pytest

from harness.core.errors import DriftError
from harness.pins.archives import MARKER, archive_tree, unpack_archive
from harness.pins.verify import check_all, verify_all
from tests.pins.test_archives import PREFIX, _sources, _tar


def _edit(tree):
    (tree / "data" / "questions.json").write_text('{"id": "q0", "question": "edited"}\n')
    return "data/questions.json: changed"


def _edit_keeping_size_and_time(tree):
    path = tree / "data" / "questions.json"
    before = path.stat()
    text = path.read_text()
    path.write_text(text.replace("q0", "q9"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return "data/questions.json: changed"


def _remove(tree):
    (tree / "data" / "questions.json").unlink()
    return "data/questions.json: missing"


def _add(tree):
    (tree / "data" / "extra.json").write_text("{}\n")
    return "data/extra.json: added"


def _use(sources, cache):
    with pytest.raises(DriftError) as raised:
        archive_tree("pkg-1.0", sources=sources, cache_dir=cache)
    return str(raised.value)


def _verify(sources, cache):
    (check,) = [c for c in check_all(sources, cache) if c.kind == "archive"]
    assert check.status == "drift"
    with pytest.raises(DriftError) as raised:
        verify_all(sources, cache)
    return str(raised.value)


@pytest.mark.parametrize("check", [_use, _verify], ids=["use", "verify"])
@pytest.mark.parametrize("edit", [_edit, _edit_keeping_size_and_time, _remove, _add],
                         ids=["changed", "changed-same-size-and-time", "removed", "added"])
def test_an_unpacked_archive_changed_afterwards_is_refused(tmp_path, edit, check):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    original = b'{"id": "q0", "question": "what is 2 + 2?"}\n'
    _tar(downloads / "pkg-1.0.tar.gz", {PREFIX + "data/questions.json": original, PREFIX + "vocab.gguf": b"GGUF"})
    sources, cache = _sources(tmp_path, downloads / "pkg-1.0.tar.gz"), tmp_path / "cache"
    tree = archive_tree("pkg-1.0", sources=sources, cache_dir=cache, find_links=downloads)
    assert [c.status for c in check_all(sources, cache) if c.kind == "archive"] == ["ok"]
    said = edit(tree)

    message = check(sources, cache)
    assert said in message and "harness fetch --archives pkg-1.0" in message, message

    # Unpacking again (what `harness fetch --archives` does) puts the archive's own files back.
    unpack_archive(sources.archive("pkg-1.0"), cache_dir=cache, find_links=downloads)
    assert (archive_tree("pkg-1.0", sources=sources, cache_dir=cache) / "data" / "questions.json").read_bytes() \
        == original
    assert not (tree / "data" / "extra.json").exists()
    assert set(json.loads((tree / MARKER).read_text())["manifest"]) == {"data/questions.json", "vocab.gguf"}
