"""The index seam: one :class:`Index` protocol, two engines running the same SQL (``ddl.sql``).

* :class:`~consumers.index.embedded.ChdbIndex` — embedded ClickHouse (chdb) over a persistent
  directory; the default.
* :class:`~consumers.index.server.ClickHouseServerIndex` — a ClickHouse server through
  ``clickhouse-connect`` (``http(s)://`` URL), or clickhouse-connect's own in-process chdb backend
  (``chdb:///path`` DSN) which runs exactly the server code path without a server.

This module holds what both share: the DDL, the protocol, ``SqlIndex`` (schema, column types and
insert coercion, written once for both engines), :func:`insert_rows`, value normalization and row
versions. The SQL of each area (ingest, retention, replay, report, ...) lives in that area's store
module, never here.

Both engines take the same column-oriented batches (``dict[column, list]``), the same SQL with
ClickHouse query parameters (``{name:Type}``), and return rows as ``dict`` with the same Python types
(``str``, ``int``, ``float``, ``bool``, ``None``, ``datetime`` in UTC, ``date``, ``list``).

chdb process rule (chdb 4.x): a process hosts ONE embedded engine bound to ONE data path. Any number of
connections to that path may be open at once (each :class:`ChdbIndex` owns one; session state such as
the current database is per connection); opening a *different* path while any connection is open fails
— :class:`ChdbIndex` raises :class:`~schemas.errors.IndexError_` naming both paths. Close every index
before switching paths; the engine restarts in ~50-100 ms. Tests share one path and isolate themselves
with one database each (``ChdbIndex(path, database=unique)``). ``chdb.query()`` (the module-level
function) opens ``:memory:`` and therefore fails while an index is open: use the index instead.

Reading the current state of a decision always goes through ``FINAL`` (``decisions`` is a
ReplacingMergeTree; see ``ddl.sql``), so answers are right before any background merge.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from importlib import resources
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse, urlunparse

from schemas.errors import IndexError_

__all__ = [
    "TABLES",
    "Index",
    "QueryLimits",
    "SqlIndex",
    "insert_rows",
    "load_ddl",
    "parse_timestamp",
    "split_statements",
    "state_version",
]

TABLES = (
    "decisions",
    "tool_calls",
    "memory_entries",
    "flags",
    "access_log",
    "replay_runs",
    "quarantine",
    "deletions",
    "pact_violations",
    "findings",
    "finding_decisions",
    "tlog_leaves",
    "blob_versions",
    "pact_versions",
    "pact_applications",
)
DEFAULT_DATABASE = "blackbox"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """The engine's own guards for a confined query (``blackbox query``): a read-only (``readonly = 1``)
    connection, at most ``max_rows`` rows, ``timeout_s`` seconds and ``max_memory_bytes`` of memory.

    The engine stops reading at the first block past ``max_rows + 1`` rows (``result_overflow_mode =
    'break'``), so a caller that keeps ``max_rows`` knows more existed when it got more; past
    ``timeout_s`` the query fails (``timeout_overflow_mode = 'throw'``), and past ``max_memory_bytes``
    (``max_memory_usage``, which counts the result the engine builds too) it fails. ``max_result_bytes``
    is checked by the engine's reader before the result becomes Python values (a few times larger):
    a larger result is an error, never a silently shorter one.
    """

    max_rows: int
    timeout_s: int
    max_memory_bytes: int = 1 << 30
    max_result_bytes: int = 256 << 20

    def __post_init__(self) -> None:
        if min(self.max_rows, self.timeout_s, self.max_memory_bytes, self.max_result_bytes) < 1:
            raise IndexError_(
                f"query limits must be positive (rows={self.max_rows}, seconds={self.timeout_s}, "
                f"memory={self.max_memory_bytes}, result={self.max_result_bytes})"
            )

    def check_result_size(self, size: int) -> None:
        """Refuse a result of ``size`` bytes (as the engine returned it) past ``max_result_bytes``."""
        if size > self.max_result_bytes:
            raise IndexError_(
                f"the result is {size / 2**20:.0f} MiB, more than the {self.max_result_bytes / 2**20:.0f} MiB "
                "a query may return: select fewer columns or rows (--limit)"
            )

    def engine_settings(self) -> dict[str, int | str]:
        """ClickHouse settings, ``readonly`` excluded (each engine applies it last, see its code)."""
        return {
            "max_result_rows": self.max_rows + 1,
            "result_overflow_mode": "break",
            "max_execution_time": self.timeout_s,
            "timeout_overflow_mode": "throw",
            "max_memory_usage": self.max_memory_bytes,
        }


# --- DDL ------------------------------------------------------------------------------------------
def load_ddl() -> str:
    """The packaged ``ddl.sql`` text."""
    return resources.files("consumers.index").joinpath("ddl.sql").read_text(encoding="utf-8")


def split_statements(sql: str) -> list[str]:
    """Split a DDL script into statements, safely for our dialect of it.

    ``--`` comments are dropped first (only outside quotes), then the text is split on semicolons that
    are outside single quotes, double quotes and backticks. Empty statements are skipped.
    """
    statements: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and i + 1 < n:
                buf.append(sql[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
            buf.append(ch)
        elif ch == "-" and sql.startswith("--", i):
            while i < n and sql[i] != "\n":
                i += 1
            continue
        elif ch == ";":
            statement = "".join(buf).strip()
            if statement:
                statements.append(statement)
            buf = []
        else:
            buf.append(ch)
        i += 1
    tail = "".join(buf).strip()
    if tail:
        statements.append(tail)
    return statements


# --- versions ---------------------------------------------------------------------------------------
_version_lock = threading.Lock()
_last_version = 0


def state_version(now: datetime | None = None) -> int:
    """A version for a state-change row of ``decisions``: microseconds since the epoch, strictly
    increasing within this process. Ingest rows use version 0, so any state change supersedes them.

    ``now`` comes from the caller's injectable clock when it has one.
    """
    global _last_version
    moment = now or datetime.now(UTC)
    candidate = int(moment.timestamp() * 1_000_000)
    with _version_lock:
        _last_version = max(candidate, _last_version + 1)
        return _last_version


# --- values -----------------------------------------------------------------------------------------
def _format_datetime(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def normalize_param(value: Any) -> Any:
    """Datetimes become UTC text with milliseconds (what DateTime64(3, 'UTC') parses); the rest stays."""
    if isinstance(value, datetime):
        return _format_datetime(value)
    if isinstance(value, list | tuple):
        return [normalize_param(v) for v in value]
    return value


def parse_timestamp(value: str) -> datetime:
    """ISO-8601 text (``Z`` or offset, or naive = UTC) to an aware UTC datetime."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise IndexError_(f"not an ISO-8601 timestamp: {value!r}") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _normalize_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, list):
        return [_normalize_value(v) for v in value]
    if isinstance(value, tuple):
        return [_normalize_value(v) for v in value]
    return value


