"""The code passes ruff with the rules configured in pyproject.toml ([tool.ruff]); a finding fails with ruff's
own report."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["harness", "tests", "tools", "benchmarks", "scripts", "conftest.py"]


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed: it is in the test extra (bash scripts/setup.sh, or "
                    "pip install -e '.[test]')")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *CHECKED], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
