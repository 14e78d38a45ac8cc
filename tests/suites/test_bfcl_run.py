"""`harness run --suite bfcl`'s path on a stand-in GGUF (Qwen2.5's vocabulary and template, a scripted reply):
BFCL cases go through the runner like scenario samples, into DIR/bfcl/<model>.jsonl, a second run skips them,
and the report judges what was recorded."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from ping_standin import scripted_ids, standin_chat  # noqa: E402
from harness.scripted import PROFILES, Script, Vocab  # noqa: E402

from harness.suites.bfcl.cases import load_suite  # noqa: E402
from harness.storage.results import ResultsDir  # noqa: E402
from harness.live.opening import OpenModel  # noqa: E402
from harness.live.runner import run_model  # noqa: E402
from harness.pins.sources import Sources  # noqa: E402
from harness.pins.entries import ModelPin  # noqa: E402
from harness.template.detect import Detection  # noqa: E402

pytestmark = pytest.mark.needs_binding     # the stand-in runs in llama.cpp

MODEL_ID = "standin-qwen"
# Compact: a stand-in's reply cannot repeat a token, and the spaces of the usual spelling would.
CALL = '<tool_call>{"name":"math.factorial","arguments":{"number":5}}</tool_call>'


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    vocab = Vocab(PROFILES["qwen2.5"])
    script = Script("\n", scripted_ids(vocab, CALL, "\n"))
    chat = standin_chat(tmp_path_factory.mktemp("standin"), "qwen-bfcl", [script])
    return OpenModel(MODEL_ID, "0" * 64, "qwen-bfcl.gguf", chat, "gguf", None, Detection("hermes", "stand-in"))


def test_cases_run_like_scenarios_resume_and_are_judged(tmp_path, model):
    suite = load_suite(["simple_python", "irrelevance"])
    cases = [suite.cases["simple_python_1"], suite.cases["irrelevance_0"]]
    pin = ModelPin(MODEL_ID, True, None, "qwen-bfcl.gguf", None, None, "0" * 64, None, None, "hermes", (), None)
    sources = Sources(tmp_path / "sources.json", {}, {MODEL_ID: pin})
    results = ResultsDir(tmp_path / "results")

    def run():
        return run_model(MODEL_ID, [c.scenario for c in cases], None, 0, sources=sources, results_dir=results,
                         model=model, warn=lambda message: None, modes=("native",),
                         transcript=results.bfcl_transcript(MODEL_ID))

    first = run()
    assert (first["ran"], first["skipped"], first["errors"]) == (2, 0, 0)
    assert first["transcript"] == str(results.bfcl_transcript(MODEL_ID))
    assert not results.transcripts.exists()       # scenario transcripts are untouched
    again = run()
    assert (again["ran"], again["skipped"]) == (0, 2)

    from harness.suites.bfcl.judging import read_outcomes

    warnings = []
    outcomes, _, _ = read_outcomes(results, warnings)
    by_case = {o.case: o for o in outcomes}
    assert by_case["simple_python_1"].strict == [{"math.factorial": {"number": 5}}]
    assert by_case["simple_python_1"].parsed is True
    # The same call on the irrelevance case: a call was made, by either rule.
    assert by_case["irrelevance_0"].attempted and by_case["irrelevance_0"].right_tool is False
    assert warnings == []
