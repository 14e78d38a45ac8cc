"""The runtime-check suite (harness/suites/runtime_check/README.md): a served model asked each scenario's opening
conversation twice, the harness's strict way and the runtime's own, each pair labelled by whether the runtime
reads what the model wrote as the strict parser does. This module only declares it: its driver, page and
command load when they are used."""

from __future__ import annotations

from harness.storage.results import file_stem
from harness.suites import FolderSuite
from harness.suites.runtime_check.judging import LABELS, agreement_table, replay_command
from harness.suites.runtime_check.records import RUNTIME_CHECK, RuntimeCheckRecord

PAGE = "runtime-agreement.md"


def _page_text(records: list, results_root) -> str:
    from harness.suites.runtime_check.page import markdown

    return markdown(records)


def _write_pages(pages) -> list:
    from harness.suites.runtime_check.page import write_pages

    return write_pages(pages, SUITE.read_all(pages.results.root, pages.warnings), PAGE)


SUITE = FolderSuite(name=RUNTIME_CHECK, folder="runtimes", page=PAGE, command="harness.suites.runtime_check.command",
                    labels=LABELS, record=RuntimeCheckRecord, write_pages=_write_pages, matrix=agreement_table, page_text=_page_text,
                    replay_command=replay_command, identity=RuntimeCheckRecord.key,
                    home=lambda r: f"{file_stem(r.runtime)}.jsonl")
