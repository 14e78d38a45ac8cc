"""docs/runtimes.md's label tables are what tools/labels_doc.py writes from the suites' own LABELS: the guide
says what the code labels and what the pages show, never something else."""

import importlib.util

import pytest

from harness.core import constants
from harness.suites import registered

spec = importlib.util.spec_from_file_location("labels_doc", constants.ROOT / "tools" / "labels_doc.py")
labels_doc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(labels_doc)


def test_the_label_tables_are_what_the_tool_writes():
    assert labels_doc.main(["--check"]) == 0, "run: python tools/labels_doc.py"


def test_every_suite_with_labels_in_the_guide_has_one_table_each():
    text = (constants.ROOT / "docs" / "runtimes.md").read_text(encoding="utf-8")
    found = [m.group("suite") for m in labels_doc.TABLE.finditer(text)]
    assert found == ["runtime-check", "runtime-conformance"]


def test_a_table_is_rewritten_from_the_labels_and_a_detailed_label_is_shown_in_its_form():
    suites = registered()
    text = "before\n<!-- labels:runtime-conformance -->\n| stale | row |\n<!-- /labels -->\nafter\n"
    new = labels_doc.rewrite(text, suites, "doc")
    assert new.startswith("before\n<!-- labels:runtime-conformance -->\n| label | meaning |\n|---|---|\n")
    assert "| `runtime-forgave:<deviation>` | the strict parser rejects" in new and "stale" not in new
    assert new.endswith("<!-- /labels -->\nafter\n")
    assert new.count("\n| `") == len(suites["runtime-conformance"].labels)
    with pytest.raises(SystemExit, match="names no registered suite"):
        labels_doc.rewrite("<!-- labels:nope -->\n<!-- /labels -->", suites, "doc")
