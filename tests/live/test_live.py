"""Live tier: the real models, through the real binding. What is asserted must hold on every run; rates,
which vary with sampling and CPU kernels, are measured by `harness run` and reported, never asserted.

Per model × scenario × mode: the run completes, every sample is in the transcript, the transcript alone
re-scores to the verdicts recorded at run time (what `harness report` relies on), a second run resumes without
generating, and detection agrees with the family sources.json expects. Under a grammar (grammar mode, and
fallback's retries) every step says so and counts what its grammar refused, and a reply that ended on its own is
a call the strict parser reads or an answer that does not open like a call (generic-json's answer object). Where a reachable model was measured reliably right in
native mode (see RELIABLE), that verdict is asserted for every sample."""

import pytest

from harness.core.errors import DriftError, SourcesError
from harness.grammar import GENERIC
from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scoring import score_sample
from harness.pins.sources import fetch_command, load_sources, model_path
from harness.storage.results import ResultsDir
from harness.storage.transcripts import read_transcript

# (model, scenario) -> verdicts that held in every sample measured on this machine (2 cores, seeds 0..N),
# and hold for reasons that do not depend on sampling luck. The measurements are in the report.
RELIABLE = {
    # Tools are not offered (no family): no call can be made, and a greeting needs none.
    ("smollm2-135m-instruct-q4_1", "greeting"): ("right_tool",),
    ("gemma-3-270m-q4_k_m", "greeting"): ("right_tool",),
    # Measured (seeds 0-4, two full runs): qwen2.5-coder-0.5b greets back in text every time, and answers the
    # seeded-history follow-up from the history without a new call every time (its answer names Lisbon 4/5).
    ("qwen2.5-coder-0.5b-instruct-q4_k_m", "greeting"): ("parsed", "right_tool"),
    ("qwen2.5-coder-0.5b-instruct-q4_k_m", "seeded-history"): ("parsed", "right_tool"),
}

_OPEN = {}


@pytest.fixture(scope="module", autouse=True)
def _close_models():
    """Free the models before interpreter shutdown (the binding cannot free them once its globals are gone)."""
    yield
    for model in _OPEN.values():
        if model is not None:
            model.chat.backend.close()
    _OPEN.clear()


def _open(model_id):
    """Each model is verified and loaded once per session."""
    if model_id not in _OPEN:
        from harness.live.opening import open_model

        try:
            model_path(model_id)
        except DriftError:
            raise
        except SourcesError:
            _OPEN[model_id] = None
        else:
            _OPEN[model_id] = open_model(model_id)
    if _OPEN[model_id] is None:
        pytest.skip(fetch_command(model_id))
    return _OPEN[model_id]


def test_live_run(live_model_id, live_scenario_name, live_mode, tmp_path, request):
    samples = request.config.getoption("--harness-samples")
    model = _open(live_model_id)
    (scenario,) = load_scenarios(names=[live_scenario_name])
    from harness.live.runner import run_model

    first = run_model(live_model_id, [scenario], samples, 0, results_dir=tmp_path, model=model, modes=[live_mode])
    assert first["ran"] == samples and first["skipped"] == 0

    transcript = read_transcript(ResultsDir(tmp_path).transcript(live_model_id))
    assert transcript.warnings == []
    records = transcript.samples()
    # A template may refuse a conversation with its own raise_exception (Gemma's turn template refuses the
    # tool turns of a seeded history): that is the template's recorded verdict, not a harness failure.
    errors = [r.error for r in records if r.error]
    assert first["errors"] == len(errors)
    assert all(e.startswith("render: template raised") for e in errors), errors
    assert sorted(r.sample for r in records) == list(range(samples))
    assert sum(r.KIND == "model" for r in transcript.records) == 1
    for record in records:
        assert record.scenario.hash == scenario.hash and record.mode == live_mode
        assert record.model.sha256 == load_sources().model(live_model_id).sha256
        steps = [s for t in record.turns for s in t["steps"]]
        # Every step was generated (and ended somehow), errored, or is the loop's synthesized answer.
        assert steps and all(s["prompt_sha256"] and (s["finish_reason"] or s.get("error") or s.get("synthesized"))
                             for s in steps)
        for step in steps:
            for call in step["calls"]:
                assert call["executions"] <= 1 and call["id"].startswith("call") and len(call["id"]) == 9
        for step in steps:
            _check_mode(live_mode, scenario, step)
        # The transcript alone gives back the verdicts the run recorded (what `harness report` does).
        assert score_sample(scenario, record) == record.recorded_verdicts

    again = run_model(live_model_id, [scenario], samples, 0, results_dir=tmp_path, model=model,
                      modes=[live_mode])
    assert again["ran"] == 0 and again["skipped"] == samples

    expected_family = load_sources().model(live_model_id).family
    assert model.chat.family == expected_family, model.detection.reason
    for verdict in RELIABLE.get((live_model_id, live_scenario_name), ()) if live_mode == "native" else ():
        assert all(r.recorded_verdicts[verdict] is True for r in records), (verdict, [r.recorded_verdicts for r in records])


def _check_mode(mode, scenario, step):
    """What a mode guarantees of every step, whatever the model writes."""
    if step.get("error") or step.get("synthesized"):
        return
    under_grammar = scenario.tools and (mode == "grammar" or "fallback_from" in step)
    assert ("grammar" in step) == bool(under_grammar), step.keys()
    if not under_grammar:
        assert "grammar_from" not in step
        return
    # Fallback's retry (of a call attempt) is held to a call until one has run this turn; after that it is "auto".
    assert step["grammar"] in (("required", "auto") if "fallback_from" in step else ("auto",))
    if step.get("grammar_runtime_retry"):
        assert step["grammar_from"] is None  # the reply kept was written unconstrained
        return
    # Both grammars hold from the first token; each step counts the sampled tokens its grammar refused.
    assert step["grammar_from"] == 0 and step["grammar_refused"] >= 0
    # The point of the grammar: a reply that ended on its own is read by the strict parser with no deviation
    # when it is a call (required: it must be); an "auto" answer does not open like a call. A reply cut by
    # max_tokens may stop inside the call.
    if step["finish_reason"] == "stop":
        parse = step["parse"]
        if parse["calls"] or step["grammar"] == "required":
            assert parse["deviation"] is None and parse["calls"], (step["reply"], parse)
        elif step["family"] == GENERIC:
            assert parse["deviation"] is None, (step["reply"], parse)  # the answer object
        else:
            assert not step["reply"].lstrip().startswith(("{", "[", "```")), step["reply"]
