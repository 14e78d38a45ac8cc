"""Arguments are read exactly: no prefix matching, and names that become file names are checked whole."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=ROOT)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("argv", [
    ["run", "--temp", "0"],                     # once read as --template 0
    ["run", "--samp", "1"],
    ["parse", "--templ", "Qwen-Qwen3-0.6B"],
    ["runtime-check", "--endpoint", "http://127.0.0.1:9", "--served", "m", "--template", "t", "--runtime", "r"],
])
def test_an_abbreviated_flag_is_refused(argv):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2


def test_every_subcommand_refuses_abbreviations():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert all(p.allow_abbrev is False for p in sub.choices.values())


@pytest.mark.parametrize("command", [
    ["runtime-check", "--endpoint", "http://127.0.0.1:9", "--served-model", "m", "--template", "Qwen-Qwen3-0.6B",
     "--retries", "0"],
    ["runtime-conformance", "--endpoint", "http://127.0.0.1:9", "--served-model", "m", "--manifest", "none.json"],
], ids=["runtime-check", "runtime-conformance"])
def test_a_runtime_name_ending_in_a_newline_is_refused(command, tmp_path):
    # "$" in the old check matched before a final newline, and the name became a file name with one in it.
    code, _, err = run(*command, "--runtime", "mine\n", "--results-dir", str(tmp_path))
    assert code == 2 and "--runtime 'mine\\n'" in err, err
    assert not any(tmp_path.rglob("*"))
