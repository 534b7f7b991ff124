"""What the ``blackbox query`` tests share: the settings' chdb index holding one fresh agent's decisions,
a fake private key on disk, the CLI app, and helpers to run a query and read its access-log rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from index_testkit import make_fleet
from typer.testing import CliRunner, Result

from consumers.app.settings import load_service_settings
from consumers.commands import index as index_commands
from consumers.index import chdb_open_path, decision_rows, open_index
from consumers.index.confined import QueryRefused
from consumers.ingest.store import insert_captures

SECRET = "-----BEGIN PRIVATE KEY----- not-really-a-key-but-secret"


def make_app() -> typer.Typer:
    app = typer.Typer()
    index_commands.register(app)

    @app.callback()
    def _root() -> None:  # keeps "query" a subcommand
        """test app"""

    return app


@dataclass(frozen=True)
class Env:
    caller: str
    agent: str
    key_file: Path
    tmp: Path
    chdb_path: str


def make_env(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Env]:
    """The settings' chdb index (database ``blackbox``) holding 60 decisions of a fresh agent, a fake
    private key on disk, and a unique caller so this test's access_log rows can be found."""
    path = chdb_open_path() or str(tmp_path_factory.mktemp("index-query"))
    monkeypatch.delenv("BLACKBOX_CLICKHOUSE_URL", raising=False)
    monkeypatch.delenv("BLACKBOX_QUERY_CLICKHOUSE_URL", raising=False)
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_CHDB_PATH", path)
    caller = f"qtest-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("BLACKBOX_CALLER", caller)
    agent = f"agt_q_{uuid.uuid4().hex[:8]}"
    fleet = make_fleet(60, seed=5)
    for c in fleet.captures:
        c["agentId"] = agent
        c["decisionId"] = f"{agent}_{c['decisionId']}"
    index = open_index(load_service_settings())
    try:
        insert_captures(index, [decision_rows(c) for c in fleet.captures])
    finally:
        index.close()
    key_file = tmp_path / "signing.key"
    key_file.write_text(SECRET + "\n", encoding="utf-8")
    yield Env(caller=caller, agent=agent, key_file=key_file, tmp=tmp_path, chdb_path=path)


def run_query_cli(app: typer.Typer, sql: str, *args: str) -> Result:
    return CliRunner().invoke(app, ["query", sql, *args])


def log_rows(caller: str) -> list[dict[str, object]]:
    index = open_index(load_service_settings())
    try:
        return index.query(
            "SELECT action, outcome, reason, detail, scope, decision_id FROM access_log "
            "WHERE caller = {c:String} ORDER BY at, event_id",
            {"c": caller},
        )
    finally:
        index.close()


def assert_refused(result: Result, fragment: str) -> None:
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, QueryRefused), repr(result.exception)
    message = str(result.exception)
    assert message.startswith("query refused: ") and "\n" not in message
    assert fragment in message, message
    assert SECRET not in result.output
