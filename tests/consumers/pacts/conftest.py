"""The demo's agent, recorded into a fresh data directory with a pact file, then ingested by the real
``blackbox consume`` (spool transport, chdb index, a worker process): once per session, shared by the
pact and finding tests."""

from __future__ import annotations

import pytest
from pact_world import PactWorld, make_world


@pytest.fixture(scope="session")
def pact_world(tmp_path_factory: pytest.TempPathFactory) -> PactWorld:
    return make_world(tmp_path_factory.mktemp("pacts") / "data")
