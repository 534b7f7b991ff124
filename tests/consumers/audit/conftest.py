"""One ingested data directory per test (the access log and grants are per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from audit_world import World, make_world


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for name in ("BLACKBOX_CALLER", "BLACKBOX_SCOPE", "BLACKBOX_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path / "bb"))
    yield make_world(tmp_path)
