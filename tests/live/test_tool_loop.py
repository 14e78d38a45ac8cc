"""The tool loop through the real binding, on a stand-in GGUF with Qwen2.5's vocabulary and template whose
scripted reply is always the same Hermes call: every step calls the tool again, so a turn ends at its step
limit, and each call must still run exactly once."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from ping_standin import CALL, ping_scenario, scripted_ids, standin_chat  # noqa: E402
from harness.scripted import PROFILES, Script, Vocab  # noqa: E402

from harness.storage.records import ModelRef, SampleRecord, ScenarioRef  # noqa: E402
from harness.evaluation.scoring import score_sample  # noqa: E402
from harness.live.tool_loop import DrivenModel, first_prompt, run_sample, step_seed  # noqa: E402
from harness.template.kwargs import template_kwargs_for  # noqa: E402

pytestmark = pytest.mark.needs_binding     # the stand-in runs in llama.cpp

@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    vocab = Vocab(PROFILES["qwen2.5"])
    return standin_chat(tmp_path_factory.mktemp("standin"), "qwen-ping", [Script("\n", scripted_ids(vocab, CALL, "\n"))])


def record(chat, sc, result):
    return SampleRecord(ModelRef("m"), ScenarioRef(sc.name, sc.hash), 0, 7, family=chat.family, turns=result["turns"])


def test_raising_tool_runs_once_per_call_and_its_error_reaches_the_model(chat, tmp_path):
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    raises: relay down", max_steps=2)
    result = run_sample(chat, sc, seed=7)
    steps = result["turns"][0]["steps"]
    assert [s["reply"] for s in steps] == [CALL, CALL]
    calls = [c for s in steps for c in s["calls"]]
    assert [c["id"] for c in calls] == ["call00001", "call00002"]
    assert result["executions"] == {"call00001": 1, "call00002": 1}
    assert all(c["executed"] and c["error"] and c["result"] == '{"error": "relay down"}' for c in calls)
    # The second prompt ends with the tool's error, as a tool response, right before the assistant's turn.
    assert '{"error": "relay down"}' in steps[1]["prompt_tail"]
    assert steps[1]["prompt_tail"].endswith("<|im_start|>assistant\n")
    verdicts = score_sample(sc, record(chat, sc, result))
    assert verdicts["parsed"] and verdicts["right_tool"] and verdicts["valid_arguments"]
    assert "step-limit" in verdicts["findings"] and "repeated-call" in verdicts["findings"]
    assert "tool-ran-twice" not in verdicts["findings"]


def test_failed_follow_up_is_answered_from_the_result_in_hand_and_the_tool_runs_once(chat, tmp_path):
    # The result is longer than the context window, so the follow-up generation cannot even start.
    big = "word " * 1500
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: " + json.dumps(big), max_steps=2)
    result = run_sample(chat, sc, seed=7)
    steps = result["turns"][0]["steps"]
    assert len(steps) == 2 and steps[1]["synthesized"] and "context window" in steps[1]["generation_error"]
    assert steps[1]["reply"].startswith("ping: ") and big.strip() in steps[1]["reply"]
    assert result["error"] is None and result["executions"] == {"call00001": 1}
    verdicts = score_sample(sc, record(chat, sc, result))
    assert "synthesized-answer" in verdicts["findings"] and "generation-error" in verdicts["findings"]
    assert "tool-ran-twice" not in verdicts["findings"]


def test_invalid_arguments_go_back_as_an_error_and_nothing_runs(chat, tmp_path):
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {host: {type: string}}, required: [host]}\n"
                       "    returns: pong", max_steps=1)
    result = run_sample(chat, sc, seed=7)
    (call,) = result["turns"][0]["steps"][0]["calls"]
    assert not call["executed"] and result["executions"] == {}
    assert json.loads(call["result"]) == {"error": "invalid arguments for ping: missing required parameter 'host'"}
    verdicts = score_sample(sc, record(chat, sc, result))
    assert verdicts["right_tool"] is True and verdicts["valid_arguments"] is False


def test_without_a_family_the_tools_are_not_offered_and_a_call_is_text(chat, tmp_path):
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong", max_steps=2)
    plain = DrivenModel(chat.backend, chat.template, "", "<|im_end|>", None, {})
    assert "ping" in first_prompt(chat, sc) and "ping" not in first_prompt(plain, sc)
    result = run_sample(plain, sc, seed=7)
    (step,) = result["turns"][0]["steps"]
    assert step["reply"] == CALL and step["calls"] == [] and result["executions"] == {}
    verdicts = score_sample(sc, SampleRecord(ModelRef("m"), ScenarioRef(sc.name, sc.hash), 0, 7, turns=result["turns"]))
    assert verdicts["parsed"] is False and verdicts["right_tool"] is False
    assert "call-without-tools" in verdicts["findings"]


def test_batched_first_step_is_used_as_given(chat, tmp_path):
    from harness.backends.embedded.generate import generate

    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong", max_steps=1)
    first = generate(chat.backend.llm, first_prompt(chat, sc), max_tokens=32, seed=step_seed(3, 0, 0))
    result = run_sample(chat, sc, seed=3, first=first)
    (step,) = result["turns"][0]["steps"]
    assert step["shared_prompt"] and step["seed"] == 3 and step["reply"] == CALL


def test_thinking_templates_are_asked_not_to_think():
    qwen3 = (Path(__file__).parents[2] / "templates" / "Qwen-Qwen3-0.6B.jinja").read_text()
    assert template_kwargs_for(qwen3) == {"enable_thinking": False}
    assert template_kwargs_for("{{ messages[0].content }}") == {}


def test_fallback_answers_a_repeated_call_from_its_result_instead_of_running_it_again(chat, tmp_path):
    """The stand-in writes the same call at every step. Native runs each one (the model's behaviour, named
    `repeated-call`, up to the step limit); fallback runs it once, records the repeat as written, and answers
    the turn from the result it already has."""
    sc = ping_scenario(tmp_path, "    parameters: {type: object, properties: {}}\n    returns: pong", max_steps=3)
    native = run_sample(chat, sc, seed=7)
    assert native["executions"] == {"call00001": 1, "call00002": 1, "call00003": 1}
    assert "step-limit" in score_sample(sc, record(chat, sc, native))["findings"]
    result = run_sample(chat, sc, seed=7, mode="fallback")
    steps = result["turns"][0]["steps"]
    assert [s["reply"] for s in steps[:2]] == [CALL, CALL] and result["executions"] == {"call00001": 1}
    (repeat,) = steps[1]["calls"]
    assert steps[1]["repeated_call_after_result"] == ["call00001"] and "fallback_from" not in steps[1]
    assert not repeat["executed"] and repeat["repeat_of"] == "call00001" and repeat["result"] == "pong"
    assert len(steps) == 3 and steps[2]["synthesized"] and steps[2]["reply"] == "ping: pong"
    verdicts = score_sample(sc, dataclasses.replace(record(chat, sc, result), mode="fallback"))
    assert "repeated-call-after-result" in verdicts["findings"] and "synthesized-answer" in verdicts["findings"]
    assert "step-limit" not in verdicts["findings"] and "tool-ran-twice" not in verdicts["findings"]
    # The answer is the loop's, not the model's: the answer checks do not credit it.
    assert verdicts["result_used"] in (False, None)
