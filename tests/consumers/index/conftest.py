"""Fixtures of the ``blackbox query`` tests (see ``query_testkit``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from query_testkit import Env, make_app, make_env


@pytest.fixture
def app() -> typer.Typer:
    return make_app()


@pytest.fixture
def env(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Env]:
    yield from make_env(tmp_path, tmp_path_factory, monkeypatch)
