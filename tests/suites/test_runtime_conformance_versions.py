"""A runtime beside its newer build (harness.suites.runtime_conformance.versions): each root cause of the older one fixed,
still there or new in the newer one, and how many of the same requests got the same labels; the
runtime-conformance page's section is computed from the two runtimes' records, and the committed page holds it."""

from harness.backends import runtimes
from harness.core import constants
from harness.suites.runtime_conformance.records import RuntimeConformanceRecord
from harness.suites.runtime_conformance import read_records
from harness.suites.runtime_conformance.judging import replay_command
from harness.suites.runtime_conformance.versions import FIXED, NEW, STILL, compare, comparison_lines
from harness.suites.runtime_conformance.page import conformance_markdown, version_sections

OLD, NEWER = "llama-server-0.3.36-vendored", "llama-server-next-0.6.0-dev-b11434"


def rec(runtime, labels, case="one-call", variant="auto", template="T", details=()):
    return RuntimeConformanceRecord.from_json({
        "runtime": runtime, "server": "llama-server" if runtime == OLD else "llama-server-next",
        "template": {"id": template, "sha256": f"sha-{template}"}, "family": "hermes",
        "case": {"name": case, "hash": "h"}, "variant": variant, "reply": "r", "labels": list(labels),
        "details": list(details)})


def records():
    return [
        # still there: the same cause on both, on the same request
        rec(OLD, ["call-left-in-content"], case="a"), rec(NEWER, ["call-left-in-content"], case="a"),
        # fixed: the older one dropped a call, the newer one agrees
        rec(OLD, ["runtime-dropped-call"], case="b"), rec(NEWER, ["agree"], case="b"),
        # new: the newer one forgives what the older one refused
        rec(OLD, ["agree"], case="c"), rec(NEWER, ["runtime-forgave:unclosed-call"], case="c"),
        rec(OLD, ["agree"], case="d"), rec(NEWER, ["agree"], case="d"),
        # asked of one only (a template pinned after the older one's run): counted apart, its cause not "new"
        rec(OLD, ["agree"], case="e"),
        rec(NEWER, ["runtime-error"], case="f", template="U", details=["non-streamed: HTTP 500: x"]),
    ]


def test_each_cause_is_fixed_still_there_or_new_and_the_same_requests_are_counted():
    c = compare(records(), OLD, NEWER)
    assert [(x.label, x.status, len(x.older), len(x.newer)) for x in c.changes] == [
        ("runtime-dropped-call", FIXED, 1, 0), ("call-left-in-content", STILL, 1, 1),
        ("runtime-forgave", NEW, 0, 1)]
    assert (c.count(FIXED), c.count(STILL), c.count(NEW)) == (1, 1, 1)
    assert (c.shared, c.same_labels) == (4, 2)
    assert sorted(a.case["name"] for a, _ in c.differing) == ["b", "c"]
    assert [r.case["name"] for r in c.only_older] == ["e"] and [r.case["name"] for r in c.only_newer] == ["f"]
    assert compare(records(), OLD, "no-such-runtime") is None


def test_the_page_section_says_the_figures_from_the_records():
    lines = comparison_lines(compare(records(), OLD, NEWER), "0.5.0", "0.6.0-dev", replay_command)
    text = "\n".join(lines)
    assert lines[0] == f"## {OLD} (llama.cpp 0.5.0) beside {NEWER} (llama.cpp 0.6.0-dev)"
    assert "over the 4 requests both were asked" in text and "**1 fixed, 1 still there, 1 new**" in text
    assert "**2/4 requests got the same labels**" in text
    assert f"Asked of {NEWER} only (1 requests, not compared: U): 0 agree" in text
    assert "| drops a call: no tool_calls and not the call's text | 1 | 0 | fixed |" in text
    page = conformance_markdown(records(), [])
    assert text in page
    # Computed from records: without the newer runtime's there is no section.
    assert "beside" not in conformance_markdown([r for r in records() if r.runtime == OLD], [])


def test_the_committed_page_holds_the_section_its_records_give():
    folder = constants.ROOT / "results" / "runtime-conformance"
    newer = runtimes.get("llama-server-next")
    older = runtimes.get(newer.newer_than)
    committed = [r for name in (older.record_name, newer.record_name)
                 for r in read_records(folder / f"{name}.jsonl")[0]]
    section = version_sections(committed)
    assert section, "no records of both llama-server builds are committed"
    page = (constants.ROOT / "results" / "runtime-conformance.md").read_text(encoding="utf-8")
    assert "\n".join(section[1:]) in page
    assert newer.version == "0.6.0-dev" and older.version == "0.5.0"
