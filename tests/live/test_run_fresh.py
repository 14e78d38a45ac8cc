"""The main command on a fresh clone: a run into the committed folder that finds everything recorded says so
and how to run afresh; a run into a folder of its own is compared with the committed samples at the end."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scripted import PROFILES, Script, Vocab, build_standin

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.needs_binding
def test_a_run_says_what_ran_and_compares_a_fresh_folder_with_the_committed_one(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(ROOT / "sources.json", tree / "sources.json")
    for folder in ("templates", "scenarios"):
        shutil.copytree(ROOT / folder, tree / folder)
    gguf = tmp_path / "standin.gguf"
    build_standin(gguf, "qwen2.5", [Script("<|im_end|>", ("Hello",))], vocab=Vocab(PROFILES["qwen2.5"]))
    env = dict(os.environ, HARNESS_ROOT=str(tree))

    def run(*extra):
        done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--scenario", "greeting",
                               "--samples", "1", "--mode", "native", *extra], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = run()                                          # the "committed" results of this tree
    assert "ran 1" in first and "nothing ran" not in first
    again = run()
    assert "ran 0, already recorded 1" in again
    assert "nothing ran: every sample asked for is already recorded" in again
    assert "harness run --results-dir runs/mine" in again
    fresh = run("--results-dir", str(tmp_path / "mine"))
    assert "ran 1" in fresh, fresh
    assert ("standin native: all checks 0/1 here, 0/1 in results/; 0 sample(s) judged differently; 0 wrote other "
            "replies") in fresh, fresh
    assert f"next: harness report --results-dir {tmp_path / 'mine'}" in fresh
