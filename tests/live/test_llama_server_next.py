"""llama-server-next, llama.cpp's server from the newest llama.cpp (bash scripts/build_llama_server_next.sh): it
reports the version its records are named after, takes every flag llama-server is started with, and a scripted
reply through it lands as a record carrying its build; the same binary given with `--binary` is a runtime author's
own build, named by what it reports. Skipped, with the command that builds it, where it is not built (CI does not
build it: the base llama-server already takes its budget)."""

import subprocess
import sys

import pytest

from harness.backends import runtimes
from harness.backends.servers import LLAMA_SERVER_NEXT_ARCHIVE, LocalServer, llama_server_binary
from harness.core import constants
from harness.suites.runtime_conformance import read_records
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.suites.runtime_conformance import driver as rc
from harness.pins.sources import resolve_template

pytestmark = pytest.mark.needs_server_next
TEMPLATE = "Qwen-Qwen2.5-7B-Instruct"      # hermes: llama.cpp parses its call


def test_it_reports_the_version_its_records_carry_and_takes_every_flag_llama_server_is_started_with(tmp_path):
    runtime = runtimes.get("llama-server-next")
    build = runtime.build()
    assert (build["version"], build["build"], build["archive"]) == ("0.6.0-dev", 11434, LLAMA_SERVER_NEXT_ARCHIVE)
    assert runtime.record_name == f"llama-server-next-{build['version']}-b{build['build']}"
    binary = llama_server_binary(archive=LLAMA_SERVER_NEXT_ARCHIVE)
    options = subprocess.run([str(binary), "--help"], capture_output=True, text=True).stdout
    command = LocalServer("llama-server-next", tmp_path / "m.gguf", port=8123).command()
    flags = [a for a in command if a.startswith("--")]
    assert command[0] == str(binary) and "--no-repack" in flags and "--jinja" in flags
    assert [f for f in flags if f not in options.replace(",", " ").split()] == []


def test_a_scripted_reply_through_it_is_recorded_with_its_build(tmp_path):
    ref = resolve_template(TEMPLATE)
    records, _ = rc.run_suite("llama-server-next", "next", [(ref, build_corpus(ref))], tmp_path / "r.jsonl",
                              tmp_path / "work", set(), ["one-call"], ["auto"], log=lambda r: None,
                              build=runtimes.get("llama-server-next").build())
    (record,) = records
    assert record.labels == ["agree"], record.details
    assert record.key["source"].startswith("llama-server /apply-template")
    assert record.build["archive"] == LLAMA_SERVER_NEXT_ARCHIVE and record.build["version"] == "0.6.0-dev"
    assert read_records(tmp_path / "r.jsonl")[0][0].build == record.build


def test_the_same_binary_given_with_binary_is_an_own_build_named_by_what_it_reports(tmp_path):
    binary = llama_server_binary(archive=LLAMA_SERVER_NEXT_ARCHIVE)
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness", "runtime-conformance", "--server", "llama-server",
                           "--binary", str(binary), "--template", TEMPLATE, "--case", "one-call", "--variant", "auto",
                           "--results-dir", str(results)], capture_output=True, text=True, cwd=constants.ROOT)
    assert done.returncode == 0, done.stderr
    (path,) = (results / "runtime-conformance").glob("*.jsonl")
    (record,) = read_records(path)[0]
    assert record.runtime.startswith("llama-server-own-0.6.0-dev-b11434-") and path.stem == record.runtime
    assert record.server == "llama-server" and record.build["archive"] is None
    assert record.runtime.endswith(record.build["sha256"][:12]) and record.labels == ["agree"], record.details
