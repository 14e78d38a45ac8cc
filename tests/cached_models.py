"""The one way a test gets a pinned model file: verified, or the test is skipped with the command that fetches
it. A file that is there but drifted fails the test instead: it would make every result meaningless."""

from pathlib import Path

import pytest

from harness.core.errors import DriftError, SourcesError
from harness.pins.sources import fetch_command, model_path


def cached_model(model_id: str) -> Path:
    try:
        return model_path(model_id)
    except DriftError:
        raise
    except SourcesError:
        pytest.skip(fetch_command(model_id))
