"""The peers worker's JSON-lines protocol (run here by this environment's python, where vLLM and SGLang are
absent), and, where the peers environment is built, vLLM's and SGLang's parsers through it."""

import fnmatch
import json
import random
import subprocess
import sys

import pytest

from harness.peers import WORKER, Peers, peers_python
from harness.peers.worker import random_sizes
from harness.suites.parser_agreement.driver import Case, build_cases, parser_for, run_case
from harness.pins.sources import load_sources, resolve_template
from harness.suites.runtime_conformance.corpus import TOOLS, build_corpus
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
    record = run_case(peers, hermes_case(CALL), "vllm", "hermes", "0.33.0", 20, 0)
    assert record.labels == ["agree"], record.details
    assert record.streams == 22 and record.tokens > 10


@pytest.mark.needs_peers
def test_sglang_hermes_streams_lose_arguments_and_the_second_parallel_call(peers):
    # Found here: SGLang 0.5.23's hermes detector reads both calls one-shot, but a stream that brings a whole call
    # in one chunk ends with its name and no arguments, and random 1-4 token splits mostly lose the second call.
    one = run_case(peers, hermes_case(CALL), "sglang", "hermes", "0.5.23", 20, 0)
    assert one.labels == ["stream-differs 1/22"] and one.details[0].startswith("whole:")
    two = run_case(peers, hermes_case(CALL + "\n" + CALL.replace("get_weather", "get_time")), "sglang", "hermes",
                   "0.5.23", 20, 0)
    assert two.labels[0].startswith("stream-differs ") and len(two.one_shot["calls"]) == 2
    assert int(two.labels[0].split()[1].split("/")[0]) > 11


@pytest.mark.needs_peers
def test_the_peers_environment_imports_both_projects(peers):
    projects = peers.hello()["projects"]
    assert projects["vllm"] == {"version": "0.33.0"} and projects["sglang"] == {"version": "0.5.23"}


@pytest.mark.needs_peers
def test_transformers_reads_hermes_with_the_qwen2_response_template_and_raises_on_a_broken_call(peers):
    assert peers.hello()["projects"]["transformers"] == {"version": "5.19.0"}
    two = run_case(peers, hermes_case(CALL + "\n" + CALL.replace("Paris", "Rome")), "transformers", "qwen2", "5.19.0",
                   20, 0)
    assert two.labels == ["agree"], two.details
    assert [c["arguments"] for c in two.one_shot["calls"]] == ['{"location": "Paris", "days": 3}',
                                                               '{"location": "Rome", "days": 3}']
    # A call whose JSON is cut short is no reply transformers returns, in content or otherwise: it raises.
    broken = run_case(peers, hermes_case(CALL.replace("}}", "}")), "transformers", "qwen2", "5.19.0", 4, 0)
    assert broken.labels == ["crashed"] and "could not parse region as JSON" in broken.details[0]
    unknown = run_case(peers, hermes_case(CALL), "transformers", "llama", "5.19.0", 4, 0)
    assert unknown.labels == ["crashed"] and "no response template for model type 'llama'" in unknown.details[0]


def corpus_case(family, template, name):
    sources = load_sources()
    cases, _ = build_cases([resolve_template(template, sources)], {family})
    return next(c for c in cases if c.source == template and c.name == name)


@pytest.mark.needs_peers
def test_vllm_hy_v3_reads_hy3_with_the_token_suffix_of_the_models_tokenizer_config(peers):
    # Without peers.tokenizer_config the parser looks for <tool_calls> without ":opensource" and reads nothing.
    case = corpus_case("hy3", "tencent-Hy3", "one-call")
    assert run_case(peers, case, "vllm", "hy_v3", "0.33.0", 4, 0).one_shot["calls"]
    case.tokenizer_config = {}
    assert not run_case(peers, case, "vllm", "hy_v3", "0.33.0", 4, 0).one_shot.get("calls")


