"""The end-of-run comparison with the committed samples compares the replies, not only the all-checks verdict:
two runs of one seed that wrote other replies with the same verdict are said to differ, and the recorded batch
size and engine say why they may."""

from harness.cli import run_compare
from harness.core import constants
from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
from harness.storage.results import ResultsDir
from harness.evaluation.scenario_files import load_scenarios
from harness.storage.transcript_writer import TranscriptWriter

SCENARIO = """\
name: hello
description: a greeting
tools: []
conversation:
  turns:
    - user: Hello.
      expect:
        answer_contains: {any_of: [hi]}
"""


def _write(folder, replies, batch, engine, scenario):
    path = ResultsDir(folder).transcript("m")
    path.parent.mkdir(parents=True)
    with TranscriptWriter(path) as writer:
        for i, reply in enumerate(replies):
            writer.append(SampleRecord(ModelRef("m", "f" * 64), ScenarioRef(scenario.name, scenario.hash), i, i,
                                       "native", None, turns=[{"user": "Hello.", "steps": [
                                           {"reply": reply, "prompt_tail": "", "finish_reason": "stop"}]}],
                                       batch={"size": batch, "seconds": 1.0}, engine=engine))
    return path


def test_other_replies_with_the_same_verdict_are_counted_and_explained(tmp_path, monkeypatch):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "hello.yaml").write_text(SCENARIO)
    (scenario,) = load_scenarios(tmp_path / "scenarios")
    committed = tmp_path / "committed"
    monkeypatch.setattr(constants, "RESULTS_DIR", committed)
    _write(committed, ["hi there", "hi!", "no"], 3, {"binding": f"llama-cpp-python {constants.BINDING_VERSION}", "threads": 1}, scenario)
    mine = _write(tmp_path / "mine", ["hi there", "hi, hello", "nope"], 1,
                  {"binding": f"llama-cpp-python {constants.BINDING_VERSION}", "threads": 2}, scenario)
    lines = run_compare.comparison([{"model": "m", "transcript": str(mine)}], ResultsDir(tmp_path / "mine"),
                                   [scenario])
    assert len(lines) == 2
    # Sample 1 passes in both and sample 2 fails in both: 0 judged differently, yet 2 wrote other replies.
    assert "all checks 2/3 here, 2/3 in committed/; 0 sample(s) judged differently; 2 wrote other replies" in lines[1]
    assert "2 of them written in a batch of another size, 2 by another binding or thread count" in lines[1]
