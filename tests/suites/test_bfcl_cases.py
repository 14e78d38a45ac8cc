"""BFCL v4's single-turn categories as cases: every entry converts or is skipped with its reason, counted; the
pinned wheel is refused when its bytes differ from the pin; the draw is seeded and stratified."""

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.core.errors import BFCLDataError, DownloadError
from harness.suites.bfcl.cases import (
    ARCHIVE_ID, CATEGORIES, TYPE_SUBSTITUTIONS, convert_schema, draw, load_suite,
)
from harness.pins.archives import archive_tree
from harness.pins.sources import Sources, load_sources
from harness.pins.entries import ArchivePin

ROOT = Path(__file__).resolve().parents[2]
# Entries per category in bfcl-eval 2026.3.23 (data/BFCL_v4_<category>.json).
SHIPPED = {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240,
           "live_simple": 258, "live_multiple": 1053, "live_parallel": 16, "live_parallel_multiple": 24,
           "live_irrelevance": 884, "live_relevance": 16}


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def _types(schema):
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), str):
            yield schema["type"]
        for value in schema.values():
            yield from _types(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _types(value)


def test_every_entry_of_every_category_converts_or_is_skipped_with_its_reason(suite):
    assert suite.totals == SHIPPED
    for category in CATEGORIES:
        converted, skipped = suite.of(category), suite.skipped_in(category)
        assert len(converted) + len(skipped) == SHIPPED[category], category
        assert all(s.id and s.reason for s in skipped)
    # What this pin's data holds: four live_irrelevance entries offer no function at all.
    assert [(s.category, s.reason.split(" (")[0]) for s in suite.skipped] == \
        [("live_irrelevance", "offers no functions")] * 4
    for case in suite.cases.values():
        types = {t for tool in case.scenario.tools for t in _types(tool.parameters)}
        assert not types & set(TYPE_SUBSTITUTIONS), case.id
        assert case.scenario.samples == 1 and case.scenario.max_steps == 1
        assert case.scenario.sampling["temperature"] == 0.0


def test_expectations_follow_the_category(suite):
    simple = suite.cases["simple_python_0"]
    assert simple.scenario.turns[0].expect.tool == "calculate_triangle_area"
    assert simple.answer == [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]
    assert suite.cases["irrelevance_0"].scenario.turns[0].expect.no_tool
    assert suite.cases["live_relevance_0-0-0"].scenario.turns[0].expect.expects_call is True
    # The system message of a live question is the scenario's system message.
    with_system = next(c for c in suite.of("live_simple") if c.scenario.system)
    assert with_system.scenario.turns[0].user


def test_bfcl_types_become_json_schema_at_every_depth():
    bfcl = {"type": "dict", "properties": {
        "x": {"type": "float"}, "pair": {"type": "tuple", "items": {"type": "any"}},
        "rows": {"type": "array", "items": {"type": "dict", "properties": {"w": {"type": "float"}}}},
        "extra": {"type": "dict", "additionalProperties": {"type": "float"}}}, "required": ["x"]}
    assert convert_schema(bfcl) == {"type": "object", "properties": {
        "x": {"type": "number"}, "pair": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"w": {"type": "number"}}}},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}}}, "required": ["x"]}
    assert bfcl["type"] == "dict"       # the case keeps BFCL's own document for BFCL's checker


def _tree(tmp_path, functions):
    data = tmp_path / "tree" / "data"
    (data / "possible_answer").mkdir(parents=True)
    entries = [{"id": f"simple_python_{i}", "question": [[{"role": "user", "content": "q"}]], "function": [f]}
               for i, f in enumerate(functions)]
    (data / "BFCL_v4_simple_python.json").write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    answers = [{"id": e["id"], "ground_truth": [{e["function"][0]["name"]: {}}]} for e in entries]
    (data / "possible_answer" / "BFCL_v4_simple_python.json").write_text("\n".join(map(json.dumps, answers)))
    return tmp_path / "tree"


def test_a_schema_our_typing_cannot_read_is_skipped_with_its_id_and_reason(tmp_path):
    good = {"name": "f", "description": "", "parameters": {"type": "dict", "properties": {"a": {"type": "float"}}}}
    java = {"name": "g", "description": "", "parameters": {"type": "dict", "properties": {"m": {"type": "HashMap"}}}}
    broken = {"name": "h", "description": "", "parameters": {"type": "dict", "properties": {}, "required": "a"}}
    suite = load_suite(["simple_python"], tree=_tree(tmp_path, [good, java, broken]))
    assert list(suite.cases) == ["simple_python_0"] and suite.totals == {"simple_python": 3}
    assert [(s.id, s.category) for s in suite.skipped] == [("simple_python_1", "simple_python"),
                                                           ("simple_python_2", "simple_python")]
    assert "'HashMap'" in suite.skipped[0].reason and "properties.m" in suite.skipped[0].reason
    assert "required must be a list" in suite.skipped[1].reason


