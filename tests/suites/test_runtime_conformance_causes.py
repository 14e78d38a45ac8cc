"""Root causes of runtime-conformance disagreements (harness.suites.runtime_conformance.causes): one cause per record, by
its most telling label, qualified where one label covers different behaviours; one line per cause."""

from harness.suites.runtime_conformance.records import RuntimeConformanceRecord
from harness.suites.runtime_conformance.causes import cause_key, cause_line, error_signature, root_causes
from harness.suites.runtime_conformance.judging import replay_command


def rec(labels, details=(), variant="auto", family="hermes", template="T", runtime="rt", case="one-call"):
    return RuntimeConformanceRecord.from_json({
        "runtime": runtime, "server": "llama-server", "template": {"id": template, "sha256": "s"},
        "family": family, "case": {"name": case, "hash": "h"}, "variant": variant, "reply": "r",
        "labels": list(labels), "details": list(details)})


def test_an_error_is_known_by_its_message_without_what_varies_per_request():
    peg = ('non-streamed: /v1/chat/completions: HTTP 500: {"error":{"code":500,"message":"The model produced '
           'output that does not match the expected peg-native format at 41"}}')
    assert error_signature(peg) == ("non-streamed: HTTP 500 The model produced output that does not match the "
                                    "expected peg-native format")       # twelve words name it
    multi = 'prompt: /apply-template: HTTP 500: {"error":{"message":"\\n----\\nWhile executing \'x\' at line 94"}}'
    assert error_signature(multi) == "prompt: HTTP 500 While executing … at line N"
    assert error_signature("streamed: the server died (signal SIGSEGV)") == \
        "streamed: the server died (signal SIGSEGV)"
    refused = ("prompt: mistralrs exited with exit code 3 before it was ready (model T-gpt2-0-1a2b.gguf); last lines "
               "of T-gpt2-0-1a2b-mistralrs.log:\nloading\nmistralrs refused the model: ValueError: Unknown "
               "normal-model GGUF architecture `gpt2`")
    assert error_signature(refused) == error_signature(refused.replace("T-gpt2-0-1a2b", "U-qwen2.5-0-9f")) == \
        "prompt: did not start: mistralrs refused the model: ValueError: Unknown normal-model GGUF architecture"


def test_the_most_telling_label_is_the_cause():
    assert cause_key(rec(["agree"])) is None
    assert cause_key(rec(["prompts-differ", "call-left-in-content"])) == ("call-left-in-content", None)
    assert cause_key(rec(["reply-rewritten", "runtime-forgave:unclosed-call"])) == ("runtime-forgave",
                                                                                    "unclosed-call")
    assert cause_key(rec(["reply-rewritten", "calls-differ"], variant="no-parallel")) == \
        ("calls-differ", "parallel_tool_calls false")
    assert cause_key(rec(["runtime-error", "prompts-differ"], ["prompt: HTTP 400: nope"])) == \
        ("runtime-error", "prompt: HTTP 400 nope")


def test_causes_group_requests_per_runtime_most_first_with_one_replay_each():
    records = [rec(["call-left-in-content"], family=f, template=t) for f, t in
               (("hermes", "A"), ("hermes", "B"), ("glm", "C"))]
    records += [rec(["prompts-differ"], template="A"), rec(["agree"]), rec(["prompts-differ"], runtime="other")]
    causes = root_causes(records)
    assert [(c.runtime, c.label, len(c.records)) for c in causes] == [
        ("other", "prompts-differ", 1), ("rt", "call-left-in-content", 3), ("rt", "prompts-differ", 1)]
    line = cause_line(causes[1], replay_command)
    assert line == ("rt returns the call's text as content, no tool_calls: 3 request(s), 3 template(s), families "
                    "glm, hermes; replay: `.venv/bin/harness runtime-conformance --server llama-server --template C "
                    "--case one-call --variant auto --results-dir \"$(mktemp -d)\"`")