def normalize_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _normalize_value(v) for k, v in row.items()} for row in rows]


def base_type(ch_type: str) -> tuple[str, bool]:
    """(type without LowCardinality/Nullable wrappers, nullable?)."""
    nullable = False
    t = ch_type.strip()
    changed = True
    while changed:
        changed = False
        for wrapper in ("LowCardinality(", "Nullable("):
            if t.startswith(wrapper) and t.endswith(")"):
                nullable = nullable or wrapper == "Nullable("
                t = t[len(wrapper) : -1].strip()
                changed = True
    return t, nullable


def _default_for(base: str) -> Any:
    if base.startswith(("String", "FixedString", "UUID")):
        return ""
    if base == "Bool":
        return False
    if base.startswith(("UInt", "Int")):
        return 0
    if base.startswith("Float"):
        return 0.0
    if base.startswith("DateTime"):
        return datetime(1970, 1, 1, tzinfo=UTC)
    if base == "Date":
        return date(1970, 1, 1)
    if base.startswith("Array"):
        return []
    raise IndexError_(f"no default for column type {base}")


def check_identifier(name: str, what: str = "identifier") -> str:
    if not _IDENT.match(name):
        raise IndexError_(f"invalid {what}: {name!r}")
    return name


# --- the protocol -------------------------------------------------------------------------------------
@runtime_checkable
class Index(Protocol):
    """The index seam: the engine primitives every caller needs, and nothing else.
    :class:`ChdbIndex` and :class:`ClickHouseServerIndex` implement it with the same SQL.

    The SQL itself belongs to the area that runs it, in that area's store module
    (``consumers/<area>/store.py``); the seam only runs statements and moves rows.
    """

    database: str

    def ensure_schema(self) -> None:
        """Create the database, tables and views if missing (idempotent; safe on every start)."""
        ...

    def column_types(self, table: str) -> dict[str, str]:
        """``{column: ClickHouse type}`` of a table in this index's database, in column order."""
        ...

    def insert(
        self, table: str, columns: Mapping[str, Sequence[Any]], *, dedup_token: str | None = None
    ) -> int:
        """Insert one column-oriented batch; returns the row count. Omitted columns take their default."""
        ...

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        read_only: bool = False,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        """Run a SELECT with ``{name:Type}`` parameters; rows as dicts in column order.

        ``read_only``: on a ``readonly = 2`` connection. ``limits``: on a ``readonly = 1`` connection
        with the engine's row and time limits (see :class:`QueryLimits`); ``blackbox query`` only.
        """
        ...

    def explain_ast(self, sql: str, *, limits: QueryLimits) -> list[str]:
        """The engine parser's tree of ``sql`` (``EXPLAIN AST``, nothing runs), one line per node, read
        as TabSeparated so a line break inside a name stays escaped. ``sql`` must be ONE statement:
        chdb runs every statement of a multi-statement text (see :mod:`consumers.index.confined`)."""
        ...

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        """Run a statement that returns no rows (DDL, INSERT ... SELECT, DELETE)."""
        ...

    def close(self) -> None:
        """Release the connection (idempotent)."""
        ...