def test_an_unknown_category_and_a_missing_file_are_clear_errors(tmp_path):
    with pytest.raises(BFCLDataError, match="unknown BFCL category simple_java"):
        load_suite(["simple_java"], tree=tmp_path)
    with pytest.raises(BFCLDataError, match="BFCL_v4_multiple.json: BFCL's file is missing"):
        load_suite(["multiple"], tree=tmp_path)


def test_the_draw_is_stratified_seeded_and_grows_by_extension(suite):
    two = draw(suite, ["simple_python", "live_simple", "irrelevance"], 2, seed=0)
    assert [c.category for c in two] == ["simple_python"] * 2 + ["live_simple"] * 2 + ["irrelevance"] * 2
    assert [c.id for c in two] == [c.id for c in draw(suite, ["simple_python", "live_simple", "irrelevance"], 2)]
    five = draw(suite, ["simple_python"], 5, seed=0)
    assert {c.id for c in two[:2]} <= {c.id for c in five}
    assert [c.id for c in draw(suite, ["simple_python"], 5, seed=1)] != [c.id for c in five]
    assert len(draw(suite, ["live_parallel"], 100)) == SHIPPED["live_parallel"]


def test_the_pinned_wheel_is_bfcl_eval_and_a_file_unlike_its_pin_is_refused(tmp_path):
    pin = load_sources().archive(ARCHIVE_ID)
    assert (pin.package, pin.version) == ("bfcl-eval", "2026.3.23")
    assert pin.filename == "bfcl_eval-2026.3.23-py3-none-any.whl"
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with zipfile.ZipFile(downloads / pin.filename, "w") as wheel:
        wheel.writestr("bfcl_eval/data/BFCL_v4_simple_python.json", "{}\n")
    with pytest.raises(DownloadError, match="nothing was unpacked"):
        archive_tree(ARCHIVE_ID, cache_dir=tmp_path / "cache", find_links=downloads)
    assert not (tmp_path / "cache" / "archives" / ARCHIVE_ID).exists()


def _wheel_sources(tmp_path, members: dict):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for name, data in members.items():
            wheel.writestr(name, data)
    folder = tmp_path / "downloads"
    folder.mkdir(exist_ok=True)
    (folder / "pkg-1.0-py3-none-any.whl").write_bytes(buffer.getvalue())
    pin = ArchivePin("pkg-1.0", "pkg", "1.0", "pkg-1.0-py3-none-any.whl", len(buffer.getvalue()),
                     hashlib.sha256(buffer.getvalue()).hexdigest(), "pkg/", "test", None)
    return Sources(path=tmp_path / "sources.json", templates={}, models={}, archives={pin.id: pin}), folder


def test_a_wheel_unpacks_its_pinned_folder_alone_and_never_outside_it(tmp_path):
    sources, folder = _wheel_sources(tmp_path, {"pkg/data/a.json": "{}", "pkg-1.0.dist-info/METADATA": "x"})
    tree = archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache", find_links=folder)
    assert (tree / "data" / "a.json").read_text() == "{}" and not (tree / "METADATA").exists()
    sources, folder = _wheel_sources(tmp_path, {"pkg/ok.json": "{}", "pkg/../../escaped.txt": "x"})
    with pytest.raises(DownloadError, match="outside 'pkg/'; nothing was unpacked"):
        archive_tree("pkg-1.0", sources=sources, cache_dir=tmp_path / "cache2", find_links=folder)
    assert not list(tmp_path.rglob("escaped.txt"))


@pytest.mark.parametrize("argv, message", [
    (["--cases", "2"], "--category and --cases choose BFCL cases: add --suite bfcl"),
    (["--suite", "bfcl", "--scenario", "greeting"], "--scenario and --samples choose YAML scenarios"),
    (["--suite", "bfcl", "--category", "simple_java"], "unknown BFCL category simple_java"),
])
def test_run_refuses_flags_that_do_not_choose_bfcl_cases_before_any_model_opens(argv, message):
    proc = subprocess.run([sys.executable, "-m", "harness", "run", *argv], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr
