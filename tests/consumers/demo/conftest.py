"""The demo runs once per session; its data directory is then explored by the README tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_cli import run


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    data_dir = tmp_path_factory.mktemp("demo") / "blackbox-demo"
    output = run(["demo", "--dir", str(data_dir), "--decisions", "900", "--days", "9"])
    return data_dir, output
