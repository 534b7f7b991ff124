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
from collections.abc import Sequence

import pytest
import typer
from query_testkit import Env, assert_refused, log_rows, run_query_cli

from consumers.access.gate import AccessLogUnavailable
from consumers.access.log import AccessRecord
from consumers.access.scopes import Caller
from consumers.app.settings import load_service_settings
from consumers.index import TRENDS, open_index, trend_sql
from consumers.index.confined import confine, index_relations, run_query
from consumers.index.engine import TABLES, QueryLimits
from schemas.errors import IndexError_


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the attacks, through the CLI -----------------------------------------------------------
def test_file_table_function_cannot_read_a_key(app: typer.Typer, env: Env) -> None:
    result = run_query_cli(app, f"SELECT * FROM file('{env.key_file}', 'LineAsString')", "--json")
    assert_refused(result, "table function file() is not allowed")
    scalar = run_query_cli(app, f"SELECT file('{env.key_file}') AS k", "--json")
    assert_refused(scalar, "function file() is not on the list")
    hidden = run_query_cli(
        app, f"SELECT decision_id FROM decisions WHERE decision_id IN (SELECT * FROM file('{env.key_file}'))"
    )
    assert_refused(hidden, "table function file() is not allowed")


def test_insert_into_function_file_writes_nothing(app: typer.Typer, env: Env) -> None:
    target = env.tmp / "written.tsv"
    result = run_query_cli(app, f"INSERT INTO FUNCTION file('{target}', 'TSV') SELECT 1")
    assert_refused(result, "INSERT is not allowed")
    assert not target.exists()


def test_into_outfile_writes_nothing(app: typer.Typer, env: Env) -> None:
    trust = env.tmp / "trust.toml"
    trust.write_text("# trust store\n", encoding="utf-8")
    result = run_query_cli(app, f"SELECT 'forged key' INTO OUTFILE '{trust}' APPEND")
    assert_refused(result, "INTO OUTFILE is not allowed")
    assert trust.read_text(encoding="utf-8") == "# trust store\n"
    fresh = env.tmp / "fresh.txt"
    assert_refused(run_query_cli(app, f"SELECT 1 FROM decisions INTO OUTFILE '{fresh}'"), "INTO OUTFILE")
    assert not fresh.exists()


def test_url_to_a_closed_port_is_refused_at_once(app: typer.Typer, env: Env) -> None:
    started = time.monotonic()
    result = run_query_cli(app, f"SELECT * FROM url('http://127.0.0.1:{_closed_port()}/x', 'CSV')")
    assert_refused(result, "table function url() is not allowed")
    assert time.monotonic() - started < 5


def test_settings_clause_is_refused(app: typer.Typer, env: Env) -> None:
    assert_refused(run_query_cli(app, "SELECT 1 SETTINGS readonly = 0"), "SETTINGS is not allowed")
    assert_refused(
        run_query_cli(app, "SELECT count() FROM decisions SETTINGS max_result_rows = 0"),
        "SETTINGS is not allowed",
    )
    assert_refused(
        run_query_cli(app, "SELECT * FROM (SELECT 1 SETTINGS max_execution_time = 0)"),
        "SETTINGS is not allowed",
    )


def test_system_tables_and_other_tables_are_refused(app: typer.Typer, env: Env) -> None:
    assert_refused(
        run_query_cli(app, "SELECT * FROM system.tables"), "table system.tables is not an index table"
    )
    assert_refused(run_query_cli(app, "SELECT 1 WHERE 'default' IN system.users"), "system.users")
    assert_refused(run_query_cli(app, "SELECT * FROM default.decisions"), "default.decisions")
    secret_db, secret_table = f"q_{uuid.uuid4().hex[:8]}", f"private_{uuid.uuid4().hex[:8]}"
    index = open_index(load_service_settings())
    try:
        index.command(f"CREATE DATABASE {secret_db}")
        index.command(f"CREATE TABLE {secret_db}.t (x String) ENGINE = Memory")
        index.command(f"CREATE TABLE {secret_table} (x String) ENGINE = Memory")  # in blackbox itself
        assert_refused(
            run_query_cli(app, f"SELECT * FROM {secret_db}.t"), f"table {secret_db}.t is not an index"
        )
        assert_refused(
            run_query_cli(app, f"SELECT * FROM {secret_table}"), f"table {secret_table} is not an index"
        )
        assert_refused(
            run_query_cli(app, f"SELECT count() FROM decisions WHERE decision_id IN {secret_table}"),
            secret_table,
        )
    finally:
        index.command(f"DROP DATABASE IF EXISTS {secret_db} SYNC")
        index.command(f"DROP TABLE IF EXISTS {secret_table} SYNC")
        index.close()


