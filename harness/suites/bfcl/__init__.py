"""The BFCL suite (harness/suites/bfcl/README.md): BFCL v4's single-turn cases from the pinned wheel, run as
scenarios through the model's own template and the strict parser (`harness run --suite bfcl`), judged at report
time by BFCL's own checker and by our checks. This module only declares it: its cases, page and run load when
they are used.

Its records are the scenario runner's (sample records, with the model record that opens each file, in
DIR/bfcl/<model>.jsonl), not a kind of its own, and it has no command of its own: `harness run` carries its
flags (harness.suites.bfcl.command). A sample is one question, counted once by its key wherever a copy of its
file lies, and given way to in the file `harness run` writes it to."""

from __future__ import annotations

from harness.storage.counted_once import sample_home
from harness.storage.records import ModelRecord, SampleRecord
from harness.suites import FolderSuite
from harness.suites.bfcl.judging import LABELS

PAGE = "bfcl.md"


def _write_pages(pages) -> list:
    from harness.suites.bfcl.page import write_pages     # the checker's worker starts only when a report is made

    return write_pages(pages)


SUITE = FolderSuite(name="bfcl", folder="bfcl", page=PAGE, command=None, labels=LABELS, record=SampleRecord,
                    write_pages=_write_pages, identity=SampleRecord.key, home=sample_home, beside=(ModelRecord,))
