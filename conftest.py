"""Live tests: parametrized over models (sources.json) × scenarios (scenarios/*.yaml) × modes.

The `live` marker is declared in pyproject.toml (--strict-markers). Options, all under one prefix:
  --harness-samples N   samples per model × scenario in tests/test_live.py (default 1)
  --harness-models IDS  comma-separated model ids (default: every model in sources.json; those not in the
                        cache are skipped with the exact `harness fetch --models ID` command as the reason)
  --harness-modes MODES comma-separated modes (default: native,grammar,fallback)
"""

import pytest

from harness.run_values import MAX_SAMPLES, int_argument


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
    from harness.modes import parse_modes
    from harness.scenarios import MODES, load_scenarios
    from harness.sources import load_sources

    chosen = metafunc.config.getoption("--harness-models")
    models = chosen.split(",") if chosen else list(load_sources().models)
    modes = parse_modes([metafunc.config.getoption("--harness-modes") or ",".join(MODES)])
    scenarios = [s.name for s in load_scenarios()]
    cases = [pytest.param(m, s, mode, id=f"{m}-{s}-{mode}", marks=pytest.mark.live)
             for m in models for mode in modes for s in scenarios]
    metafunc.parametrize(("live_model_id", "live_scenario_name", "live_mode"), cases)