def test_more_than_one_statement_is_refused(app: typer.Typer, env: Env) -> None:
    target = env.tmp / "second.tsv"
    result = run_query_cli(app, f"SELECT 1; INSERT INTO FUNCTION file('{target}', 'TSV') SELECT 1")
    assert_refused(result, "more than one statement is not allowed")
    assert not target.exists()
    assert_refused(run_query_cli(app, "SELECT 1; SELECT 2"), "more than one statement")


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
        ("SELECT dictGet('d', 'a', 1)", "function dictGet() is not on the list"),
        ("SELECT joinGet('default.j', 'v', 1)", "function joinGet() is not on the list"),
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
    assert_refused(run_query_cli(app, sql), fragment)


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
    result = run_query_cli(app, sql.format(agent=env.agent), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)


def test_join_count_is_right(app: typer.Typer, env: Env) -> None:
    result = run_query_cli(
        app, f"SELECT count() AS n FROM decisions FINAL WHERE agent_id = '{env.agent}'", "--json"
    )
    assert json.loads(result.stdout) == [{"n": 60}]


def _with_literals(sql: str, agent: str) -> str:
    sql = re.sub(r"\{since:DateTime64\(3, 'UTC'\)\}", "toDateTime64('2026-07-01 00:00:00', 3, 'UTC')", sql)
    sql = re.sub(r"\{until:DateTime64\(3, 'UTC'\)\}", "toDateTime64('2026-07-11 00:00:00', 3, 'UTC')", sql)
    return sql.replace("{agent:String}", f"'{agent}'")


def test_trend_catalog_queries_pass_the_check(app: typer.Typer, env: Env) -> None:
    """Every trend, with every --by, is a query an operator may paste into ``blackbox query``."""
    for trend in TRENDS.values():
        result = run_query_cli(app, _with_literals(trend_sql(trend.name), env.agent), "--json")
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
    assert index_relations() == {*TABLES, "decisions_current", "decisions_versions"}


# --- limits -------------------------------------------------------------------------------------------
def test_row_limit_truncates_with_a_notice(app: typer.Typer, env: Env) -> None:
    sql = f"SELECT decision_id FROM decisions FINAL WHERE agent_id = '{env.agent}' ORDER BY decision_id"
    result = run_query_cli(app, sql, "--json", "--limit", "7")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 7
    assert "only the first 7 rows" in result.stderr
    whole = run_query_cli(app, sql, "--json", "--limit", "60")
    assert len(json.loads(whole.stdout)) == 60 and "only the first" not in whole.stderr


def test_time_limit_stops_a_slow_query(app: typer.Typer, env: Env) -> None:
    started = time.monotonic()
    result = run_query_cli(
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
    assert run_query_cli(app, ok_sql).exit_code == 0
    assert_refused(run_query_cli(app, bad_sql), "file()")
    rows = log_rows(env.caller)
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
    alone = run_query_cli(app, "SELECT 1 AS one")
    assert isinstance(alone.exception, IndexError_) and "without BLACKBOX_CLICKHOUSE_URL" in str(
        alone.exception
    )
    monkeypatch.setenv("BLACKBOX_CLICKHOUSE_URL", url)
    sql = f"SELECT count() AS n FROM decisions FINAL WHERE agent_id = '{env.agent}'"
    result = run_query_cli(app, sql, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 60}]
    assert_refused(run_query_cli(app, f"SELECT * FROM file('{env.key_file}')"), "table function file()")
    assert [(r["outcome"], r["reason"]) for r in log_rows(env.caller)][-2:] == [
        ("allowed", sql),
        ("denied", f"SELECT * FROM file('{env.key_file}')"),
    ]
