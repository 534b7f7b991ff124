"""``blackbox trends`` and ``blackbox query``: the named trend catalog and raw SQL over the index.

The index is the one :func:`consumers.index.open_index` picks from the settings (``BLACKBOX_CLICKHOUSE_URL``
for a server, else chdb at ``BLACKBOX_CHDB_PATH`` / ``<data_dir>/index``).

``blackbox query`` is confined (:mod:`consumers.index.confined`): one SELECT over the index tables,
checked with the engine's parser before it runs, then run read-only under a row and a time limit, and
logged in ``access_log`` first. On a server with ``BLACKBOX_QUERY_CLICKHOUSE_URL`` it runs as that
(read-only) user; the access log is still written through ``BLACKBOX_CLICKHOUSE_URL``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

import typer

from consumers import terminal
from consumers.access.log import IndexAccessLog
from consumers.app.runtime import open_runtime
from consumers.app.settings import ServiceSettings
from consumers.findings import FINDING_TREND_PREFIX, finding_incidence
from consumers.index import TRENDS, ClickHouseServerIndex, Index, parse_timestamp, run_trend
from consumers.index.confined import run_query
from consumers.index.engine import QueryLimits
from consumers.privacy.ids import index_ids
from schemas.errors import IndexError_

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")]


def parse_when(text: str, *, now: datetime) -> datetime:
    """``7d`` / ``24h`` / ``90m`` / ``2w`` back from ``now``, ``now``, or an ISO-8601 time (UTC if naive)."""
    if text.strip().lower() == "now":
        return now
    match = _DURATION.match(text)
    if match:
        try:
            return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        except OverflowError as exc:  # before year 1
            raise typer.BadParameter(f"{text!r} reaches back before the year 1") from exc
    try:
        return parse_timestamp(text.strip())
    except Exception as exc:
        raise typer.BadParameter(
            f"{text!r} is neither a duration (7d, 24h, 30m) nor an ISO-8601 time"
        ) from exc


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime | date):
        return str(_json_default(value))
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    return str(value)


def print_rows(rows: Sequence[dict[str, Any]], *, as_json: bool, title: str | None = None) -> None:
    """Rows from the index, as JSON or a table; every value is data, escaped (:mod:`.terminal`)."""
    if as_json:
        terminal.echo_json(list(rows), default=_json_default)
        return
    if not rows:
        terminal.echo(f"{terminal.clean(title)}: no rows" if title else "no rows")
        return
    numeric = [k for k, v in rows[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    terminal.print_table(
        list(rows[0]), ([_cell(v) for v in row.values()] for row in rows), title=title, right=numeric
    )


def trends(
    name: Annotated[str | None, typer.Argument(help="Trend name (see --list).", show_default=False)] = None,
    since: Annotated[str, typer.Option("--since", help="Start (inclusive): 7d, 24h, or ISO-8601.")] = "30d",
    until: Annotated[
        str, typer.Option("--until", help="End (exclusive): now, a duration back, or ISO-8601.")
    ] = "now",
    by: Annotated[str | None, typer.Option("--by", help="Add one grouping dimension (see --list).")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent id.")] = None,
    as_json: JsonOpt = False,
    list_: Annotated[bool, typer.Option("--list", help="List the trends and their --by dimensions.")] = False,
) -> None:
    """Run a named trend query over trusted decisions (only the current version of each counts);
    ``finding:NAME`` is the incidence of a finding's rule (``blackbox finding``)."""
    if list_ or name is None:
        if as_json:
            terminal.echo_json(
                [
                    {
                        "name": t.name,
                        "description": t.description,
                        "columns": list(t.columns),
                        "by": list(t.allowed_by),
                    }
                    for t in TRENDS.values()
                ]
            )
            return
        terminal.print_table(
            ("name", "description", "--by"),
            ((t.name, t.description, ", ".join(t.allowed_by)) for t in TRENDS.values()),
            title="trends",
        )
        if name is None and not list_:
            raise typer.Exit(code=2)
        return
    now = datetime.now(UTC)
    start, end = parse_when(since, now=now), parse_when(until, now=now)
    with open_runtime(existing_index=True) as rt:
        if name.startswith(FINDING_TREND_PREFIX):
            rows = finding_incidence(
                rt.index,
                name.removeprefix(FINDING_TREND_PREFIX),
                since=start,
                until=end,
                agent=agent,
                by=by,
                blobs=rt.blob_store,
                gate=rt.gate,
                caller=rt.caller(f"trends {name}"),
                ids=index_ids(rt.settings),
            )
        else:
            rows = run_trend(rt.index, name, since=start, until=end, agent=agent, by=by)
    title = f"{name} {_json_default(start)} .. {_json_default(end)}" + (f" agent={agent}" if agent else "")
    print_rows(rows, as_json=as_json, title=title)


def _query_index(settings: ServiceSettings, index: Index) -> Index:
    """The index ``query`` reads through: the dedicated read-only user when one is configured."""
    if not settings.query_clickhouse_url:
        return index
    if not settings.clickhouse_url:
        raise IndexError_(
            "BLACKBOX_QUERY_CLICKHOUSE_URL is set without BLACKBOX_CLICKHOUSE_URL: the query user is for "
            "a ClickHouse server, and the access log is written through BLACKBOX_CLICKHOUSE_URL"
        )
    return ClickHouseServerIndex(settings.query_clickhouse_url)


def query(
    sql: Annotated[
        str, typer.Argument(help="One SELECT over the index tables (WITH, UNION, joins, subqueries).")
    ],
    as_json: JsonOpt = False,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=1_000_000, help="Print at most this many rows.")
    ] = 10_000,
    timeout: Annotated[
        int, typer.Option("--timeout", min=1, max=3600, help="Stop the query after this many seconds.")
    ] = 30,
    max_memory: Annotated[
        int,
        typer.Option("--max-memory", min=16, max=65_536, help="Stop the query past this many MiB of memory."),
    ] = 1024,
) -> None:
    """Run one SELECT over the index tables: no table functions, no files, no settings; only listed pure
    functions; row, time and memory limits; every query (allowed or refused) is logged in access_log."""
    limits = QueryLimits(max_rows=limit, timeout_s=timeout, max_memory_bytes=max_memory << 20)
    with open_runtime(existing_index=True) as rt:
        index = rt.index
        reader = index
        try:
            reader = _query_index(rt.settings, index)
            result = run_query(
                reader,
                sql,
                limits=limits,
                log=IndexAccessLog(index),
                caller=rt.caller("query"),
            )
        except IndexError_ as exc:
            if "TIMEOUT_EXCEEDED" in str(exc):
                raise IndexError_(f"query stopped after --timeout {timeout}s") from exc
            if "MEMORY_LIMIT_EXCEEDED" in str(exc):
                raise IndexError_(
                    f"query stopped: it needed more than --max-memory {max_memory} MiB"
                ) from exc
            raise
        finally:
            if reader is not index:
                reader.close()
    print_rows(result.rows, as_json=as_json)
    if result.truncated:
        terminal.echo(f"note: only the first {limit} rows are shown; raise --limit to see more", err=True)


def register(app: typer.Typer) -> None:
    app.command("trends")(trends)
    app.command("query")(query)
