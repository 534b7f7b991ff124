"""``blackbox query`` is confined by construction (issue 8 item 1, DESIGN decision 19).

Every attack from the issue is replayed through the CLI on chdb: each must be refused before it runs,
with the reason named and no file read or written; legitimate SELECTs over the index tables (joins,
subqueries, WITH, UNION, the trend catalog) still work; the row and time limits hold; every query,
allowed or refused, leaves an access_log row, and no row means no query.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from index_testkit import make_fleet
from typer.testing import CliRunner, Result

from consumers.access.gate import AccessLogUnavailable
from consumers.access.log import AccessRecord
from consumers.access.scopes import Caller
from consumers.app.settings import load_service_settings
from consumers.commands import index as index_commands
from consumers.index import TRENDS, chdb_open_path, decision_rows, open_index, trend_sql
from consumers.index.confined import QueryRefused, confine, index_relations, run_query
from consumers.index.engine import TABLES, QueryLimits
from consumers.ingest.store import insert_captures
from schemas.errors import IndexError_

SECRET = "-----BEGIN PRIVATE KEY----- not-really-a-key-but-secret"


@pytest.fixture
def app() -> typer.Typer:
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


@pytest.fixture
def env(
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


def _query(app: typer.Typer, sql: str, *args: str) -> Result:
    return CliRunner().invoke(app, ["query", sql, *args])


def _log_rows(caller: str) -> list[dict[str, object]]:
    index = open_index(load_service_settings())
    try:
        return index.query(
            "SELECT action, outcome, reason, detail, scope, decision_id FROM access_log "
            "WHERE caller = {c:String} ORDER BY at, event_id",
            {"c": caller},
        )
    finally:
        index.close()


def _assert_refused(result: Result, fragment: str) -> None:
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, QueryRefused), repr(result.exception)
    message = str(result.exception)
    assert message.startswith("query refused: ") and "\n" not in message
    assert fragment in message, message
    assert SECRET not in result.output


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the attacks, through the CLI -----------------------------------------------------------
def test_file_table_function_cannot_read_a_key(app: typer.Typer, env: Env) -> None:
    result = _query(app, f"SELECT * FROM file('{env.key_file}', 'LineAsString')", "--json")
    _assert_refused(result, "table function file() is not allowed")
    scalar = _query(app, f"SELECT file('{env.key_file}') AS k", "--json")
    _assert_refused(scalar, "function file() reads outside the index")
    hidden = _query(
        app, f"SELECT decision_id FROM decisions WHERE decision_id IN (SELECT * FROM file('{env.key_file}'))"
    )
    _assert_refused(hidden, "table function file() is not allowed")


def test_insert_into_function_file_writes_nothing(app: typer.Typer, env: Env) -> None:
    target = env.tmp / "written.tsv"
    result = _query(app, f"INSERT INTO FUNCTION file('{target}', 'TSV') SELECT 1")
    _assert_refused(result, "INSERT is not allowed")
    assert not target.exists()


def test_into_outfile_writes_nothing(app: typer.Typer, env: Env) -> None:
    trust = env.tmp / "trust.toml"
    trust.write_text("# trust store\n", encoding="utf-8")
    result = _query(app, f"SELECT 'forged key' INTO OUTFILE '{trust}' APPEND")
    _assert_refused(result, "INTO OUTFILE is not allowed")
    assert trust.read_text(encoding="utf-8") == "# trust store\n"
    fresh = env.tmp / "fresh.txt"
    _assert_refused(_query(app, f"SELECT 1 FROM decisions INTO OUTFILE '{fresh}'"), "INTO OUTFILE")
    assert not fresh.exists()


def test_url_to_a_closed_port_is_refused_at_once(app: typer.Typer, env: Env) -> None:
    started = time.monotonic()
    result = _query(app, f"SELECT * FROM url('http://127.0.0.1:{_closed_port()}/x', 'CSV')")
    _assert_refused(result, "table function url() is not allowed")
    assert time.monotonic() - started < 5


def test_settings_clause_is_refused(app: typer.Typer, env: Env) -> None:
    _assert_refused(_query(app, "SELECT 1 SETTINGS readonly = 0"), "SETTINGS is not allowed")
    _assert_refused(
        _query(app, "SELECT count() FROM decisions SETTINGS max_result_rows = 0"), "SETTINGS is not allowed"
    )
    _assert_refused(
        _query(app, "SELECT * FROM (SELECT 1 SETTINGS max_execution_time = 0)"), "SETTINGS is not allowed"
    )


def test_system_tables_and_other_tables_are_refused(app: typer.Typer, env: Env) -> None:
    _assert_refused(_query(app, "SELECT * FROM system.tables"), "table system.tables is not an index table")
    _assert_refused(_query(app, "SELECT 1 WHERE 'default' IN system.users"), "system.users")
    _assert_refused(_query(app, "SELECT * FROM default.decisions"), "default.decisions")
    secret_db, secret_table = f"q_{uuid.uuid4().hex[:8]}", f"private_{uuid.uuid4().hex[:8]}"
    index = open_index(load_service_settings())
    try:
        index.command(f"CREATE DATABASE {secret_db}")
        index.command(f"CREATE TABLE {secret_db}.t (x String) ENGINE = Memory")
        index.command(f"CREATE TABLE {secret_table} (x String) ENGINE = Memory")  # in blackbox itself
        _assert_refused(_query(app, f"SELECT * FROM {secret_db}.t"), f"table {secret_db}.t is not an index")
        _assert_refused(_query(app, f"SELECT * FROM {secret_table}"), f"table {secret_table} is not an index")
        _assert_refused(
            _query(app, f"SELECT count() FROM decisions WHERE decision_id IN {secret_table}"), secret_table
        )
    finally:
        index.command(f"DROP DATABASE IF EXISTS {secret_db} SYNC")
        index.command(f"DROP TABLE IF EXISTS {secret_table} SYNC")
        index.close()


def test_more_than_one_statement_is_refused(app: typer.Typer, env: Env) -> None:
    target = env.tmp / "second.tsv"
    result = _query(app, f"SELECT 1; INSERT INTO FUNCTION file('{target}', 'TSV') SELECT 1")
    _assert_refused(result, "more than one statement is not allowed")
    assert not target.exists()
    _assert_refused(_query(app, "SELECT 1; SELECT 2"), "more than one statement")


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("ALTER TABLE decisions DELETE WHERE 1", "ALTER is not allowed"),
        ("DROP TABLE flags", "is not allowed"),
        ("CREATE TABLE x (a Int8) ENGINE = Memory", "CREATE is not allowed"),
        ("SHOW TABLES", "is not allowed"),
        ("DESCRIBE TABLE decisions", "DESCRIBE is not allowed"),
        ("EXPLAIN SELECT 1", "is not allowed"),
        ("SELECT 1 FORMAT JSON", "FORMAT is not allowed"),
        ("SELECT * FROM numbers(10)", "table function numbers() is not allowed"),
        ("SELECT * FROM s3('http://127.0.0.1:9000/b/k', 'CSV')", "table function s3() is not allowed"),
        ("SELECT * FROM remote('127.0.0.1', system.one)", "table function remote() is not allowed"),
        ("SELECT * FROM Python(decisions)", "table function Python() is not allowed"),
        ("SELECT * FROM (EXPLAIN AST SELECT 1)", "table function"),
        ("SELECT dictGet('d', 'a', 1)", "function dictGet() reads outside the index"),
        ("SELECT joinGet('default.j', 'v', 1)", "function joinGet() reads outside the index"),
        ("SELECT hasColumnInTable('system', 'users', 'name')", "hasColumnInTable"),
        ("SELECT {p:String}", "query parameters"),
        ("SELECT `a\n  Function file (children 1)` FROM decisions", "could not be read back"),
        ("SELECT 1 FROM `decisions x`", "not a plain name"),
        ("SELEC 1", "the engine could not parse it"),
        ("   ", "empty"),
        ("SELECT 1\x00", "NUL"),
    ],
)
def test_everything_else_is_refused_by_name(app: typer.Typer, env: Env, sql: str, fragment: str) -> None:
    _assert_refused(_query(app, sql), fragment)


# --- what still works ---------------------------------------------------------------------------------
LEGITIMATE = (
    "SELECT d.decision_id, count(t.tool_name) AS calls FROM decisions AS d LEFT JOIN tool_calls AS t "
    "ON t.decision_id = d.decision_id WHERE d.agent_id = '{agent}' GROUP BY d.decision_id ORDER BY calls DESC",
    "SELECT count() AS n FROM blackbox.decisions FINAL WHERE agent_id = '{agent}' "
    "AND decision_id IN (SELECT decision_id FROM decisions_current WHERE agent_id = '{agent}')",
    "WITH mine AS (SELECT decision_id, prompt_version FROM decisions_current WHERE agent_id = '{agent}') "
    "SELECT prompt_version, count() AS n FROM mine GROUP BY prompt_version ORDER BY prompt_version",
    "SELECT agent_id AS who FROM decisions WHERE agent_id = '{agent}' "
    "UNION ALL SELECT caller AS who FROM access_log WHERE 0",
    "SELECT decision_id, row_number() OVER (PARTITION BY prompt_version ORDER BY captured_at) AS rn, "
    "arrayMap(x -> x * 2, [1, 2]) AS a FROM decisions_current WHERE agent_id = '{agent}' "
    "AND NOT EXISTS (SELECT 1 FROM flags WHERE 0) ORDER BY decision_id LIMIT 3",
    "SELECT count() AS n FROM memory_entries WHERE decision_id IN (SELECT decision_id FROM decisions "
    "WHERE agent_id = '{agent}') EXCEPT SELECT toUInt64(999999)",
)


@pytest.mark.parametrize("sql", LEGITIMATE)
def test_legitimate_selects_still_work(app: typer.Typer, env: Env, sql: str) -> None:
    result = _query(app, sql.format(agent=env.agent), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)


def test_join_count_is_right(app: typer.Typer, env: Env) -> None:
    result = _query(app, f"SELECT count() AS n FROM decisions FINAL WHERE agent_id = '{env.agent}'", "--json")
    assert json.loads(result.stdout) == [{"n": 60}]


def _with_literals(sql: str, agent: str) -> str:
    sql = re.sub(r"\{since:DateTime64\(3, 'UTC'\)\}", "toDateTime64('2026-07-01 00:00:00', 3, 'UTC')", sql)
    sql = re.sub(r"\{until:DateTime64\(3, 'UTC'\)\}", "toDateTime64('2026-07-11 00:00:00', 3, 'UTC')", sql)
    return sql.replace("{agent:String}", f"'{agent}'")


def test_trend_catalog_queries_pass_the_check(app: typer.Typer, env: Env) -> None:
    """Every trend, with every --by, is a query an operator may paste into ``blackbox query``."""
    for trend in TRENDS.values():
        result = _query(app, _with_literals(trend_sql(trend.name), env.agent), "--json")
        assert result.exit_code == 0, (trend.name, result.output)
    index = open_index(load_service_settings())
    limits = QueryLimits(max_rows=100, timeout_s=30)
    try:
        for trend in TRENDS.values():
            for by in trend.allowed_by:
                confine(index, _with_literals(trend_sql(trend.name, by), env.agent), limits=limits)
    finally:
        index.close()


def test_allow_list_is_the_ddl() -> None:
    assert index_relations() == {*TABLES, "decisions_current"}


# --- limits -------------------------------------------------------------------------------------------
def test_row_limit_truncates_with_a_notice(app: typer.Typer, env: Env) -> None:
    sql = f"SELECT decision_id FROM decisions FINAL WHERE agent_id = '{env.agent}' ORDER BY decision_id"
    result = _query(app, sql, "--json", "--limit", "7")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 7
    assert "only the first 7 rows" in result.stderr
    whole = _query(app, sql, "--json", "--limit", "60")
    assert len(json.loads(whole.stdout)) == 60 and "only the first" not in whole.stderr


def test_time_limit_stops_a_slow_query(app: typer.Typer, env: Env) -> None:
    started = time.monotonic()
    result = _query(
        app,
        # Every row of the 5-way product is hashed, so the engine cannot shortcut it (count() alone it
        # answers from the table sizes); hundreds of millions of rows take far longer than 1 s.
        "SELECT sum(cityHash64(a.decision_id, b.decision_id, c.decision_id, d.decision_id, e.decision_id))"
        " FROM decisions AS a, decisions AS b, decisions AS c, decisions AS d, decisions AS e",
        "--timeout",
        "1",
    )
    assert isinstance(result.exception, IndexError_) and "--timeout 1s" in str(result.exception)
    assert time.monotonic() - started < 15


def test_engine_guards_hold_without_the_parse_check(env: Env) -> None:
    """Defence in depth: the confined connection itself refuses writes, file() and settings changes,
    and stops an endless result, even for SQL that never went through :func:`confine`."""
    index = open_index(load_service_settings())
    limits = QueryLimits(max_rows=10, timeout_s=5)
    try:
        for sql in (
            f"SELECT * FROM file('{env.key_file}', 'LineAsString')",
            "INSERT INTO flags (decision_id) VALUES ('x')",
            "SELECT 1 SETTINGS readonly = 0",
        ):
            with pytest.raises(IndexError_):
                index.query(sql, limits=limits)
        rows = index.query("SELECT number FROM system.numbers", limits=limits)  # infinite, cut by the engine
        assert 10 < len(rows) <= 1_000_000
    finally:
        index.close()


# --- the access log -----------------------------------------------------------------------------------
def test_every_query_is_logged(app: typer.Typer, env: Env) -> None:
    ok_sql = f"SELECT count() AS n FROM decisions WHERE agent_id = '{env.agent}'"
    bad_sql = f"SELECT * FROM file('{env.key_file}', 'LineAsString')"
    assert _query(app, ok_sql).exit_code == 0
    _assert_refused(_query(app, bad_sql), "file()")
    rows = _log_rows(env.caller)
    assert [(r["action"], r["outcome"], r["reason"]) for r in rows] == [
        ("query", "allowed", ok_sql),
        ("query", "denied", bad_sql),
    ]
    assert all(r["scope"] == "operator" and r["decision_id"] == "" for r in rows)
    assert "sql_sha256=" in str(rows[0]["detail"])
    assert "table function file() is not allowed" in str(rows[1]["detail"])


class _BrokenLog:
    def __init__(self) -> None:
        self.tried: list[AccessRecord] = []

    def append(self, records: Sequence[AccessRecord]) -> None:
        self.tried.extend(records)
        raise OSError("disk full")


def test_no_log_no_query(env: Env) -> None:
    index = open_index(load_service_settings())
    log = _BrokenLog()
    try:
        with pytest.raises(AccessLogUnavailable, match="access log could not be written"):
            run_query(
                index,
                f"SELECT decision_id FROM decisions WHERE agent_id = '{env.agent}'",
                limits=QueryLimits(max_rows=10, timeout_s=5),
                log=log,
                caller=Caller(identity=env.caller, scope="operator"),
            )
        with pytest.raises(AccessLogUnavailable):  # a refused query whose refusal cannot be logged
            run_query(
                index,
                "SELECT * FROM system.tables",
                limits=QueryLimits(max_rows=10, timeout_s=5),
                log=log,
                caller=Caller(identity=env.caller, scope="operator"),
            )
    finally:
        index.close()
    assert [r.outcome for r in log.tried] == ["allowed", "denied"]


# --- a server with a dedicated query user ---------------------------------------------------------------
def test_query_user_url(app: typer.Typer, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """With BLACKBOX_QUERY_CLICKHOUSE_URL the query reads through that connection (here the server code
    path over clickhouse-connect's chdb backend) and the log row goes through BLACKBOX_CLICKHOUSE_URL;
    the query URL alone, without a server, is a configuration error."""
    url = f"chdb://{env.chdb_path}"
    monkeypatch.setenv("BLACKBOX_QUERY_CLICKHOUSE_URL", url)
    alone = _query(app, "SELECT 1 AS one")
    assert isinstance(alone.exception, IndexError_) and "without BLACKBOX_CLICKHOUSE_URL" in str(
        alone.exception
    )
    monkeypatch.setenv("BLACKBOX_CLICKHOUSE_URL", url)
    sql = f"SELECT count() AS n FROM decisions FINAL WHERE agent_id = '{env.agent}'"
    result = _query(app, sql, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 60}]
    _assert_refused(_query(app, f"SELECT * FROM file('{env.key_file}')"), "table function file()")
    assert [(r["outcome"], r["reason"]) for r in _log_rows(env.caller)][-2:] == [
        ("allowed", sql),
        ("denied", f"SELECT * FROM file('{env.key_file}')"),
    ]
