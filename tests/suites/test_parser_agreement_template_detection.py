"""SGLang's template detection beside ours: the committed records (results/template-detection/sglang.jsonl) hold
every pinned template as it is now, the comparison reads them with conformance.json offline, and, where the peers
environment is built, SGLang's detection asked again gives the committed lines."""

import json
import sys

import pytest

from harness.core.errors import PeerError
from harness.core.hashing import sha256_text
from harness.suites.parser_agreement import template_detection as td
from harness.storage.results import ResultsDir
from harness.peers import SETUP_COMMAND, Peers, peers_python
from harness.pins.sources import load_sources, resolve_template
from tests.pins.test_fetch import ROOT

RESULTS = ResultsDir.at(ROOT / "results")
RECORDS = RESULTS.template_detection_records(td.PROJECT)


def test_the_committed_records_hold_every_pinned_template_as_it_is_now():
    detectors, version, records = td.read_detections(RECORDS)
    sources = load_sources()
    assert version and detectors["glm"] == detectors["glm45"] != detectors["glm47"]
    assert set(records) == set(sources.templates)
    for template_id, record in records.items():
        assert record["sha256"] == sha256_text(resolve_template(template_id, sources).text), template_id
        assert record["version"] == version and (record["tool_call_parser"] is None) == (record["rule"] is None)


def test_every_template_is_compared_and_each_disagreement_is_listed_in_the_docs():
    compared = td.compare(RESULTS.root, RECORDS)
    rows = compared["rows"]
    assert len(rows) == len(load_sources().templates)
    assert not [r for r in rows if r["outcome"] in ("stale", "not asked")]
    lines = td.detection_lines(compared)
    disagree = [r for r in rows if not td.OUTCOMES[r["outcome"]][0]]
    assert f"{len(rows) - len(disagree)}/{len(rows)} templates agree, {len(disagree)} disagree" in "\n".join(lines)
    docs = (ROOT / "docs" / "strictness.md").read_text(encoding="utf-8")
    for r in disagree:
        assert f"\n| {r['template']} | " in docs, r["template"]
    for r in rows:
        if td.OUTCOMES[r["outcome"]][0]:
            assert f"\n| {r['template']} | " not in "\n".join(lines), r["template"]


def _row(family, sha="a" * 64, template="GLM-4.6", status="detected"):
    return {"id": template, "sha256": sha, "family": family, "status": status}


def test_outcomes_name_how_the_two_detections_differ():
    detectors = {"glm": "Glm4MoeDetector", "glm45": "Glm4MoeDetector", "qwen": "Qwen25Detector",
                 "hermes": "HermesDetector"}

    def record(parser, sha="a" * 64):
        return {"sha256": sha, "tool_call_parser": parser}

    glm, hermes = _row("glm"), _row("hermes", template="Qwen-Qwen3-0.6B")
    assert td.outcome(glm, record("glm45"), detectors) == "same parser"
    assert td.outcome(glm, record("glm"), detectors) == "same detector"
    assert td.outcome(hermes, record("qwen"), detectors) == "other parser"
    assert td.outcome(hermes, record(None), detectors) == "sglang picks none"
    assert td.outcome(_row("apriel", template="unsloth-Apriel-1.5"), record(None), detectors) == "neither"
    assert td.outcome(_row("apriel", template="unsloth-Apriel-1.5"), record("qwen"), detectors) == "unmapped family"
    assert td.outcome(_row(None, status="wall"), record("qwen"), detectors) == "no family"
    assert td.outcome(_row(None, status="no tools"), record(None), detectors) == "neither"
    assert td.outcome(glm, record("glm45", sha="b" * 64), detectors) == "stale"
    assert td.outcome(glm, None, detectors) == "not asked"


def test_without_records_there_is_no_section(tmp_path):
    assert td.detection_lines(td.compare(RESULTS.root, tmp_path / "none.jsonl")) == []


def test_a_detection_the_environment_cannot_run_stops_with_the_setup_command():
    # This environment's python runs the worker without SGLang: the request is answered with its error, and the
    # command stops on it, naming how to build the environment, instead of recording an error per template.
    with Peers(sys.executable) as worker:
        assert "sglang only" in worker.ask({"op": "detect", "project": "vllm", "template": ""})["error"]
        with pytest.raises(PeerError, match="ModuleNotFoundError.*bash scripts/setup_peers.sh"):
            worker.detect("{{ messages }}", {"<tool_call>"})
        with pytest.raises(PeerError, match="parser table"):
            worker.detectors()


@pytest.fixture(scope="module")
def peers():
    python = peers_python()
    if python is None:
        pytest.skip(f"the peers environment (SGLang) is not built: {SETUP_COMMAND}")
    with Peers(python) as running:
        yield running


@pytest.mark.needs_peers
def test_sglang_asked_again_gives_the_committed_lines(peers):
    from harness.suites.parser_agreement.detection_driver import detect_all, vocabulary

    sources = load_sources()
    wanted = ["Qwen-Qwen3-0.6B", "GLM-4.6", "Spark2.5", "moonshotai-Kimi-K2", "meta-llama-Llama-3.1-8B-Instruct"]
    committed = [json.loads(line) for line in RECORDS.read_text(encoding="utf-8").splitlines()]
    version = committed[0]["version"]
    lines = detect_all(peers, [resolve_template(t, sources) for t in wanted], version)
    assert lines[0] == committed[0]
    by_id = {line["template"]: line for line in committed[1:]}
    assert lines[1:] == [by_id[t] for t in wanted]
    # Kimi K2's parser is read from its vocabulary alone: with the template's text only SGLang picks none.
    kimi = by_id["moonshotai-Kimi-K2"]
    assert kimi["tool_call_parser"] == "kimi_k2" and kimi["text_only"] is None
    assert "<|tool_calls_section_begin|>" in vocabulary(resolve_template("moonshotai-Kimi-K2", sources).text)
