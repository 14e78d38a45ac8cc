"""Arguments are read exactly: no prefix matching, and names that become file names are checked whole."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    # A wide terminal, so help text is not wrapped inside a hyphenated name.
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, COLUMNS="1000"))
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


def test_runtime_check_help_names_every_label_and_the_strict_path():
    from harness.suites.runtime_check.judging import LABELS

    code, out, _ = run("runtime-check", "--help")
    text = " ".join(out.split())
    assert code == 0 and all(label in text for label in LABELS)
    assert "/completion," in text and "/detokenize" in text and "--json" in text


def test_every_command_that_reports_takes_json():
    # docs/commands.md says so; a command added without it fails here.
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    reporting = {"detect", "parse", "conformance", "verify", "fetch", "pin-template", "run", "report", "score",
                 "list", "runtime-check"}
    missing = [name for name in reporting if "--json" not in sub.choices[name]._option_string_actions]
    assert not missing


def test_verify_prints_one_summary_line_and_each_drifted_file(tmp_path):
    import shutil

    shutil.copy(ROOT / "sources.json", tmp_path / "sources.json")
    shutil.copytree(ROOT / "templates", tmp_path / "templates")
    env = dict(os.environ, HARNESS_ROOT=str(tmp_path))

    def verify(*flags):
        return subprocess.run([sys.executable, "-m", "harness", "verify", *flags], capture_output=True, text=True,
                              env=env)

    quiet = verify()
    assert quiet.returncode == 0 and len(quiet.stdout.splitlines()) == 1 and " ok (" in quiet.stdout
    assert sum(line.startswith("ok ") for line in verify("-v").stdout.splitlines()) > 1
    (tmp_path / "templates" / "Qwen-Qwen3-0.6B.jinja").write_text("edited", encoding="utf-8")
    drift = verify()
    assert drift.returncode == 1
    assert [line.split()[:3] for line in drift.stdout.splitlines()[:-1]] == [["drift", "template", "Qwen-Qwen3-0.6B"]]
