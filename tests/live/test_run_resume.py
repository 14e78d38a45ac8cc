"""`harness run` bookkeeping on a stand-in GGUF: samples land in the transcript as they finish, a second run
skips them, and a run killed while writing loses only the sample in flight."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from ping_standin import CALL, scripted_ids, standin_chat  # noqa: E402
from harness.scripted import PROFILES, Script, Vocab  # noqa: E402

from harness.template.detect import Detection  # noqa: E402
from harness.reports.tables import collect  # noqa: E402
from harness.live.opening import OpenModel  # noqa: E402
from harness.live.runner import run_model  # noqa: E402
from harness.evaluation.scenario_files import load_scenarios  # noqa: E402
from harness.pins.sources import Sources  # noqa: E402
from harness.pins.entries import ModelPin  # noqa: E402
from harness.storage.results import ResultsDir  # noqa: E402
from harness.storage.transcripts import read_transcript  # noqa: E402

pytestmark = pytest.mark.needs_binding     # the stand-in runs in llama.cpp

MODEL_ID = "standin-qwen"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    vocab = Vocab(PROFILES["qwen2.5"])
    chat = standin_chat(tmp_path_factory.mktemp("standin"), "qwen-ping", [Script("\n", scripted_ids(vocab, CALL, "\n"))])
    return OpenModel(MODEL_ID, "0" * 64, "qwen-ping.gguf", chat, "gguf", None, Detection("hermes", "stand-in"))


@pytest.fixture
def setup(tmp_path):
    scenarios_dir = tmp_path / "scenarios"
    scenarios_dir.mkdir()
    (scenarios_dir / "ping.yaml").write_text("""\
name: ping
description: scripted
max_steps: 1
samples: 3
tools:
  - name: ping
    description: Check the relay.
    parameters: {type: object, properties: {}}
    returns: pong
conversation:
  turns:
    - user: Ping the relay.
      expect: {tool: ping, arguments: {}}
""")
    pin = ModelPin(MODEL_ID, True, None, "qwen-ping.gguf", None, None, "0" * 64, None, None, "hermes", (), None)
    sources = Sources(tmp_path / "sources.json", {}, {MODEL_ID: pin})
    return load_scenarios(scenarios_dir), sources, tmp_path / "results", scenarios_dir


def run(model, setup, samples=None):
    scenarios, sources, results, _ = setup
    return run_model(MODEL_ID, scenarios, samples, 0, sources=sources, results_dir=results, model=model,
                     warn=lambda message: None)


def test_every_sample_is_written_and_a_second_run_skips_them(model, setup):
    first = run(model, setup)
    assert (first["ran"], first["skipped"], first["errors"]) == (3, 0, 0)
    transcript = read_transcript(ResultsDir(setup[2]).transcript(MODEL_ID))
    kinds = [r.KIND for r in transcript.records]
    assert kinds == ["model", "sample", "sample", "sample"]
    samples = transcript.samples()
    assert [r.seed for r in samples] == [0, 1, 2] and all(r.recorded_verdicts["passed"] for r in samples)
    # Three pending samples: the first step was written in one batch sharing the prompt's evaluation.
    assert all(r.batch["size"] == 3 and r.turns[0]["steps"][0]["shared_prompt"] for r in samples)
    again = run(model, setup)
    assert (again["ran"], again["skipped"]) == (0, 3)
    more = run(model, setup, samples=5)
    assert (more["ran"], more["skipped"]) == (2, 3)


def test_a_run_killed_while_writing_loses_only_the_sample_in_flight(model, setup):
    run(model, setup)
    path = ResultsDir(setup[2]).transcript(MODEL_ID)
    data = path.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: cut + 100])  # the last sample's line, torn by the kill
    transcript = read_transcript(path)
    assert len(transcript.samples()) == 2 and "torn last line" in transcript.warnings[0]
    resumed = run(model, setup)
    assert (resumed["ran"], resumed["skipped"]) == (1, 2)
    transcript = read_transcript(path)
    assert transcript.warnings == [] and sorted(r.sample for r in transcript.samples()) == [0, 1, 2]
    assert path.with_suffix(".jsonl.torn").is_file()


def test_report_rebuilds_from_the_transcript_alone(model, setup):
    run(model, setup)
    _, _, results, scenarios_dir = setup
    collected = collect(results, scenarios_dir)
    live = collected.samples[~collected.samples["replayed"]]
    assert len(live) == 3 and live["parsed"].all() and live["right_tool"].all()
    assert list(live["expected_arguments"]) == [True, True, True]


def test_a_changed_scenario_leaves_its_old_records_out(model, setup):
    run(model, setup)
    _, _, results, scenarios_dir = setup
    path = scenarios_dir / "ping.yaml"
    path.write_text(path.read_text().replace("Ping the relay.", "Ping the relay now."))
    collected = collect(results, scenarios_dir)
    assert collected.stale[(MODEL_ID, "ping")] == 3
    assert collected.samples.empty or not (~collected.samples["replayed"]).any()
