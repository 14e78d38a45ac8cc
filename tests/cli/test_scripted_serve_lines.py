"""What `harness scripted-model` prints after building: each served name, then the exact commands that serve the
models with a runtime on port 8080 and ask them (harness.suites.runtime_conformance.scripted_command.serve_lines), one process for all of them
where the runtime hosts several models."""

import shlex

from harness.backends import runtimes
from harness.suites.runtime_conformance.scripted_command import serve_lines

MODELS = [{"file": "a.gguf", "served_name": "a", "requests": [{}, {}]},
          {"file": "b.gguf", "served_name": "b", "requests": [{}]}]


def test_a_runtime_that_hosts_several_models_serves_them_from_one_process_asked_in_one_run(tmp_path):
    lines = serve_lines(runtimes.get("llama-cpp-python"), tmp_path, tmp_path / "T.manifest.json", MODELS)
    assert lines[:2] == [f"  a: 2 request(s), {tmp_path / 'a.gguf'}", f"  b: 1 request(s), {tmp_path / 'b.gguf'}"]
    serve, run = lines[2:]
    assert serve.startswith("serve (llama-cpp-python): ") and "--config_file" in serve
    assert (tmp_path / "llama-cpp-python.log.config.json").is_file()      # the file the command names
    words = shlex.split(run.removeprefix("run: "))
    assert words[:6] == [".venv/bin/harness", "runtime-conformance", "--endpoint", "http://127.0.0.1:8080",
                         "--manifest", str(tmp_path / "T.manifest.json")]
    assert "--served-model" not in words and words[-2:] == ["--runtime", runtimes.get("llama-cpp-python").record_name]


def test_a_runtime_of_one_model_a_process_gets_a_serve_and_a_run_per_model(tmp_path):
    lines = serve_lines(runtimes.get("llama-server"), tmp_path, tmp_path / "T.manifest.json", MODELS)[2:]
    assert [line.split(" ", 1)[0] for line in lines] == ["serve", "run:", "serve", "run:"]
    assert "--served-model a" in lines[1] and "--served-model b" in lines[3]
    # Where llama-server is built, its command names the model and port; else the line says what is missing.
    assert ("--port 8080" in lines[0] and str(tmp_path / "a.gguf") in lines[0]) or "cannot be written here" in lines[0]
