"""Every relative link in the README, docs/ and the how-tos beside the code (harness/**/README.md) leads
somewhere: the file exists, and an anchor names one of the target's headings (as GitHub makes them)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchors(path: Path) -> set:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    found = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def broken(path: Path) -> list:
    out = []
    for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue                # a URL
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if not where.exists():
            out.append(f"{path.relative_to(ROOT)}: {target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            out.append(f"{path.relative_to(ROOT)}: {target}: no such heading")
    return out


# The how-tos a newcomer reads beside the code they extend: one per plug-in kind.
HOW_TOS = ["harness/suites/README.md", "harness/backends/README.md", "harness/backends/runtimes/README.md",
           "harness/families/README.md"]


def test_every_link_in_the_readme_and_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "harness").rglob("README.md"))]
    assert [line for page in pages for line in broken(page)] == []


def test_each_plug_in_kind_has_its_how_to_beside_the_code_with_a_skeleton_and_its_test_steps():
    for relative in HOW_TOS:
        text = (ROOT / relative).read_text(encoding="utf-8")
        assert "```" in text, f"{relative}: no skeleton"
        assert "pytest" in text or "tests/" in text, f"{relative}: no test steps"


def test_a_broken_link_is_found(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("# A title\n[ok](#a-title) [gone](missing.md) [bad](#nothing)\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert broken(page) == ["page.md: missing.md: no such file", "page.md: #nothing: no such heading"]
