#!/usr/bin/env python
"""Maintainer tool: write the figures of README.md's "What it found" from results/, by the code the reports use
(harness.suites.readme_figures), so the README cannot contradict the pages it links.

    python tools/readme_figures.py          # rewrite the figures between README's <!-- fig KEY --> markers
    python tools/readme_figures.py --check  # exit 1 when a figure differs from results/ or a number is unmarked

Run it after `harness report` or `harness conformance` changes results/; tests/reports/test_readme_figures.py
fails until it has run. It rewrites only the marked values: the prose around them is the README's own, and a
finding whose claim the data no longer supports stops the tool with the finding's number.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.suites.readme_figures import figures, fill, problems  # noqa: E402

README = ROOT / "README.md"


def main(argv: list) -> int:
    text = README.read_text(encoding="utf-8")
    values = figures(ROOT / "results")
    if "--check" in argv:
        found = problems(text, values)
        for problem in found:
            print(f"README.md: {problem}")
        if found:
            print("out of date: run python tools/readme_figures.py")
        return 1 if found else 0
    new = fill(text, values)
    if new != text:
        README.write_text(new, encoding="utf-8")
    left = problems(new, values)
    for problem in left:
        print(f"README.md: {problem}")
    print(f"README.md: {len(values)} figures{' rewritten' if new != text else ', all as results/ gives them'}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
