#!/usr/bin/env python
"""Maintainer tool: write the label tables of docs/runtimes.md from the suites' own LABELS (the meanings the
pages show), so the guide cannot say something else than the code labels. Each table stands between
`<!-- labels:SUITE -->` and `<!-- /labels -->`; a label that carries a detail is shown in that form
(`runtime-forgave:<deviation>`), as its meaning opens with it.

    python tools/labels_doc.py          # rewrite the tables
    python tools/labels_doc.py --check  # exit 1 when one is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.suites import registered  # noqa: E402

DOCS = [ROOT / "docs" / "runtimes.md"]
TABLE = re.compile(r"(<!-- labels:(?P<suite>[\w-]+) -->\n)(?P<body>.*?)(<!-- /labels -->)", re.S)
# A meaning that opens with the label's detailed form: "(`runtime-forgave:<deviation>`) the strict parser …".
DETAILED = re.compile(r"^\((`[^`]+`)\) ")


def table(suite) -> str:
    rows = ["| label | meaning |", "|---|---|"]
    for label, meaning in suite.labels.items():
        shown, found = f"`{label}`", DETAILED.match(meaning)
        if found:
            shown, meaning = found.group(1), meaning[found.end():]
        escaped = meaning.replace("|", "\\|")
        rows.append(f"| {shown} | {escaped} |")
    return "\n".join(rows) + "\n"


def rewrite(text: str, suites: dict, where: str) -> str:
    def one(match):
        name = match.group("suite")
        if name not in suites:
            raise SystemExit(f"{where}: <!-- labels:{name} --> names no registered suite ({', '.join(suites)})")
        return match.group(1) + table(suites[name]) + match.group(4)
    return TABLE.sub(one, text)


def main(argv=None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="exit 1 when a table is out of date")
    check = args.parse_args(argv).check
    suites, stale = registered(), []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        new = rewrite(text, suites, doc.name)
        if new != text:
            stale.append(doc)
            if not check:
                doc.write_text(new, encoding="utf-8")
    for doc in stale:
        print(f"{doc.relative_to(ROOT)}: {'out of date' if check else 'rewritten'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
