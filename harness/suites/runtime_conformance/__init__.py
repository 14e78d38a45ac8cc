"""The runtime-conformance suite (harness/suites/runtime_conformance/README.md): scripted models (real GGUFs that
write exact replies) write every case of each template's corpus through a runtime's /v1/chat/completions,
non-streamed and streamed, and each request is labelled by what the runtime did with a reply whose strict parse is
known. This module only declares it: its driver, page and command load when they are used."""

from __future__ import annotations

from harness.storage.results import file_stem
from harness.suites import FolderSuite
from harness.suites.runtime_conformance.judging import LABELS, matrix, replay_command
from harness.suites.runtime_conformance.records import RUNTIME_CONFORMANCE, RuntimeConformanceRecord

PAGE = "runtime-conformance.md"


def _page_text(records: list, results_root) -> str:
    from harness.suites.runtime_conformance.page import markdown

    return markdown(records, results_root)


def _write_pages(pages) -> list:
    from harness.suites.runtime_conformance.page import write_pages

    return write_pages(pages, SUITE.read_all(pages.results.root, pages.warnings), PAGE)


SUITE = FolderSuite(name=RUNTIME_CONFORMANCE, folder="runtime-conformance", page=PAGE,
                    command="harness.suites.runtime_conformance.command", labels=LABELS,
                    record=RuntimeConformanceRecord, write_pages=_write_pages, matrix=matrix, page_text=_page_text,
                    replay_command=replay_command, identity=lambda r: (r.runtime, *r.done_key()),
                    home=lambda r: f"{file_stem(r.runtime)}.jsonl")
# A records file of the suite, read as every reader reads it: (records, warnings).
read_records = SUITE.read_records
