"""Parser-agreement labels on peer answers: where a peer parser agrees with the strict reading, forgives, loses
data, or streams something else than it reads whole."""

import pytest

from harness import families
from harness.suites.parser_agreement import SUITE
from harness.suites.parser_agreement.judging import classify, current, fed_text, matrix
from harness.suites.parser_agreement.page import markdown as agreement_markdown
from harness.suites.parser_agreement.records import ParserAgreementRecord
from harness.storage.transcript_writer import encode_line
from harness.suites.runtime_conformance.corpus import TOOLS
from harness.formats.reasoning import DEFAULT_PAIRS

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'
GOOD = {"content": "", "calls": [{"name": "get_weather", "arguments": '{"location": "Paris", "days": 3}'}]}


def expect(reply):
    return families.parse("hermes", reply, "<|im_start|>assistant\n").to_json()


def answers(one, streams=None, n=3):
    streams = streams if streams is not None else [one] * (n + 2)
    return {"tokens": 9, "one_shot": one, "whole": streams[0], "by_token": streams[1], "random": streams[2:],
            "random_sizes": [[1, 4, 4]] * (len(streams) - 2)}


@pytest.mark.parametrize("reply, one, labels", [
    (CALL, GOOD, ["agree"]),
    (CALL, {"content": "", "calls": [{"name": "get_weather", "arguments": '{"location": "Paris", "days": "3"}'}]},
     ["arguments-changed"]),
    (CALL, {"content": "", "calls": []}, ["dropped-call"]),
    (CALL, {"content": CALL, "calls": []}, ["call-left-in-content"]),
    ('{"name": "get_weather", "arguments": {}}', {"content": "", "calls": [{"name": "get_weather",
                                                                             "arguments": "{}"}]},
     ["forgave:bare-json"]),
    (CALL + CALL.replace("get_weather", "get_time"), GOOD, ["calls-differ"]),
    ("Plain {text}.", {"content": "Plain", "calls": []}, ["content-differs"]),
])
def test_one_shot_labels_follow_runtime_conformance(reply, one, labels):
    assert classify(expect(reply), answers(one), TOOLS, "<tool_call>")[0] == labels


def test_streams_that_differ_from_the_one_shot_are_counted():
    lost = {"content": "", "calls": []}
    labels, details = classify(expect(CALL), answers(GOOD, [GOOD, lost, GOOD, lost, GOOD]), TOOLS, "<tool_call>")
    assert labels == ["stream-differs 2/5"]
    assert details[0].startswith("token by token:")
    # The stream is held to the peer's own one-shot answer: the same loss streamed and not differs in no stream.
    labels, _ = classify(expect(CALL), answers(lost), TOOLS, "<tool_call>")
    assert labels == ["dropped-call"]


def test_a_parser_that_raises_is_crashed_and_says_where():
    boom = {"error": "IndexError: list index out of range"}
    labels, details = classify(expect(CALL), answers(boom, [GOOD] * 5), TOOLS, "<tool_call>")
    assert labels == ["crashed"] and details == ["one-shot: IndexError: list index out of range"]
    labels, details = classify(expect(CALL), answers(GOOD, [GOOD, boom, GOOD, GOOD, GOOD]), TOOLS, "<tool_call>")
    assert labels == ["crashed"] and details[0].startswith("1/5 streams raised; token by token: IndexError")
    assert classify(expect(CALL), {"error": "KeyError: 'nope'"}, TOOLS, None)[0] == ["crashed"]


def test_reasoning_is_cut_before_the_tool_parser_as_a_server_does():
    reply = "<think>\nweather, so get_weather\n</think>\n\n" + CALL
    parsed = families.parse("hermes", reply, "<|im_start|>assistant\n").to_json()
    assert fed_text(reply, parsed, DEFAULT_PAIRS) == "\n\n" + CALL
    assert fed_text(CALL, expect(CALL), DEFAULT_PAIRS) == CALL
    # A prompt that opened the block, closed at once: empty reasoning is still a block the server strips.
    assert fed_text("</think>Sunny.", {"reasoning": "", "content": "Sunny."}, DEFAULT_PAIRS) == "Sunny."
    # The strict parse reads an empty block as no reasoning: a reply opening with the bare close tag (MiniMax-M3's
    # "no reasoning" prefix, StepFun's prompt-opened block closed at once) is fed from after it all the same.
    m3 = "</mm:think>Sunny, then cloudy, then rain."
    parsed = families.parse("minimax-m3", m3, "]~b]ai\n").to_json()
    assert parsed["reasoning"] is None and parsed["content"] == "Sunny, then cloudy, then rain."
    assert fed_text(m3, parsed, (("<mm:think>", "</mm:think>"),)) == "Sunny, then cloudy, then rain."
    stepfun = "\n</think>\nSunny."
    parsed = families.parse("qwen-xml", stepfun, "<|im_start|>assistant\n<think>\n").to_json()
    assert parsed["reasoning"] is None and fed_text(stepfun, parsed, DEFAULT_PAIRS) == "\nSunny."
    # A close tag later in a reply that read no reasoning is the model's text, not cut.
    assert fed_text("Use </think> to close.", expect("Use </think> to close."), DEFAULT_PAIRS) == "Use </think> to close."


