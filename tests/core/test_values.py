"""Every number a user hands a run is checked where it enters, with a message naming where it came from:
file:line:field for scenario YAML, the flag for `harness run` and pytest, the variable for the environment."""

import subprocess
import sys

import pytest

from harness.core.errors import ScenarioError
from harness.core.values import MAX_SAMPLES, MAX_SEED, parse_int, parse_seconds
from harness.evaluation.scenario_files import load_scenarios
from tests.pins.test_fetch import ROOT, run_cli

SCENARIO = """\
name: arithmetic
description: no tool
conversation:
  turns:
    - user: What is 17 times 3?
{extra}"""

BAD_SCENARIO_VALUES = [
    ("sampling: {top_p: 7}", "sampling.top_p", "must be a number in (0, 1], got 7"),
    ("sampling: {top_p: 0}", "sampling.top_p", "must be a number in (0, 1]"),
    ("sampling: {top_p: .nan}", "sampling.top_p", "got nan"),
    ("sampling: {temperature: .nan}", "sampling.temperature", "must be a finite number >= 0"),
    ("sampling: {temperature: .inf}", "sampling.temperature", "got inf"),
    ("sampling: {temperature: -0.5}", "sampling.temperature", "got -0.5"),
    ("sampling: {temperature: hot}", "sampling.temperature", "must be an integer or a number"),
    ("sampling: {min_p: 1.5}", "sampling.min_p", "must be a number in [0, 1]"),
    ("sampling: {min_p: -.inf}", "sampling.min_p", "got -inf"),
    ("sampling: {repeat_penalty: 0}", "sampling.repeat_penalty", "must be a finite number > 0"),
    ("sampling: {repeat_penalty: .nan}", "sampling.repeat_penalty", "got nan"),
    ("sampling: {top_k: -1}", "sampling.top_k", "must be an integer from 0"),
    ("sampling: {top_k: 4.5}", "sampling.top_k", "must be an integer"),
    ("sampling: {top_k: 99999999999}", "sampling.top_k", "got 99999999999"),
    ("sampling: {max_tokens: 0}", "sampling.max_tokens", "must be an integer from 1 to 4096"),
    ("sampling: {max_tokens: 1000000}", "sampling.max_tokens", "got 1000000"),
    ("sampling: {max_tokens: true}", "sampling.max_tokens", "must be an integer"),
    ("samples: 1e12", "samples", 'must be an integer, got "1e12"'),
    ("samples: 1.0e+12", "samples", "must be an integer"),
    ("samples: 1000000000000", "samples", f"must be an integer from 1 to {MAX_SAMPLES}, got 1000000000000"),
    ("samples: 0", "samples", "must be an integer from 1"),
    ("samples: -3", "samples", "got -3"),
    ("max_steps: 0", "max_steps", "must be an integer from 1 to 50"),
    ("max_steps: 10000", "max_steps", "got 10000"),
]


@pytest.mark.parametrize("extra, field, message", BAD_SCENARIO_VALUES)
def test_a_bad_scenario_value_names_file_line_and_field(tmp_path, extra, field, message):
    path = tmp_path / "arithmetic.yaml"
    path.write_text(SCENARIO.format(extra=extra + "\n"))
    with pytest.raises(ScenarioError) as err:
        load_scenarios(tmp_path)
    assert f"{path}:6: {field}: " in str(err.value) and message in str(err.value), str(err.value)


def test_good_values_at_the_edges_load(tmp_path):
    extra = ("sampling: {top_p: 1, temperature: 0, min_p: 0, top_k: 0, repeat_penalty: 1.0, max_tokens: 4096}\n"
             f"samples: {MAX_SAMPLES}\nmax_steps: 50\n")
    (tmp_path / "arithmetic.yaml").write_text(SCENARIO.format(extra=extra))
    (scenario,) = load_scenarios(tmp_path)
    assert scenario.name == "arithmetic" and scenario.sampling["top_p"] == 1 and scenario.samples == MAX_SAMPLES


def test_parsers_refuse_what_is_not_a_plain_number():
    for text in ["abc", "", "1.5", "0x10", "True", True, "1e3"]:
        with pytest.raises(ValueError):
            parse_int(text, 1, 10)
    assert parse_int(" 7 ", 1, 10) == 7
    for text in ["abc", "nan", "inf", "-1", "0", "1e99"]:
        with pytest.raises(ValueError):
            parse_seconds(text)
    assert parse_seconds("0.5") == 0.5


@pytest.mark.parametrize("args, message", [
    (["--samples", "1000000000000"], f"argument --samples: must be an integer from 1 to {MAX_SAMPLES}"),
    (["--samples", "0"], "argument --samples: must be an integer from 1"),
    (["--samples", "1e12"], "argument --samples: must be an integer from 1 to 1000, got '1e12'"),
    (["--seed", "-1"], f"argument --seed: must be an integer from 0 to {MAX_SEED}, got -1"),
    (["--seed", str(2**40)], "argument --seed: must be an integer from 0"),
    (["--threads", "abc"], "argument --threads: must be an integer from 1 to 256, got 'abc'"),
    (["--threads", "0"], "argument --threads: must be an integer from 1"),
])
def test_a_bad_run_flag_is_a_usage_error(tmp_path, args, message):
    done = run_cli(["run", *args], {}, tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", "100000"])
def test_a_bad_harness_threads_is_named_before_any_work(tmp_path, value):
    env = {"HARNESS_THREADS": value, "HARNESS_ROOT": str(tmp_path / "nowhere")}
    done = run_cli(["run"], env, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"environment variable HARNESS_THREADS={value!r}: must be an integer from 1 to 256" in done.stderr
    assert run_cli(["--help"], env, tmp_path).returncode == 0     # a bad setting never breaks --help


def test_a_bad_harness_samples_option_is_a_pytest_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "--harness-samples", "0", "--collect-only", "-q",
                           "-p", "no:cacheprovider", str(ROOT / "tests" / "backends" / "test_standin.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "argument --harness-samples: must be an integer from 1 to 1000, got 0" in done.stderr