@pytest.mark.needs_peers
def test_sglang_reads_glm_4_7_with_its_own_detector_not_glm45(peers):
    case = corpus_case("glm", "GLM-4.7-Flash", "one-call")
    assert parser_for(case, "sglang") == "glm47"
    assert run_case(peers, case, "sglang", "glm47", "0.5.23", 4, 0).labels == ["agree"]
    assert run_case(peers, case, "sglang", "glm45", "0.5.23", 4, 0).labels == ["dropped-call"]


def test_every_per_template_peer_entry_names_a_pinned_template_of_its_family():
    # A typo in a template id would silently leave that template to the family-wide parser.
    sources = load_sources()
    by_family = {}
    for tid in sources.templates:
        by_family.setdefault(build_corpus(resolve_template(tid, sources)).family, []).append(tid)
    for name, family in families.families().items():
        for pattern in family.peers.get("templates") or {}:
            assert fnmatch.filter(by_family.get(name, []), pattern), (name, pattern)


def test_every_case_has_a_name_of_its_own_within_its_family_and_source():
    # Two near misses of one deviation once shared a name: the later record superseded the earlier in the report.
    sources = load_sources()
    cases, _ = build_cases([resolve_template(t, sources) for t in sources.templates])
    keys = [(c.family, c.source, c.name) for c in cases]
    assert len(keys) == len(set(keys))
    atem = [c.name for c in cases if c.family == "atem" and c.source == "near-miss"]
    assert "malformed-call" in atem and "malformed-call #2" in atem


@pytest.mark.needs_peers
def test_a_resumed_run_asks_again_a_case_our_parser_now_reads_otherwise(peers, tmp_path):
    from harness.storage.results import ResultsDir
    from harness.suites.parser_agreement.driver import run_suite

    results = ResultsDir.at(tmp_path)
    case = hermes_case(CALL)
    first, resumed = run_suite(peers, [case], ["vllm"], {"vllm": "0.33.0"}, results, 2, 0)
    assert resumed == 0 and first[0].labels == ["agree"]
    _, resumed = run_suite(peers, [case], ["vllm"], {"vllm": "0.33.0"}, results, 2, 0)
    assert resumed == 1
    # The same reply, now read as no call by our parser: the stored labels were judged against another reading.
    changed = hermes_case(CALL)
    changed.expect = {**changed.expect, "calls": []}
    again, resumed = run_suite(peers, [changed], ["vllm"], {"vllm": "0.33.0"}, results, 2, 0)
    assert resumed == 0 and again[0].labels != ["agree"]


def test_the_recorded_replies_of_real_models_join_the_corpus_once_each_as_scoring_reads_them():
    from harness.storage.results import ResultsDir
    from harness.evaluation.scenario_files import load_scenarios
    from harness.evaluation.scoring import parse_steps
    from harness.storage.transcripts import read_transcript
    from harness.suites.parser_agreement.driver import transcript_cases

    files = ResultsDir.at("results").transcript_files()
    cases = transcript_cases(files, {"hermes"})
    scenarios = {s.name: s for s in load_scenarios()}
    wanted = {}
    for path in files:
        for record in read_transcript(path).samples():
            for turn in record.turns:
                for step, parse in zip(turn["steps"], parse_steps(turn["steps"], record.family)):
                    if step.get("reply") and not step.get("synthesized") and parse.family == "hermes":
                        wanted.setdefault((step["reply"], repr(parse.to_json())),
                                          (record.model.id, scenarios[record.scenario.name].tool_schemas()))
    # Only the Qwen models were prompted with a hermes template; Gemma's and SmolLM's replies have no family.
    assert {c.source for c in cases} == {f"transcript:{m}" for m, _ in wanted.values()}
    assert sorted((c.reply, repr(c.expect)) for c in cases) == sorted(wanted)
    for c in cases:
        assert (c.source, c.tools) == (f"transcript:{wanted[c.reply, repr(c.expect)][0]}",
                                       wanted[c.reply, repr(c.expect)][1])
        assert c.template.startswith("gguf-qwen2.5-coder") and parser_for(c, "vllm") == "hermes"
    assert len({(c.source, c.name) for c in cases}) == len(cases)
    assert transcript_cases(files, {"hermes"}) == cases
