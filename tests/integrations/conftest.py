"""Fixtures for the SDK integrations: a real local model-provider server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from provider_server import ProviderServer


@pytest.fixture
def provider_server() -> Iterator[ProviderServer]:
    """A fresh server per test (scripted replies, recorded requests); see ``provider_server.py``."""
    with ProviderServer() as server:
        yield server
