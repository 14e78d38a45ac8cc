"""`harness run` as a new user first meets it: --endpoint names the flags it misses and takes a pinned model's
template, a mistyped URL gets the one it meant, a scenario file elsewhere is taken by its path, a broken
scenario file does not stop a run of others, and the estimate after a resume counts only new samples."""

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.suites.run_loop import LineProgress
from harness.core.errors import ScenarioError
from harness.evaluation.scenario_files import load_scenarios

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import HostileServer, completion  # noqa: E402

PINNED = "qwen2.5-coder-0.5b-instruct-q4_k_m"


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("given,missing", [
    ([], "also needs --served-model NAME and --template PATH_OR_ID (or --model ID of the pinned model it serves)"),
    (["--served-model", "someone/else"], "also needs --template PATH_OR_ID (or --model ID"),
])
def test_endpoint_names_the_flags_it_misses(tmp_path, given, missing):
    done = harness("run", "--endpoint", "http://127.0.0.1:9", *given, "--results-dir", tmp_path)
    assert done.returncode == 2 and missing in done.stderr, done.stderr
    assert "--endpoint URL" not in done.stderr


@pytest.mark.parametrize("how", [["--model", PINNED], []])
def test_endpoint_takes_the_template_of_the_pinned_model_it_serves(tmp_path, how):
    with HostileServer(completion("Hello!")) as server:
        done = harness("run", "--endpoint", server.url, "--served-model", PINNED, *how, "--scenario", "greeting",
                       "--samples", "1", "--results-dir", tmp_path, "--retries", "0")
    assert done.returncode == 0, done.stderr
    assert f"--template gguf-{PINNED}: the template pinned for {PINNED}" in done.stderr
    # --model names the pin the server runs: nothing is run in this process.
    assert [p.name for p in (tmp_path / "transcripts").iterdir()] == [f"{PINNED}--served.jsonl"]
    model = json.loads((tmp_path / "transcripts" / f"{PINNED}--served.jsonl").read_text().splitlines()[0])
    assert model["template"]["pinned_id"] == f"gguf-{PINNED}"


def test_a_mistyped_scheme_gets_the_url_it_meant(tmp_path):
    done = harness("run", "--endpoint", "htp:/bad url", "--served-model", PINNED, "--model", PINNED,
                   "--results-dir", tmp_path)
    assert done.returncode == 2 and "did you mean http://bad url? A URL holds no spaces." in done.stderr, done.stderr
    assert "http://htp:" not in done.stderr


SCENARIO = """\
name: {name}
description: A question kept outside the checkout.
tools: [get_time]
conversation:
  turns:
    - user: What time is it?
      expect: {{tool: get_time}}
"""


def test_a_scenario_file_outside_the_checkout_is_taken_by_its_path(tmp_path):
    mine = tmp_path / "elsewhere" / "mine.yaml"
    mine.parent.mkdir()
    mine.write_text(SCENARIO.format(name="my-clock"))
    with HostileServer(completion('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')) as server:
        done = harness("run", "--endpoint", server.url, "--served-model", PINNED, "--model", PINNED, "--scenario",
                       mine, "--samples", "1", "--results-dir", tmp_path / "results", "--retries", "0")
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "results" / "transcripts" / f"{PINNED}--served.jsonl").read_text().splitlines()
    sample = json.loads(lines[-1])
    assert sample["scenario"]["name"] == "my-clock" and sample["recorded_verdicts"]["right_tool"] is True


def test_a_scenario_path_that_is_not_there_or_takes_a_shipped_name_is_refused(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenarios(names=[str(tmp_path / "nope.yaml")])
    (tmp_path / "greeting.yaml").write_text(SCENARIO.format(name="greeting"))
    with pytest.raises(ScenarioError, match="'greeting' is a different scenario in .*give this one a name of its own"):
        load_scenarios(names=[str(tmp_path / "greeting.yaml")])


def test_a_broken_scenario_file_does_not_stop_a_run_of_others(tmp_path):
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "tools.yaml").write_text(textwrap.dedent("""\
        tools:
          - name: get_time
            description: Get the time.
            parameters: {type: object, properties: {}}
            returns: {time: "14:37"}
        """))
    (tmp_path / "clock.yaml").write_text(SCENARIO.format(name="clock"))
    (tmp_path / "broken.yaml").write_text("name: broken\ndescription: [unclosed\n")
    (tmp_path / "typo.yaml").write_text(SCENARIO.format(name="typo").replace("tools:", "toolz:"))
    assert [s.name for s in load_scenarios(tmp_path, names=["clock"])] == ["clock"]
    # Asked for, or all of them: the broken file's error, with its place.
    with pytest.raises(ScenarioError, match="typo.yaml:3: toolz: unknown field"):
        load_scenarios(tmp_path, names=["clock", "typo"])
    with pytest.raises(ScenarioError, match="broken.yaml"):
        load_scenarios(tmp_path, names=["broken"])
    with pytest.raises(ScenarioError):
        load_scenarios(tmp_path)


def test_the_estimate_after_a_resume_counts_only_new_samples():
    out = io.StringIO()
    progress = LineProgress(10, stream=out)
    progress.set_description("m")
    progress.skip(8)
    progress.update(1)
    progress.update(1)
    lines = out.getvalue().splitlines()
    assert lines[0] == "harness run: m: 8 sample(s) already recorded, skipped"
    assert [line.split(" (")[0] for line in lines[1:]] == ["harness run: 1/2 samples", "harness run: 2/2 samples"]
    assert (progress.ran, progress.skipped) == (2, 8)