def record(project, labels, parser="hermes", case="one call", source="canonical"):
    return ParserAgreementRecord(project=project, version={"vllm": "0.33.0", "sglang": "0.5.23"}[project],
                                 parser=parser, family="hermes", source=source, case=case, reply=CALL,
                                 labels=labels, details=["why"], streams=22, splits=20, seed=0)


def test_the_markdown_has_the_matrix_and_a_replay_per_disagreement():
    records = [record("vllm", ["agree"]), record("sglang", ["forgave:bare-json", "stream-differs 3/22"])]
    rows = {r["project"]: r for r in matrix(records)}
    assert rows["sglang"]["forgave"] == 1 and rows["sglang"]["streams_differ"] == 3
    assert rows["sglang"]["forgiven"] == {"bare-json": 1} and rows["vllm"]["agree"] == 1
    text = agreement_markdown(records, [("apriel", "no parser")])
    assert "Peers: sglang 0.5.23, vllm 0.33.0." in text and "20 seeded random splits of 1-4 tokens, seed 0" in text
    assert "| hermes | sglang | `hermes` | 1 | 0 | 1 |" in text and "| 3/22 |" in text
    assert ("replay: `harness parser-agreement --project sglang --family hermes --source canonical "
            "--case \"one call\" --json`") in text
    assert "- apriel: no parser" in text and text.count("replay:") == 1


def test_a_later_record_of_a_case_supersedes_the_earlier_and_each_parser_is_counted():
    # A rerun after a template got its own parser (peers.templates) appends a record of the same case.
    old = record("sglang", ["dropped-call"], parser="glm45", case="one-call", source="GLM-4.7-Flash")
    new = record("sglang", ["agree"], parser="glm47", case="one-call", source="GLM-4.7-Flash")
    other = record("sglang", ["agree"])
    assert current([old, other, new]) == [new, other]
    text = agreement_markdown([old, other, new], [])
    assert "| hermes | sglang | `glm47` ×1, `hermes` ×1 | 2 | 2 |" in text and "glm45" not in text


def test_a_record_survives_its_line_and_a_damaged_one_is_skipped_with_its_reason(tmp_path):
    path = tmp_path / "vllm.jsonl"
    kept = record("vllm", ["forgave:bare-json"])
    kept.expect, kept.one_shot, kept.tokens = expect(CALL), {"content": "", "calls": []}, 24
    broken = {**kept.to_json(), "streams": "22"}
    path.write_bytes(encode_line(kept.to_json()) + encode_line(broken))
    records, warnings = SUITE.read_records(path)
    assert records == [kept] and records[0].done_key() == kept.done_key()
    assert len(warnings) == 1 and "field 'streams' is str" in warnings[0]


def test_a_second_run_on_the_records_is_refused_before_it_reads_or_asks_anything(tmp_path):
    """parser-agreement takes its files' locks before it reads what is done, as harness run does: a run that finds
    them held stops at once, naming the holder, instead of asking the same cases beside the other run."""
    import pytest

    from harness.storage.results import ResultsDir
    from harness.core.errors import TranscriptBusyError
    from harness.storage.transcript_writer import TranscriptWriter
    from harness.suites.parser_agreement.driver import run_suite

    results = ResultsDir(tmp_path)
    with TranscriptWriter(results.parser_agreement_records("vllm")):
        with pytest.raises(TranscriptBusyError, match="is being written by"):
            run_suite(None, [object()], ["vllm"], {"vllm": "0.33.0"}, results, 2, 0)
