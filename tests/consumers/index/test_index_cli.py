"""``blackbox trends`` / ``blackbox query`` and ``open_index`` against a chdb index named by settings."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from index_testkit import make_fleet, truth
from typer.testing import CliRunner

from consumers.app.settings import load_service_settings
from consumers.commands import index as index_commands
from consumers.commands.index import parse_when
from consumers.index import TRENDS, ChdbIndex, chdb_open_path, decision_rows, open_index
from consumers.ingest.store import insert_captures
from schemas.errors import IndexError_

WIDE = {"COLUMNS": "200"}  # rich wraps tables to the terminal width


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    index_commands.register(app)

    @app.callback()
    def _root() -> None:  # keeps "trends" / "query" as subcommands
        """test app"""

    return app


@pytest.fixture
def agent(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fleet under a unique agent id in the settings' chdb index (database ``blackbox``)."""
    path = chdb_open_path() or str(tmp_path_factory.mktemp("index-cli"))
    monkeypatch.delenv("BLACKBOX_CLICKHOUSE_URL", raising=False)
    monkeypatch.setenv("BLACKBOX_CHDB_PATH", path)
    agent = f"agt_cli_{uuid.uuid4().hex[:8]}"
    fleet = make_fleet(60, seed=4)
    for c in fleet.captures:
        c["agentId"] = agent
        c["decisionId"] = f"{agent}_{c['decisionId']}"
    index = open_index(load_service_settings())
    try:
        assert isinstance(index, ChdbIndex) and index.database == "blackbox"
        insert_captures(index, [decision_rows(c) for c in fleet.captures])
    finally:
        index.close()
    yield agent


def test_trends_json_matches_ground_truth(app: typer.Typer, agent: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            "trends",
            "stop_reasons",
            "--agent",
            agent,
            "--since",
            "2026-07-01T00:00:00Z",
            "--until",
            "2026-07-11",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    fleet = make_fleet(60, seed=4)
    fleet.failure_flags.clear()  # the fixture indexes captures only: no flags, no quarantine
    fleet.quarantined.clear()
    want = truth(fleet, "stop_reasons", datetime(2026, 7, 1, tzinfo=UTC), datetime(2026, 7, 11, tzinfo=UTC))
    got = json.loads(result.output)
    assert [(r["stop_reason"], r["decisions"], r["failures"]) for r in got] == [
        (r["stop_reason"], r["decisions"], r["failures"]) for r in want
    ]


def test_trends_table_and_by(app: typer.Typer, agent: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            "trends",
            "failure_rate",
            "--agent",
            agent,
            "--since",
            "2026-07-01",
            "--until",
            "2026-07-11",
            "--by",
            "stop_reason",
        ],
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    assert "failure_rate" in result.output and "v4.7" in result.output and "stop_reason" in result.output
    days = CliRunner().invoke(
        app,
        ["trends", "volume", "--agent", agent, "--since", "2026-07-01", "--until", "2026-07-11", "--json"],
    )
    assert {r["day"] for r in json.loads(days.output)} == {f"2026-07-{d:02d}" for d in range(1, 11)}


def test_trends_list(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["trends", "--list", "--json"])
    assert result.exit_code == 0
    assert [t["name"] for t in json.loads(result.output)] == list(TRENDS)
    table = CliRunner().invoke(app, ["trends", "--list"], env=WIDE)
    assert all(name in table.output for name in TRENDS)


def test_trends_refuses_bad_input(app: typer.Typer, agent: str) -> None:
    unknown = CliRunner().invoke(app, ["trends", "nope", "--since", "2026-07-01", "--until", "2026-07-11"])
    assert isinstance(unknown.exception, IndexError_)
    bad_by = CliRunner().invoke(
        app, ["trends", "volume", "--by", "decision_id", "--since", "2026-07-01", "--until", "2026-07-11"]
    )
    assert isinstance(bad_by.exception, IndexError_)
    bad_time = CliRunner().invoke(app, ["trends", "volume", "--since", "last tuesday"])
    assert bad_time.exit_code == 2 and "duration" in bad_time.output


def test_query_json_and_read_only(app: typer.Typer, agent: str) -> None:
    result = CliRunner().invoke(
        app,
        [
            "query",
            f"SELECT count() AS n, min(captured_at) AS first FROM decisions FINAL WHERE agent_id = '{agent}'",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["n"] == 60
    assert json.loads(result.output)[0]["first"].startswith("2026-07-01T") and json.loads(result.output)[0][
        "first"
    ].endswith("Z")
    table = CliRunner().invoke(
        app,
        [
            "query",
            f"SELECT agent_id, count() AS n FROM decisions FINAL WHERE agent_id = '{agent}' GROUP BY agent_id",
        ],
        env=WIDE,
    )
    assert agent in table.output and "60" in table.output
    write = CliRunner().invoke(app, ["query", f"ALTER TABLE decisions DELETE WHERE agent_id = '{agent}'"])
    assert isinstance(write.exception, IndexError_) and "ALTER is not allowed" in str(write.exception)
    again = CliRunner().invoke(
        app, ["query", f"SELECT count() AS n FROM decisions FINAL WHERE agent_id = '{agent}'", "--json"]
    )
    assert json.loads(again.output) == [{"n": 60}]


def test_parse_when() -> None:
    now = datetime(2026, 7, 10, 12, tzinfo=UTC)
    assert parse_when("7d", now=now) == now - timedelta(days=7)
    assert parse_when("90m", now=now) == now - timedelta(minutes=90)
    assert parse_when("now", now=now) == now
    assert parse_when("2026-07-01T00:00:00+02:00", now=now) == datetime(2026, 6, 30, 22, tzinfo=UTC)
    assert parse_when("2026-07-01", now=now) == datetime(2026, 7, 1, tzinfo=UTC)


def test_open_index_picks_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = chdb_open_path() or str(tmp_path / "idx")
    settings = load_service_settings(chdb_path=path, clickhouse_url=None)
    db = f"t_{uuid.uuid4().hex[:10]}"
    index = open_index(settings, database=db)
    try:
        assert isinstance(index, ChdbIndex) and index.database == db
        assert index.query("SELECT count() AS n FROM decisions") == [{"n": 0}]
        index.command(f"DROP DATABASE {db} SYNC")
    finally:
        index.close()
