"""What every runtime suite is, and the table of them.

A suite asks something other than our strict parser to read replies whose strict parse is known, and labels
each answer. It is one module of harness/evaluation declaring `SUITE`, a Suite that holds:

- `name`: the command that runs it and the `kind` its records carry;
- `labels`: every label it can give, with what it means (the order is the matrix's columns);
- `classify(...)`: the labels of one answer, named only from `labels` (a label may carry a detail after `:` or
  a space: `runtime-forgave:bare-json`, `stream-differs 3/22`);
- `record`: its record type (harness.evaluation.records), one constructor, appended to
  DIR/<folder>/<NAME>.jsonl and read back by `read_records` (a killed run resumes past what is recorded);
- `matrix(records)`: rows counting the labels;
- `replay_command(record)`: one line that asks that record's question again;
- `identity(record)` and `home(record)`: what makes two records one question, and the file the suite writes it
  to, so that a question a copy of a file holds too is counted once;
- `page`: the results file its page is written to (harness.reports.suite_pages writes it; report.html shows
  its matrix).

The drivers that ask the questions live in harness/live, the pages in harness/reports. A suite of this shape is
one module here and one line in SUITES; a new suite is better one folder of harness/suites (its cases, driver,
records, page and command together, listed in harness.suites.SUITES), as the deployment suite is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.core.errors import HarnessError
from harness.core.registry import Registry
from harness.evaluation.counted_once import CountedOnce, distinct_files
from harness.evaluation.judging import label_head
from harness.evaluation.transcripts import read_transcript

# One line per suite: its name (the command, and the kind its records carry) and the SUITE its module declares.
# Order is the order of the report's sections.
SUITES = Registry("suite", {
    "runtime-conformance": "harness.evaluation.runtime_conformance:SUITE",
})


@dataclass(frozen=True)
class Suite:
    name: str                   # the command, and the kind its records carry
    labels: dict                # label -> what it means (the order is the matrix's columns)
    record: type                # the record dataclass (its KIND is `name`)
    folder: str                 # DIR/<folder>/<NAME>.jsonl hold the records
    page: str                   # DIR/<page>
    classify: Callable          # the labels of one answer (the suite's own arguments)
    matrix: Callable            # records -> rows counting the labels
    replay_command: Callable    # record -> one line that asks it again
    # record -> what makes two records one question: a key another file (a copy) holds too counts once
    identity: Callable | None = None
    # record -> the file name the suite writes it to (its runtime's or project's), where a copy gives way to it
    home: Callable | None = None

    @property
    def label_names(self) -> tuple:
        return tuple(self.labels)

    def label_head(self, label: str) -> str:
        """The label of `labels` a given label counts under (its detail cut)."""
        return label_head(label)

    def read_records(self, path) -> tuple:
        return read_records(path, self.record)

    def read_all(self, results_root, warnings: list) -> list:
        return read_folder(Path(results_root) / self.folder, self.record, self.identity, self.home, warnings)


def read_records(path, record) -> tuple:
    """(records, warnings) of one records file of `record`'s kind, read as transcripts are: a torn last line (a
    killed run) or a damaged record is named with its line and left out, never a crash."""
    found = read_transcript(path, kinds=(record,))
    return found.records, found.warnings


def read_folder(folder: Path, record, identity, home, warnings: list) -> list:
    """Every record of the *.jsonl files in a suite's folder, each file and each question once
    (harness.evaluation.counted_once: a copy or a link of a file beside it counts nothing twice, and is named;
    identity(record) is what makes two records one question, home(record) the file name a suite writes it to);
    what was skipped or left out goes to `warnings`."""
    once = CountedOnce()
    for path in distinct_files(sorted(Path(folder).glob("*.jsonl")), warnings):
        found, problems = read_records(path, record)
        warnings += problems
        once.add_file(path, [(identity(r) if identity else (path, n), home(r) if home else None, r)
                             for n, r in enumerate(found)])
    warnings += once.warnings()
    return once.values()


def registered() -> dict:
    """name -> Suite of every entry in SUITES, in that order."""
    suites = {}
    for name in SUITES:
        suite = SUITES.get(name)
        if suite.name != name:
            raise HarnessError(f"{SUITES[name]} calls itself {suite.name!r}, registered as {name!r}")
        suites[name] = suite
    return suites


def get(name: str) -> Suite:
    return registered()[SUITES.get(name).name]
