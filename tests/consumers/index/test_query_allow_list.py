"""``blackbox query`` allows listed things only (issue 24 item 1): the ``APPLY`` transformer family that
read any file, every function the engine knows but the list does not, dangerous forms generated from the
grammar in every position, the memory and result caps, and a result that is not UTF-8.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from query_testkit import SECRET, Env, assert_refused, log_rows, run_query_cli

from consumers.access.scopes import Caller
from consumers.app.settings import load_service_settings
from consumers.index import Index, open_index
from consumers.index.confined import QueryRefused, allowed_functions, confine, run_query
from consumers.index.engine import QueryLimits
from schemas.errors import IndexError_

LIMITS = QueryLimits(max_rows=100, timeout_s=10)


@pytest.fixture
def index(env: Env) -> Iterator[Index]:
    opened = open_index(load_service_settings())
    try:
        yield opened
    finally:
        opened.close()


# --- the APPLY family -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "form",
    [
        "SELECT * APPLY file FROM (SELECT '{key}' AS p)",
        "SELECT * APPLY(file) FROM (SELECT '{key}' AS p)",
        "SELECT COLUMNS('p') APPLY(file) FROM (SELECT '{key}' AS p)",
        "SELECT * APPLY(x -> file(x)) FROM (SELECT '{key}' AS p)",
        "SELECT * EXCEPT(q) APPLY(file) FROM (SELECT '{key}' AS p, 1 AS q)",
        "SELECT decision_id, * APPLY(toString) FROM decisions WHERE 0",
    ],
)
def test_apply_transformers_are_refused_and_logged_as_refused(app: typer.Typer, env: Env, form: str) -> None:
    sql = form.format(key=env.key_file)
    assert_refused(run_query_cli(app, sql, "--json"), "APPLY is not allowed")
    assert [(r["outcome"], r["reason"]) for r in log_rows(env.caller)] == [("denied", sql)]
    assert "APPLY is not allowed" in str(log_rows(env.caller)[0]["detail"])


def test_replace_transformer_is_checked_like_any_expression(app: typer.Typer, env: Env) -> None:
    sql = f"SELECT * REPLACE(file(p) AS p) FROM (SELECT '{env.key_file}' AS p)"
    assert_refused(run_query_cli(app, sql), "function file() is not on the list")
    ok = run_query_cli(app, "SELECT * REPLACE(upper(p) AS p) FROM (SELECT 'a' AS p)", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout) == [{"p": "A"}]


# --- the allow-list, against the engine's own catalogue -----------------------------------------------
_NEVER = ("file", "url", "dictGet", "joinGet", "getSetting", "getServerSetting", "getMacro", "hostName")
_FORBIDDEN_CATEGORIES = ("Dictionary", "Embedded Dictionary", "AI", "Introspection", "Machine Learning")


def _engine_functions(index: Index) -> list[dict[str, object]]:
    return index.query(
        "SELECT name, categories, alias_to, is_aggregate FROM system.functions WHERE origin = 'System'"
    )


def test_every_listed_function_exists_and_none_is_a_door_out(index: Index) -> None:
    known = {str(r["name"]).lower(): r for r in _engine_functions(index)}
    listed = allowed_functions()
    assert not {*listed.scalar, *listed.aggregate} - known.keys() - {"lambda", "exists", "grouping"}
    for name in (*listed.scalar, *listed.aggregate):
        row = known.get(name)
        target = known.get(str(row["alias_to"]).lower(), row) if row else None
        assert target is None or target["categories"] not in _FORBIDDEN_CATEGORIES, name
    assert not any(listed.allows(n) for n in _NEVER)
    assert all(
        listed.allows(n) for n in ("countIf", "uniqExactIf", "sumArray", "avgOrNull", "quantilesState")
    )


def test_every_unlisted_engine_function_is_refused(index: Index) -> None:
    """By construction: each function the engine knows and the list does not name is refused when called."""
    listed = allowed_functions()
    unlisted = sorted(str(r["name"]) for r in _engine_functions(index) if not listed.allows(str(r["name"])))
    assert len(unlisted) > 300 and "file" in unlisted and "aiGenerate" in unlisted
    for name in unlisted:
        with pytest.raises(QueryRefused, match=r"is not on the list|could not parse"):
            confine(index, f"SELECT `{name}`('x')", limits=LIMITS)


# --- generated dangerous forms ------------------------------------------------------------------------
_PAYLOADS = (
    "file('{key}')",
    "file('{key}', 'LineAsString')",
    "dictGet('d', 'a', toUInt64(1))",
    "joinGet('blackbox.decisions', 'agent_id', 'x')",
    "getSetting('readonly')",
    "aiGenerate('{key}')",
    "hostName()",
    "(SELECT name FROM system.users LIMIT 1)",
    "(SELECT * FROM file('{key}', 'LineAsString'))",
    "(SELECT count() FROM url('http://127.0.0.1:9/x', 'CSV'))",
    "(SELECT count() FROM s3('http://127.0.0.1:9000/b/k', 'CSV'))",
    "(SELECT count() FROM executable('cat {key}', 'TSV', 'x String'))",
    "(SELECT count() FROM remoteSecure('127.0.0.1', system.one))",
    "(SELECT count() FROM input('x String'))",
    "(SELECT * APPLY(file) FROM (SELECT '{key}' AS p))",
)
_PLACES = (
    "SELECT {p} AS v",
    "SELECT decision_id FROM decisions WHERE agent_id = {p}",
    "SELECT v FROM (SELECT {p} AS v)",
    "WITH {p} AS v SELECT v",
    "WITH t AS (SELECT {p} AS v) SELECT * FROM t",
    "SELECT d.decision_id FROM decisions AS d JOIN tool_calls AS t ON t.decision_id = {p}",
    "SELECT 1 WHERE 'x' IN (SELECT {p})",
    "SELECT decision_id FROM decisions ORDER BY {p}",
    "SELECT count() FROM decisions GROUP BY agent_id HAVING max({p}) = ''",
    "SELECT arrayMap(x -> concat(x, {p}), ['a'])",
    "SELECT * REPLACE({p} AS p) FROM (SELECT 'a' AS p)",
    "SELECT row_number() OVER (PARTITION BY {p}) FROM decisions",
    "SELECT lower(upper({p}))",
    "SELECT CASE WHEN 1 THEN {p} ELSE '' END",
    "SELECT 1 UNION ALL SELECT {p}",
    "SELECT 1 WHERE EXISTS (SELECT {p})",
    "SELECT tuple(1, [{p}]).2",
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    place=st.sampled_from(_PLACES),
    payload=st.sampled_from(_PAYLOADS),
    nest=st.integers(min_value=0, max_value=3),
    wrap=st.sampled_from(("{x}", "toString({x})", "coalesce({x}, '')", "({x})", "if(1, {x}, '')")),
    spelling=st.sampled_from(("as is", "upper", "comment", "backquoted")),
)
def test_generated_dangerous_forms_are_refused(
    env: Env, index: Index, place: str, payload: str, nest: int, wrap: str, spelling: str
) -> None:
    expression = payload.format(key=env.key_file)
    if spelling == "upper":
        expression = expression.upper()
    elif spelling == "comment":
        expression = expression.replace("(", " /* ( */ (", 1)
    elif spelling == "backquoted":
        expression = re.sub(
            r"^\(?(\w+)\(", lambda m: m.group(0).replace(m.group(1), f"`{m.group(1)}`"), expression
        )
    for _ in range(nest):
        expression = wrap.format(x=expression)
    sql = place.format(p=expression)
    with pytest.raises(QueryRefused) as refused:
        run_query(
            index,
            sql,
            limits=LIMITS,
            log=_NoLog(),
            caller=Caller(identity=env.caller, scope="operator"),
        )
    assert any(why in str(refused.value) for why in ("not allowed", "not on the list", "not an index table"))
    assert SECRET not in str(refused.value)


class _NoLog:
    def append(self, records: object) -> None:
        return None


# --- caps and bytes ---------------------------------------------------------------------------------
def test_memory_cap_stops_a_query_with_a_clear_error(app: typer.Typer, env: Env) -> None:
    result = run_query_cli(
        app,
        "SELECT length(groupArray(repeat(decision_id, 200000))) AS n FROM decisions",
        "--max-memory",
        "32",
    )
    assert isinstance(result.exception, IndexError_), repr(result.exception)
    assert "--max-memory 32 MiB" in str(result.exception)


def test_result_cap_is_an_error_not_a_shorter_result(env: Env, index: Index) -> None:
    small = QueryLimits(max_rows=1000, timeout_s=10, max_result_bytes=2000)
    with pytest.raises(IndexError_, match=r"more than the 0 MiB a query may return"):
        index.query(f"SELECT * FROM decisions WHERE agent_id = '{env.agent}'", limits=small)


def test_a_result_that_is_not_utf8_is_shown_escaped(app: typer.Typer, env: Env) -> None:
    sql = "SELECT unhex('ff41') AS b, [unhex('fe')] AS a, map('k', unhex('80')) AS m, 'ok' AS s"
    result = run_query_cli(app, sql, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"b": "\\xffA", "a": ["\\xfe"], "m": [["k", "\\x80"]], "s": "ok"}]
    table = run_query_cli(app, sql)
    assert table.exit_code == 0 and "\\xffA" in table.stdout


# --- what the index returns is data on the terminal ---------------------------------------------------
HOSTILE_SQL = (
    "SELECT '[/INST]' AS a, '[link=http://evil]click[/link]' AS b, "
    "concat('x', char(27), '[2J', char(13), 'y', unhex('e280ae'), 'z') AS c, repeat('w ', 150) AS d"
)


def test_query_prints_markup_literally_and_escapes_controls(app: typer.Typer, env: Env) -> None:
    result = run_query_cli(app, HOSTILE_SQL)
    assert result.exit_code == 0, repr(result.exception)
    out = result.stdout
    assert "[/INST]" in out and "[link=http://evil]click[/link]" in out
    assert "x\\x1b[2J\\ryU+202Ez" in out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert any(("w " * 150).strip() in line for line in out.splitlines())  # piped: wide, never folded


def test_query_json_carries_the_exact_values_without_terminal_bytes(app: typer.Typer, env: Env) -> None:
    result = run_query_cli(app, HOSTILE_SQL, "--json")
    assert result.exit_code == 0
    assert "\u202e" not in result.stdout
    assert json.loads(result.stdout)[0]["c"] == "x\x1b[2J\ryz".replace("y", "y\u202e", 1)
