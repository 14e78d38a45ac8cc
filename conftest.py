"""The project's pytest options and marker skips, at the repository root so `pytest -m live` and the
--harness-* options work from here whatever the test paths given.

Markers (declared in pyproject.toml, --strict-markers): a test that needs something this machine may lack says
so with a marker, and is skipped with the one command that brings it (tests/requirements.py):
  live            runs a real model (the model file: `harness fetch --models ID`, per test)
  needs_binding   llama-cpp-python, the `embedded` extra (`bash scripts/setup.sh`)
  needs_server    llama-server built from the pinned sources (`bash scripts/build_llama_server.sh`)
  needs_server_next llama-server-next, from the newest llama.cpp (`bash scripts/build_llama_server_next.sh`)
  needs_peers     the peers environment with vLLM and SGLang (`bash scripts/setup_peers.sh`)
  needs_vllm_cpu  the vLLM CPU environment (`bash scripts/setup_vllm_cpu.sh`)
  needs_mistralrs the mistral.rs environment (`bash scripts/setup_mistralrs.sh`)
  browser         a headless Chromium (`apt-get install -y chromium`)

Live tests are parametrized over models (sources.json) × scenarios (scenarios/*.yaml) × modes. Options, all
under one prefix:
  --harness-samples N   samples per model × scenario in tests/live/test_live.py (default 1)
  --harness-models IDS  comma-separated model ids (default: every model in sources.json; those not in the
                        cache are skipped with the exact `harness fetch --models ID` command as the reason)
  --harness-modes MODES comma-separated modes (default: native,grammar,fallback)
"""

import pytest

from harness.core.values import MAX_SAMPLES, int_argument
from tests.requirements import MISSING


def pytest_addoption(parser):
    group = parser.getgroup("harness", "live model runs")
    group.addoption("--harness-samples", type=int_argument(1, MAX_SAMPLES), default=1, metavar="N",
                    help=f"samples per model x scenario in live tests, 1 to {MAX_SAMPLES} (default 1)")
    group.addoption("--harness-models", default=None, metavar="IDS",
                    help="comma-separated model ids for live tests (default: all of sources.json)")
    group.addoption("--harness-modes", default=None, metavar="MODES",
                    help="comma-separated modes for live tests (default: native,grammar,fallback)")


def pytest_runtest_setup(item):
    for marker, missing in MISSING.items():
        if item.get_closest_marker(marker) is not None:
            reason = missing()
            if reason:
                pytest.skip(reason)
