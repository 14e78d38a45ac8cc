"""`--binary PATH`: a runtime author's own build of llama-server, named by what it reports. A path that is not an
executable answering --version as llama.cpp does is refused in one line, before any scripted model is built or
server started; a runtime that runs no binary of its own refuses the option."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import runtimes
from harness.backends.binaries import binary_build, build_words
from harness.backends.servers import LocalServer
from harness.core.errors import HarnessError

ROOT = Path(__file__).resolve().parents[2]


def _script(path: Path, body: str, mode=0o755) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("make, says", [
    (lambda d: d / "nothing-here", "does not exist"),
    (lambda d: d, "is a folder"),
    (lambda d: _script(d / "plain", "exit 0", mode=0o644), "not executable"),
    (lambda d: _script(d / "other", "echo 'other-tool 1.2'"), "does not answer --version as llama.cpp's"),
    (lambda d: _script(d / "fails", "echo 'version: 0.6.0-dev (build 1, commit abc)' >&2; exit 3"), "exit 3"),
])
def test_a_path_that_is_no_llama_server_is_refused_in_one_line(tmp_path, make, says):
    path = make(tmp_path)
    with pytest.raises(HarnessError) as caught:
        binary_build(path)
    message = str(caught.value)
    assert message.startswith(f"--binary {path}: ") and says in message and "\n" not in message


def test_both_version_lines_of_llama_cpp_are_read_with_the_binarys_hash(tmp_path):
    new = _script(tmp_path / "new", "echo 'version: 0.6.0-dev (build 11434, commit unknown)' >&2\n"
                                    "echo 'built with GNU 12.2.0 for Linux x86_64' >&2")
    old = _script(tmp_path / "old", "echo 'version: 4567 (abc1234)' >&2")
    import hashlib
    assert binary_build(new) == {"version": "0.6.0-dev", "build": 11434, "commit": "unknown",
                                 "sha256": hashlib.sha256(new.read_bytes()).hexdigest()}
    assert binary_build(old)["version"] == "4567" and binary_build(old)["build"] is None
    assert binary_build(old)["commit"] == "abc1234"


def test_the_records_of_an_own_build_are_named_by_what_it_reports():
    server = runtimes.get("llama-server")
    unknown = {"version": "0.6.0-dev", "build": 11434, "commit": "unknown", "sha256": "ab" * 32}
    assert server.own_record_name(unknown) == f"llama-server-own-0.6.0-dev-b11434-{'ab' * 6}"
    assert server.own_record_name({**unknown, "commit": "515e855"}) == "llama-server-own-0.6.0-dev-b11434-515e855"
    assert build_words({**unknown, "archive": None}) == f"0.6.0-dev, build 11434, commit unknown, own binary sha256 {'ab' * 6}"
    assert build_words({**unknown, "archive": "x-llama.cpp"}).endswith("from archive x-llama.cpp")
    assert build_words(None) == "not recorded" and build_words({"version": "0.9.5"}) == "0.9.5"


def test_a_runtime_that_runs_no_binary_of_its_own_refuses_one(tmp_path):
    with pytest.raises(ValueError, match="llama-cpp-python runs no binary of its own"):
        LocalServer("llama-cpp-python", tmp_path / "m.gguf", binary=tmp_path / "x")
    own = LocalServer("llama-server-next", tmp_path / "m.gguf", port=8123, binary=tmp_path / "my-llama-server")
    assert own.command()[0] == str(tmp_path / "my-llama-server")
    assert runtimes.get("mistralrs").build() == {"version": "0.9.5"}


def _cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "harness", "runtime-conformance", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd)


@pytest.mark.parametrize("args, says", [
    (["--server", "llama-server", "--binary", "{tmp}/missing"], "--binary {tmp}/missing: does not exist"),
    (["--server", "llama-server-next", "--binary", "{tmp}/other"], "does not answer --version as llama.cpp's"),
    (["--server", "llama-cpp-python", "--binary", "{tmp}/other"], "llama-cpp-python runs no binary of its own"),
    (["--endpoint", "http://127.0.0.1:9", "--binary", "{tmp}/other"], "give it with --server"),
])
def test_the_command_refuses_a_bad_binary_before_anything_runs(tmp_path, args, says):
    _script(tmp_path / "other", "echo 'other-tool 1.2'")
    results = tmp_path / "results"
    done = _cli(*[a.format(tmp=tmp_path) for a in args], "--template", "Qwen3.5-4B", "--results-dir", results,
                cwd=tmp_path)
    assert done.returncode != 0 and says.format(tmp=tmp_path) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not results.exists()
