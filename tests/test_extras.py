"""llama-cpp-python is the `embedded` extra: what reads templates and replies works without it, and what needs it
fails with one message naming the extra and its install command. Each case runs `harness` in a subprocess whose
import of the binding fails as it does where the extra is not installed (a second environment is not needed to
see the code paths that would touch it)."""

import json
import subprocess
import sys

from harness.core.errors import MissingExtraError

# Python refuses an import whose sys.modules entry is None with ModuleNotFoundError (name set), as for an absent
# package.
WITHOUT_BINDING = ("import sys; sys.modules['llama_cpp'] = None; from harness.cli import main; "
                   "sys.exit(main(sys.argv[1:]))")
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'


def harness_without_binding(*argv, stdin: str = ""):
    return subprocess.run([sys.executable, "-c", WITHOUT_BINDING, *argv], input=stdin, capture_output=True,
                          text=True, check=False)


def test_run_names_the_extra_and_its_install_command():
    done = harness_without_binding("run", "--scenario", "arithmetic", "--samples", "1")
    assert done.returncode == 2, done.stderr
    expected = str(MissingExtraError("llama-cpp-python", "embedded", "x")).split(" needs ")[1]
    assert expected in done.stderr
    assert "pip install -e '.[embedded]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr   # one message, not one per model


def test_detect_parse_and_list_work_without_the_binding():
    detected = harness_without_binding("detect", "Qwen3-Coder", "--json")
    assert detected.returncode == 0, detected.stderr
    assert json.loads(detected.stdout)["family"] == "qwen-xml"
    parsed = harness_without_binding("parse", "--template", "gguf-qwen2.5-coder-0.5b-instruct-q4_k_m", "--json",
                                     stdin=CALL)
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["calls"] == [{"name": "get_weather", "arguments": {"location": "Paris"}}]
    listed = harness_without_binding("list", "families", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "hermes" in listed.stdout
