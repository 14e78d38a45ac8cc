"""Paths in sources.json cannot leave their folder: refused when the file is loaded (naming entry and field),
and again where a path is built, for pins made without load_sources and for symbolic links."""

import dataclasses
import json

import pytest

from harness.core.errors import SourcesError
from harness.pins.sources import load_sources, model_cache_path
from tests.pins.test_sources import make_root, model_entry, template_entry

ESCAPES = ["../../x", "../x.gguf", "/etc/passwd", "a/../../x", "a//b", "./m.gguf", "..\\..\\x", "C:/x", ""]


@pytest.mark.parametrize("filename", ESCAPES)
def test_a_model_filename_that_leaves_the_cache_is_refused(tmp_path, filename):
    path = tmp_path / "sources.json"
    path.write_text(json.dumps({"version": 1, "templates": [], "models": [model_entry(filename=filename)]}))
    with pytest.raises(SourcesError, match=r"model 'm': field 'filename' must"):
        load_sources(path)


@pytest.mark.parametrize("file", ESCAPES + ["templates/../../x.jinja"])
def test_a_template_file_that_leaves_the_tree_is_refused(tmp_path, file):
    path = tmp_path / "sources.json"
    path.write_text(json.dumps({"version": 1, "templates": [template_entry(file=file)], "models": []}))
    with pytest.raises(SourcesError, match=r"template 't': field 'file' must"):
        load_sources(path)


def test_a_model_filename_in_a_subfolder_is_still_allowed(tmp_path):
    sources = load_sources(make_root(tmp_path, models=[model_entry(filename="q4/m.gguf")]))
    assert model_cache_path(sources.model("m"), tmp_path / "c") == tmp_path / "c" / "m" / "q4" / "m.gguf"


def test_paths_built_from_unvalidated_pins_are_refused_too(tmp_path):
    sources = load_sources(make_root(tmp_path, [template_entry()], [model_entry()]))
    bad_model = dataclasses.replace(sources.model("m"), filename="../../../x")
    with pytest.raises(SourcesError, match=r"model 'm': field 'filename': 'm/../../../x' resolves to .* outside"):
        model_cache_path(bad_model, tmp_path / "cache")
    bad_template = dataclasses.replace(sources.template("t"), file="/etc/passwd")
    with pytest.raises(SourcesError, match=r"template 't': field 'file': '/etc/passwd' resolves to .* outside"):
        bad_template.path


def test_a_symbolic_link_out_of_the_tree_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    sources = load_sources(make_root(root, [template_entry()]))
    (root / "templates" / "t.jinja").symlink_to(outside / "t.jinja")
    with pytest.raises(SourcesError, match="outside"):
        sources.template("t").path
    (root / "cache").mkdir()
    (root / "cache" / "m").symlink_to(outside, target_is_directory=True)
    sources = load_sources(make_root(root, [template_entry()], [model_entry()]))
    with pytest.raises(SourcesError, match="outside"):
        model_cache_path(sources.model("m"), root / "cache")