def insert_rows(
    index: Index, table: str, rows: Sequence[Mapping[str, Any]], *, dedup_token: str | None = None
) -> int:
    """Insert row dicts through :meth:`Index.insert` (pivoted to columns here); keys missing from a row
    take the column's default value. Returns the row count."""
    if not rows:
        return 0
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    columns = {n: [row.get(n) for row in rows] for n in names}
    return index.insert(table, columns, dedup_token=dedup_token)


class SqlIndex:
    """What both engines share above their own primitives: the schema, column types and the coercion
    of inserted values, written once so the two engines behave the same."""

    database: str

    def __init__(self) -> None:
        self._types: dict[str, dict[str, str]] = {}

    # engine primitives ---------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        read_only: bool = False,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def explain_ast(self, sql: str, *, limits: QueryLimits) -> list[str]:
        raise NotImplementedError

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        raise NotImplementedError

    def _insert_prepared(
        self, table: str, names: list[str], data: list[list[Any]], types: list[str], dedup_token: str | None
    ) -> None:
        raise NotImplementedError

    def _create_database(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SqlIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # schema ----------------------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        self._create_database()
        for statement in split_statements(load_ddl()):
            self.command(statement)
        self._types.clear()

    def column_types(self, table: str) -> dict[str, str]:
        """{column: ClickHouse type} of a table in this index's database (cached)."""
        cached = self._types.get(table)
        if cached is None:
            rows = self.query(
                "SELECT name, type FROM system.columns WHERE database = currentDatabase() "
                "AND table = {table:String} ORDER BY position",
                {"table": table},
            )
            if not rows:
                raise IndexError_(f"no table {table!r} in database {self.database!r} (run ensure_schema)")
            cached = {r["name"]: r["type"] for r in rows}
            self._types[table] = cached
        return cached

    # inserts ---------------------------------------------------------------------------------------
    def insert(
        self, table: str, columns: Mapping[str, Sequence[Any]], *, dedup_token: str | None = None
    ) -> int:
        """Insert a column-oriented batch. ``None`` in a non-Nullable column means the type's zero value;
        ISO-8601 text is accepted in DateTime64 columns. ``dedup_token`` becomes the ClickHouse
        ``insert_deduplication_token`` (a retried batch with the same token is dropped at insert)."""
        check_identifier(table, "table")
        types = self.column_types(table)
        names = list(columns)
        if not names:
            return 0
        unknown = [n for n in names if n not in types]
        if unknown:
            raise IndexError_(f"{table}: unknown column(s) {', '.join(unknown)}")
        lengths = {len(columns[n]) for n in names}
        if len(lengths) != 1:
            raise IndexError_(f"{table}: columns have different lengths {sorted(lengths)}")
        count = lengths.pop()
        if count == 0:
            return 0
        data = [self._coerce_column(types[n], columns[n]) for n in names]
        self._insert_prepared(table, names, data, [types[n] for n in names], dedup_token)
        return count

    @staticmethod
    def _coerce_column(ch_type: str, values: Sequence[Any]) -> list[Any]:
        base, nullable = base_type(ch_type)
        out = list(values)
        if not nullable and any(v is None for v in out):
            default = _default_for(base)
            out = [default if v is None else v for v in out]
        if base.startswith("DateTime"):
            out = [parse_timestamp(v) if isinstance(v, str) else v for v in out]
        return out


# --- small helpers -------------------------------------------------------------------------------------
def tsv_lines(data: bytes) -> list[str]:
    """The rows of a one-column TabSeparated answer (escapes left as they are)."""
    text = data.decode("utf-8", "replace")
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n") if text else []


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:500]


def escape_literal(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def redact_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.password:
        netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@")
        return urlunparse(parsed._replace(netloc=netloc))
    return url
