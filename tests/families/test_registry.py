"""The registry finds its families itself (every YAML file, every module declaring FAMILY), refuses a broken or
clashing one by name, and checks what a family declares about itself (detectable, peers)."""

import dataclasses
import textwrap
from pathlib import Path

import pytest

from harness import families as registry
from harness.core.errors import FamilySpecError
from harness.formats.base import PEER_KEYS, peers_problem
from harness.formats.shape import Shape, exact
from harness.formats.spec import load_family

FAMILIES_DIR = Path(registry.__file__).resolve().parent

HERMES_LIKE = """\
name: {name}
label: Test family
detail: A test.
markers: ["<x>"]
call: "<x>{{object}}</x>"
"""


def package(tmp_path, monkeypatch, name, files: dict) -> Path:
    """A throwaway package of family files, importable as `name`."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for file, text in files.items():
        (folder / file).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    return folder


def test_every_module_declaring_family_is_registered_without_a_list():
    declaring = {p for p in FAMILIES_DIR.glob("*.py") if "\nFAMILY = " in p.read_text(encoding="utf-8")}
    sources = {Path(f.source) for f in registry.families().values()}
    assert declaring and declaring <= sources
    assert {p for p in FAMILIES_DIR.glob("*.yaml")} <= sources
    assert not hasattr(registry, "CUSTOM_MODULES")


def test_a_module_that_cannot_be_imported_is_named(tmp_path, monkeypatch):
    folder = package(tmp_path, monkeypatch, "fams_broken", {"broken.py": "import no_such_module_here\n"})
    with pytest.raises(FamilySpecError, match=r"fams_broken\.broken: the family module cannot be imported"):
        registry.load_table(folder, "fams_broken")


def test_a_clashing_name_is_named(tmp_path, monkeypatch):
    borrowed = "from harness.families.minicpm5 import FAMILY\n"
    folder = package(tmp_path, monkeypatch, "fams_clash", {"first.py": borrowed, "second.py": borrowed})
    with pytest.raises(FamilySpecError, match=r"fams_clash\.second: family 'minicpm5' is already defined in .*first\.py"):
        registry.load_table(folder, "fams_clash")
    folder = package(tmp_path, monkeypatch, "fams_clash_yaml", {
        "minicpm5.yaml": HERMES_LIKE.format(name="minicpm5"), "custom.py": borrowed})
    with pytest.raises(FamilySpecError, match=r"fams_clash_yaml\.custom: family 'minicpm5' is already defined in .*minicpm5\.yaml"):
        registry.load_table(folder, "fams_clash_yaml")


def test_family_must_be_a_custom_family(tmp_path, monkeypatch):
    folder = package(tmp_path, monkeypatch, "fams_wrong", {"wrong.py": "FAMILY = 'hermes'\n"})
    with pytest.raises(FamilySpecError, match=r"fams_wrong\.wrong: FAMILY must be a CustomFamily"):
        registry.load_table(folder, "fams_wrong")


@pytest.mark.parametrize("package_name, fields, problem", [
    ("fams_peers", 'peers={"ollama": "minicpm"}', "unknown peer 'ollama'"),
    ("fams_tokens", 'tokens={"<t>": "special"}', "tokens_source must say"),
])
def test_a_module_declaring_peers_or_tokens_badly_is_named(tmp_path, monkeypatch, package_name, fields, problem):
    text = f"""\
        import dataclasses
        from harness.families.minicpm5 import FAMILY as BASE
        FAMILY = dataclasses.replace(BASE, name="minicpm5-copy", {fields})
        """
    folder = package(tmp_path, monkeypatch, package_name, {"copy.py": text})
    with pytest.raises(FamilySpecError, match=rf"{package_name}\.copy: {problem}"):
        registry.load_table(folder, package_name)


def test_a_bad_shape_strategy_fails_where_the_family_declares_it(tmp_path, monkeypatch):
    # A name harness/grammar would not know is refused when the module loads, not when a grammar is built.
    with pytest.raises(ValueError, match="text='cdata2' is not one of plain, cdata, minimax"):
        Shape(call=exact("<f>{name}</f>"), text="cdata2")
    text = """\
        from harness.formats.shape import Shape, exact
        SHAPE = Shape(call=exact("<f>{name}</f>"), nested="yaml")
        """
    folder = package(tmp_path, monkeypatch, "fams_shape", {"odd.py": text})
    with pytest.raises(FamilySpecError, match=r"fams_shape\.odd: .*nested='yaml'"):
        registry.load_table(folder, "fams_shape")


@pytest.mark.parametrize("extra, problem", [
    ("peers: {ollama: hermes}\n", "unknown peer 'ollama'"),
    ("peers: {vllm: ''}\n", "peers.vllm must be a non-empty string"),
    ("peers: [vllm, hermes]\n", "peers is a mapping of vllm, sglang, llama.cpp, transformers"),
    ("peers: {vllm: a, templates: [GLM-4.7-*]}\n", "peers.templates is a mapping of template ids"),
    ("peers: {templates: {GLM-4.7-*: glm47}}\n", r"peers.templates.GLM-4.7-\* is a mapping of vllm"),
    ("peers: {templates: {GLM-4.7-*: {ollama: glm47}}}\n", r"unknown peer 'ollama' in peers.templates.GLM-4.7-\*"),
    ("peers: {templates: {GLM-4.7-*: {vllm: ''}}}\n", "must be a non-empty string or null"),
    ("peers: {templates: {'': {vllm: glm47}}}\n", "has a key that is not a template id"),
    ("peers: {vllm: a, tokenizer_config: {token_suffix: 3}}\n", "peers.tokenizer_config is a non-empty mapping"),
    ("detectable: no-thanks\n", "must be true or false"),
    ("tokens: {'<t>': control}\n", "'<t>': the kind is one of special, not-special"),
    ("tokens: {'<t>': special}\n", "tokens_source must say where the kinds come from"),
    ("tokens: ['<t>']\n", "a mapping of token texts"),
    ("answer_key: response\n", "a non-empty key, in a start_only family"),
])
def test_yaml_declarations_are_checked_with_file_and_line(tmp_path, extra, problem):
    path = tmp_path / "probe.yaml"
    path.write_text(HERMES_LIKE.format(name="probe") + extra)
    with pytest.raises(FamilySpecError, match=rf"probe\.yaml:6: .*{problem}"):
        load_family(path, lambda: ())


def test_peers_are_on_the_family_and_only_known_projects():
    for family in registry.families().values():
        assert set(family.peers) <= set(PEER_KEYS) | {"templates", "tokenizer_config"}, family.name
        assert peers_problem(family.peers, family=True) is None, family.name
    # The pins' declared parsers stay plain names: a template is one template.
    assert "unknown peer 'templates'" in peers_problem({"templates": {"x": {"vllm": "y"}}})


def test_a_template_is_read_by_its_own_peer_parser_else_the_family_wide_one():
    glm = registry.get("glm")
    assert glm.peer("sglang") == "glm45" and glm.peer("sglang", "GLM-4.6") == "glm45"
    assert glm.peer("sglang", "GLM-4.7-Flash") == "glm47" and glm.peer("vllm", "poolside-Laguna-XS.2") == "poolside_v1"
    # Spark 2.5's entry names SGLang only: vLLM falls back to the family-wide parser.
    assert glm.peer("sglang", "Spark2.5") == "spark25" and glm.peer("vllm", "Spark2.5") == "glm45"
    assert glm.peer("transformers", "GLM-4.7-Flash") is None
    assert registry.get("minimax-m1").peer_projects() == set()
    probe = dataclasses.replace(glm, peers={"vllm": "a", "templates": {"x-*": {"vllm": None, "sglang": "b"}}})
    assert probe.peer("vllm", "x-1") is None and probe.peer("vllm", "y") == "a"
    assert probe.peer_projects() == {"vllm", "sglang"}


def test_detection_and_the_matrix_read_with_detectable_families_only():
    assert [n for n, f in registry.families().items() if not f.detectable] == ["generic-json"]
    assert list(registry.detectable()) == [n for n in registry.names() if n != "generic-json"]


def test_parse_is_the_one_entry_point():
    assert registry.parse("hermes", '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>').accepted
    assert registry.parse("generic-json", '{"name": "f", "arguments": {}}').accepted
    with pytest.raises(FamilySpecError, match="unknown family 'no-such'"):
        registry.parse("no-such", "text")
