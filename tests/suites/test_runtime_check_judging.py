"""Runtime agreement labels: each pair of strict parse and runtime answer gets the one label that says how they
differ; the strict side is a real parse of a real reply text by the family's parser."""

import json

import pytest

from harness import families as registry
from harness.backends.openai import RuntimeReply, wire_messages
from harness.storage.records import ScenarioRef
from harness.suites.runtime_check.records import RuntimeCheckRecord
from harness.suites.runtime_check.judging import agreement_table, classify
from harness.suites.runtime_check.page import markdown as agreement_markdown

HERMES = registry.get("hermes")
CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "Priya", "limit": 10}}\n</tool_call>'
BARE = '{"name": "search", "arguments": {"query": "Priya", "limit": 10}}'


def runtime(*calls, prompt_tokens=100, content=None):
    return RuntimeReply(content=content, tool_calls=[{"name": n, "arguments": a} for n, a in calls],
                        reasoning=None, finish_reason="tool_calls" if calls else "stop", prompt_tokens=prompt_tokens)


SEARCH = ("search", '{"query": "Priya", "limit": 10}')


@pytest.mark.parametrize("reply, answer, label", [
    (CALL, runtime(SEARCH), "agree"),
    ("Hello there.", runtime(content="Hello there."), "agree"),
    (BARE, runtime(content=BARE), "agree"),                       # neither reads a call
    (CALL, runtime(SEARCH, prompt_tokens=90), "prompts-differ"),
    (BARE, runtime(SEARCH), "runtime-forgave:bare-json"),
    ("```json\n" + BARE + "\n```", runtime(SEARCH), "runtime-forgave:fenced-json"),
    (CALL, runtime(content=CALL), "runtime-dropped-call"),
    (CALL, runtime(("search", '{"query": "Priya", "limit": ')), "runtime-invalid-arguments"),
    (CALL, runtime(("search", "{}")), "runtime-invalid-arguments"),
    (CALL, runtime(("search", '{"query": "Sam", "limit": 10}')), "calls-differ"),
    ("Hello there.", runtime(content="Hi."), "replies-differ"),
])
def test_each_way_a_runtime_can_differ_has_its_label(reply, answer, label):
    strict = HERMES.parse(reply)
    assert classify(strict, 100, answer)[0] == label


def test_a_runtime_that_shows_a_different_prompt_is_not_compared():
    strict = HERMES.parse(CALL)
    assert classify(strict, 100, runtime(SEARCH), same_prompt=False)[0] == "prompts-differ"
    assert classify(strict, 100, runtime(SEARCH), same_prompt=True)[0] == "agree"


def test_the_table_counts_labels_and_names_what_was_forgiven():
    records = [RuntimeCheckRecord("r", "m", ScenarioRef("s", "h"), i, {"id": "t", "sha256": "x"}, label, "d")
               for i, label in enumerate(["agree", "runtime-forgave:bare-json", "runtime-forgave:bare-json",
                                          "runtime-dropped-call"])]
    (row,) = agreement_table(records)
    assert (row["pairs"], row["agree"], row["runtime-forgave"], row["runtime-dropped-call"]) == (4, 1, 2, 1)
    assert row["forgiven"] == {"bare-json": 2}
    assert "`bare-json` ×2" in agreement_markdown(records)


def test_calls_go_on_the_wire_with_arguments_as_json_text():
    messages = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "UTC"}}}]}]
    wired = wire_messages(messages)
    assert json.loads(wired[0]["tool_calls"][0]["function"]["arguments"]) == {"tz": "UTC"}
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == {"tz": "UTC"}     # the loop's copy untouched


def test_a_records_file_cut_by_a_kill_is_read_up_to_the_cut(tmp_path):
    from harness.suites.runtime_check import SUITE
    whole = json.dumps(RuntimeCheckRecord("r", "m", ScenarioRef("s", "h"), 0, {"id": "t", "sha256": "x"},
                                          "agree").to_json())
    path = tmp_path / "r.jsonl"
    # A kill in the middle of a record, even in the middle of a UTF-8 character.
    path.write_bytes((whole + "\n" + '{"kind": "runtime-check", "detail": "é').encode("utf-8")[:-1])
    records, warnings = SUITE.read_records(path)
    assert [r.label for r in records] == ["agree"] and "torn last line" in warnings[0]


def test_replies_that_differ_late_show_where_they_fork():
    same = "The locker is a classic example of a \"lock-and-cover\" item, "
    strict = HERMES.parse(same + "used in gyms to keep valuables safe.")
    label, detail = classify(strict, 100, runtime(content=same + "which means it is hidden."))
    assert label == "replies-differ"
    assert detail.startswith(f"they fork at character {len(same)} ")
    assert '"used in gyms to keep valuables safe."' in detail and '"which means it is hidden."' in detail
    assert 'after "… \\"lock-and-cover\\" item, "' in detail     # the shared text just before the fork
    assert "the runtime text is empty" in classify(HERMES.parse("Hi."), 100, runtime(content=""))[1]


def test_the_report_shows_the_fork_of_records_written_with_cropped_texts():
    texts = ("x" * 70 + " strict ending", "x" * 70 + " runtime ending")
    record = RuntimeCheckRecord("r", "m", ScenarioRef("s", "h"), 0, {"id": "t", "sha256": "x"}, "replies-differ",
                                'strict text "xxx…"; runtime text "xxx…"', strict={"parse": {"content": texts[0]}},
                                runtime_reply={"content": texts[1]})
    text = agreement_markdown([record])
    assert "they fork at character 71" in text and '"strict ending"' in text and '"runtime ending"' in text
