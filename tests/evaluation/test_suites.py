"""Every registered suite of one record per question (each folder suite of harness.suites.SUITES that counts its
records in a matrix) has the one shape: a command of its name whose
records carry that kind, documented labels, a classifier whose labels (as the committed records hold them) are
its own, a replay line the command parses, and a page that names every label. A suite added to the table is
checked here without a line of this file changing."""

import shlex
from pathlib import Path

import pytest

from harness import suites as folder_suites
from harness.cli import build_parser

RESULTS = Path(__file__).resolve().parents[2] / "results"
SUITES = {name: s for name, s in folder_suites.registered().items() if s.matrix is not None}
WHERE = {name: folder_suites.SUITES[name] for name in SUITES}


def test_every_module_in_the_table_registers_one_suite_of_its_own_name():
    assert {"runtime-check", "runtime-conformance", "parser-agreement"} <= set(SUITES)
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for name, suite in SUITES.items():
        assert suite.record.KIND == name and name in commands, name
        assert suite.folder and suite.page.endswith(".md"), name


@pytest.mark.parametrize("name", sorted(SUITES))
def test_labels_are_documented(name):
    suite = SUITES[name]
    assert suite.label_names[0] == "agree" and len(set(suite.label_names)) == len(suite.label_names)
    for label, meaning in suite.labels.items():
        assert isinstance(meaning, str) and len(meaning.split()) >= 4, (label, meaning)
        assert suite.label_head(label) == label, label      # a label's own name carries no detail


def committed(suite) -> list:
    warnings = []
    records = suite.read_all(RESULTS, warnings)
    assert not warnings, warnings
    return records


def labels_of(record) -> list:
    return record.labels if hasattr(record, "labels") else [record.label]


@pytest.mark.parametrize("name", sorted(SUITES))
def test_the_classifier_names_only_its_labels(name):
    # The committed records are the classifier's answers on real runtimes and parsers: each label they hold,
    # detail cut, is one the suite documents, and more than one of them is seen.
    suite = SUITES[name]
    records = committed(suite)
    assert records, f"no committed records in results/{suite.folder}/"
    seen = {suite.label_head(label) for r in records for label in labels_of(r)}
    assert seen <= set(suite.label_names), seen - set(suite.label_names)
    assert len(seen) > 1


@pytest.mark.parametrize("name", sorted(SUITES))
def test_a_record_replays_through_its_own_command(name, tmp_path):
    suite = SUITES[name]
    parser = build_parser()
    for record in committed(suite)[:50]:
        line = suite.replay_command(record).replace('"$(mktemp -d)"', str(tmp_path))
        words = shlex.split(line)
        assert words[0] in ("harness", ".venv/bin/harness") and words[1] == name, line
        args = parser.parse_args(words[1:])
        assert args.command == name and args.func is not None


@pytest.mark.parametrize("name", sorted(SUITES))
def test_a_page_names_every_label(name):
    suite = SUITES[name]
    page = suite.page_text(committed(suite), RESULTS)
    header = next(line for line in page.splitlines() if line.startswith("| ") and "agree" in line)
    assert all(f" {label} |" in header for label in suite.label_names), header
    assert page == suite.page_text(committed(suite), RESULTS)       # the same records, the same bytes


PACKAGE = Path(__file__).resolve().parents[2] / "harness"


@pytest.mark.parametrize("name", sorted(SUITES))
def test_a_record_is_made_in_one_place_and_a_page_only_in_reports(name):
    import ast
    import importlib

    kind = SUITES[name].record.__name__
    makers = set()
    for path in PACKAGE.rglob("*.py"):
        if "records" in path.relative_to(PACKAGE).parts:
            continue                                  # the record's own from_json
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Attribute) and called.attr == "from_json":
                called = called.value                 # a record built from a dict is made too
            if isinstance(called, ast.Name) and called.id == kind:
                makers.add(path.relative_to(PACKAGE).as_posix())
    assert len(makers) == 1, makers
    module = importlib.import_module(WHERE[name].partition(":")[0])
    assert not [n for n in vars(module) if n.endswith(("_markdown", "_html"))]


@pytest.mark.parametrize("beside", ["symlink", "copy"])
@pytest.mark.parametrize("name", sorted(SUITES))
def test_a_copy_or_a_link_of_a_records_file_counts_nothing_twice(name, beside, tmp_path):
    """A committed records file with a copy or a link of it beside it (`x (1).jsonl`, which sorts first): the
    page counts each question once, and a warning names both files."""
    import shutil

    suite = SUITES[name]
    committed = min((RESULTS / suite.folder).glob("*.jsonl"), key=lambda p: p.stat().st_size)
    folder = tmp_path / suite.folder
    folder.mkdir()
    own, other = folder / committed.name, folder / f"{committed.stem} (1).jsonl"
    shutil.copyfile(committed, own)
    other.symlink_to(own.name) if beside == "symlink" else shutil.copyfile(own, other)
    alone, _ = suite.read_records(own)
    warnings = []
    read = suite.read_all(tmp_path, warnings)
    assert len(read) == len(alone) and suite.matrix(read) == suite.matrix(alone)
    assert any(str(own) in w and str(other) in w for w in warnings), warnings
