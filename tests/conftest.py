"""Shared markers and the live tests' options.

Markers (declared in pyproject.toml, --strict-markers): a test that needs something this machine may lack says
so with a marker, and is skipped with the one command that brings it:
  live            runs a real model (the model file: `harness fetch --models ID`, per test)
  needs_binding   llama-cpp-python in this environment (`bash scripts/setup.sh`)
  needs_server    llama-server built from the pinned sources (`bash scripts/build_llama_server.sh`)
  browser         a headless Chromium (`apt-get install -y chromium`)
A module that imports the binding at its top calls `binding()` (tests/requirements.py) first, so a machine
without it skips the module instead of failing its collection.

Live tests are parametrized over models (sources.json) × scenarios (scenarios/*.yaml) × modes. Options, all
under one prefix:
  --harness-samples N   samples per model × scenario in tests/live/test_live.py (default 1)
  --harness-models IDS  comma-separated model ids (default: every model in sources.json; those not in the
                        cache are skipped with the exact `harness fetch --models ID` command as the reason)
  --harness-modes MODES comma-separated modes (default: native,grammar,fallback)
"""

import pytest
import requirements

from harness.core.values import MAX_SAMPLES, int_argument


def pytest_runtest_setup(item):
    for marker, missing in requirements.MISSING.items():
        if item.get_closest_marker(marker) is not None:
            reason = missing()
            if reason:
                pytest.skip(reason)


def pytest_addoption(parser):
    group = parser.getgroup("harness", "live model runs")
    group.addoption("--harness-samples", type=int_argument(1, MAX_SAMPLES), default=1, metavar="N",
                    help=f"samples per model x scenario in live tests, 1 to {MAX_SAMPLES} (default 1)")
    group.addoption("--harness-models", default=None, metavar="IDS",
                    help="comma-separated model ids for live tests (default: all of sources.json)")
    group.addoption("--harness-modes", default=None, metavar="MODES",
                    help="comma-separated modes for live tests (default: native,grammar,fallback)")


def pytest_generate_tests(metafunc):
    if "live_model_id" not in metafunc.fixturenames:
        return
    from harness.live.modes import parse_modes
    from harness.core.values import MODES
    from harness.evaluation.scenarios import load_scenarios
    from harness.pins.sources import load_sources

    chosen = metafunc.config.getoption("--harness-models")
    models = chosen.split(",") if chosen else list(load_sources().models)
    modes = parse_modes([metafunc.config.getoption("--harness-modes") or ",".join(MODES)])
    scenarios = [s.name for s in load_scenarios()]
    cases = [pytest.param(m, s, mode, id=f"{m}-{s}-{mode}", marks=pytest.mark.live)
             for m in models for mode in modes for s in scenarios]
    metafunc.parametrize(("live_model_id", "live_scenario_name", "live_mode"), cases)
