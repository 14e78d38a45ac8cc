"""The parser-agreement suite (harness/suites/parser_agreement/README.md): other projects' own tool parsers (vLLM,
SGLang, transformers' response templates), in process in the peers environment, on the strict parser's corpus,
one-shot and streamed, each case labelled against the strict parse; and SGLang's template detection beside ours.
This module only declares it: its driver, page and command load when they are used."""

from __future__ import annotations

from harness.storage.results import file_stem
from harness.suites import FolderSuite
from harness.suites.parser_agreement.judging import LABELS, matrix, replay_command
from harness.suites.parser_agreement.records import PARSER_AGREEMENT, ParserAgreementRecord

PAGE = "parser-agreement.md"


def _page_text(records: list, results_root) -> str:
    from harness.suites.parser_agreement.judging import unmapped
    from harness.suites.parser_agreement.page import markdown

    return markdown(records, unmapped(), results_root)


def _write_pages(pages) -> list:
    from harness.suites.parser_agreement.page import write_pages

    return write_pages(pages, SUITE.read_all(pages.results.root, pages.warnings), PAGE)


SUITE = FolderSuite(name=PARSER_AGREEMENT, folder="parser-agreement", page=PAGE,
                    command="harness.suites.parser_agreement.command", labels=LABELS, record=ParserAgreementRecord,
                    write_pages=_write_pages, matrix=matrix, page_text=_page_text, replay_command=replay_command,
                    identity=ParserAgreementRecord.done_key, home=lambda r: f"{file_stem(r.project)}.jsonl")
