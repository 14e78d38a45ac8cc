"""The peers worker's JSON-lines protocol (run here by this environment's python, where vLLM and SGLang are
absent), and, where the peers environment is built, vLLM's and SGLang's parsers through it."""

import json
import random
import subprocess
import sys

import pytest

from harness.backends.peers import WORKER, Peers, peers_python
from harness.backends.peers.worker import random_sizes
from harness.live.parser_agreement import Case, run_case
from harness.evaluation.runtime_corpus import TOOLS
from harness import families


def test_random_splits_cover_the_reply_in_chunks_of_one_to_four_tokens():
    for n in (0, 1, 7, 50):
        sizes = random_sizes(n, random.Random(3))
        assert sum(sizes) == n and all(1 <= s <= 4 for s in sizes)
    assert random_sizes(40, random.Random(5)) == random_sizes(40, random.Random(5))


def test_the_worker_answers_each_line_in_order_and_survives_a_bad_one():
    lines = ['{"op": "hello", "id": 1}', "not json", '{"op": "nope", "id": 3}', '{"op": "hello", "id": 4}']
    done = subprocess.run([sys.executable, str(WORKER)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, None, 3, 4]
    assert answers[1]["error"].startswith("JSONDecodeError") and "unknown op 'nope'" in answers[2]["error"]
    # Without the projects installed, hello names what does not import and why, instead of failing.
    for project in ("vllm", "sglang"):
        assert answers[0]["projects"][project] == answers[3]["projects"][project]
        assert "ModuleNotFoundError" in answers[0]["projects"][project]["error"]


def test_a_parse_request_that_cannot_run_is_answered_with_its_error():
    with Peers(sys.executable) as peers:
        answer = peers.ask({"op": "parse", "project": "vllm", "parser": "hermes", "tokenizer": "/nonexistent.gguf",
                            "reply": "hi", "tools": []})
        assert answer["error"] and answer["id"] == 1
        assert "projects" in peers.hello()


@pytest.fixture(scope="module")
def peers():
    python = peers_python()
    if python is None:
        pytest.skip("the peers environment (vLLM, SGLang) is not built: bash scripts/setup_peers.sh")
    with Peers(python) as running:
        yield running


CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}\n</tool_call>'


def hermes_case(reply):
    return Case("hermes", "canonical", "test", reply, families.parse("hermes", reply).to_json(), TOOLS, "qwen2.5",
                ("<tool_call>", "</tool_call>"))


@pytest.mark.needs_peers
def test_vllm_reads_a_hermes_call_as_the_strict_parser_does_streamed_or_not(peers):
    record = run_case(peers, hermes_case(CALL), "vllm", "hermes", 20, 0)
    assert record["labels"] == ["agree"], record["details"]
    assert record["streams"] == 22 and record["tokens"] > 10


@pytest.mark.needs_peers
def test_sglang_hermes_streams_lose_arguments_and_the_second_parallel_call(peers):
    # Found here: SGLang 0.5.23's hermes detector reads both calls one-shot, but a stream that brings a whole call
    # in one chunk ends with its name and no arguments, and random 1-4 token splits mostly lose the second call.
    one = run_case(peers, hermes_case(CALL), "sglang", "hermes", 20, 0)
    assert one["labels"] == ["stream-differs 1/22"] and one["details"][0].startswith("whole:")
    two = run_case(peers, hermes_case(CALL + "\n" + CALL.replace("get_weather", "get_time")), "sglang", "hermes", 20, 0)
    assert two["labels"][0].startswith("stream-differs ") and len(two["one_shot"]["calls"]) == 2
    assert int(two["labels"][0].split()[1].split("/")[0]) > 11


@pytest.mark.needs_peers
def test_the_peers_environment_imports_both_projects(peers):
    projects = peers.hello()["projects"]
    assert projects["vllm"] == {"version": "0.33.0"} and projects["sglang"] == {"version": "0.5.23"}
