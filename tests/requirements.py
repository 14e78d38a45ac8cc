"""What a test may need that a machine may lack, and the one command that brings each (conftest.py at the
repository root turns the markers into skips with these reasons)."""

import shutil

import pytest

from harness.core import constants
from harness.core.environments import ENVIRONMENTS
from harness.core.errors import MissingExtraError
from harness.core.extras import require

SETUP = "bash scripts/setup.sh"
INSTALL_CHROMIUM = "apt-get install -y chromium"


def missing_binding() -> str | None:
    try:
        require("llama_cpp", "this test")
    except MissingExtraError as exc:
        return str(exc)
    return None


def missing_server() -> str | None:
    from harness.backends.servers import llama_server_binary
    from harness.core.errors import ServerStartError

    try:
        llama_server_binary()
    except ServerStartError as exc:
        return str(exc)     # names the command that builds it
    return None


def missing_server_next() -> str | None:
    from harness.backends.servers import LLAMA_SERVER_NEXT_ARCHIVE, llama_server_binary
    from harness.core.errors import ServerStartError

    try:
        llama_server_binary(archive=LLAMA_SERVER_NEXT_ARCHIVE)
    except ServerStartError as exc:
        return str(exc)     # names bash scripts/build_llama_server_next.sh
    return None


def missing_browser() -> str | None:
    return None if shutil.which("chromium") else f"chromium is not installed: {INSTALL_CHROMIUM}"


MISSING = {"needs_binding": missing_binding, "needs_server": missing_server, "needs_server_next": missing_server_next,
           "browser": missing_browser}
# The side environments' markers, from the one table that says where each is and what builds it.
MISSING.update({env.marker: env.missing for env in ENVIRONMENTS.values() if env.marker})


def binding():
    """At the top of a module that imports the binding (directly or through harness.backends.embedded): skip
    the whole module, with the command that installs it, where llama-cpp-python is missing."""
    reason = missing_binding()
    if reason:
        pytest.skip(reason, allow_module_level=True)


def bfcl_checker_python():
    """BFCL's checker environment's python, built here when it is missing (seconds: one wheel and filelock); a
    build that fails skips the caller with the script's last words."""
    import subprocess

    env = ENVIRONMENTS["bfcl"]
    if env.python() is None:
        built = subprocess.run(["bash", str(constants.ROOT / env.script)], capture_output=True, text=True)
        if built.returncode != 0:
            pytest.skip(f"{env.setup_command} failed: {built.stderr.strip()[-300:]}")
    return env.python()
