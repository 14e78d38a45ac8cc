#!/usr/bin/env python
"""Maintainer tool: write docs/strictness.md from the committed runtime-conformance records, the vocabulary of
SGLang's named tolerances (harness/suites/parser_agreement/peer_vocabulary.py) and the committed template-detection records.

    python tools/strictness_ledger.py          # rewrite docs/strictness.md
    python tools/strictness_ledger.py --check  # exit 1 when it is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.storage.results import ResultsDir  # noqa: E402
from harness.suites.runtime_conformance import read_records  # noqa: E402
from harness.suites.strictness_ledger import ledger_markdown  # noqa: E402
from harness.suites.parser_agreement.template_detection import PROJECT, compare  # noqa: E402

LEDGER = ROOT / "docs" / "strictness.md"


def generated(results: ResultsDir) -> str:
    records = []
    for path in results.runtime_conformance_files():
        found, warnings = read_records(path)
        if warnings:
            raise SystemExit(f"{path}: {'; '.join(map(str, warnings))}")
        records += found
    # SGLang's template detection beside ours, from the committed records and conformance.json.
    return ledger_markdown(records, compare(results.root, results.template_detection_records(PROJECT)))


def main(argv: list) -> int:
    text = generated(ResultsDir.at(ROOT / "results"))
    if "--check" in argv:
        same = LEDGER.is_file() and LEDGER.read_text(encoding="utf-8") == text
        print(f"{LEDGER}: {'up to date' if same else 'out of date; run python tools/strictness_ledger.py'}")
        return 0 if same else 1
    LEDGER.write_text(text, encoding="utf-8")
    print(f"wrote {LEDGER}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
