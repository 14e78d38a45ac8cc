"""What the tests share beyond the project's options (conftest.py at the repository root): this folder on the
path, so a test imports its helpers by name (requirements, cached_models, chromium), and the live tests'
parameters.

A module that imports the binding at its top calls `binding()` (tests/requirements.py) first, so a machine
without it skips the module instead of failing its collection.

tests/live/test_live.py runs every model (sources.json, or --harness-models) × scenario (scenarios/*.yaml) ×
mode (--harness-modes), each case marked live.
"""

import pytest


def pytest_generate_tests(metafunc):
    if "live_model_id" not in metafunc.fixturenames:
        return
    from harness.core.values import MODES
    from harness.evaluation.scenario_files import load_scenarios
    from harness.live.modes import parse_modes
    from harness.pins.sources import load_sources

    chosen = metafunc.config.getoption("--harness-models")
    models = chosen.split(",") if chosen else list(load_sources().models)
    modes = parse_modes([metafunc.config.getoption("--harness-modes") or ",".join(MODES)])
    scenarios = [s.name for s in load_scenarios()]
    cases = [pytest.param(m, s, mode, id=f"{m}-{s}-{mode}", marks=pytest.mark.live)
             for m in models for mode in modes for s in scenarios]
    metafunc.parametrize(("live_model_id", "live_scenario_name", "live_mode"), cases)
