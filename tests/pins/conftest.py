"""Fixtures the download tests share: a real Hub-speaking HTTP server on 127.0.0.1 and an empty cache."""

import pytest

from tests.hub_server import HubServer


@pytest.fixture
def hub():
    with HubServer() as server:
        yield server


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"
