"""The ClickHouse index: one DDL (``ddl.sql``), two engines (chdb embedded, ClickHouse server), rows
from captures (:mod:`consumers.index.rows`) and the named trend catalog (:mod:`consumers.index.trends`).

Typical use::

    index = open_index(settings)                       # schema ensured
    batch = RowBatch.of(decision_rows(c, segment_key=..., ...) for c in captures)
    index.insert_captures(batch)                       # tool_calls, memory_entries, then decisions
    index.latest_decision("dec_...")                   # current version (FINAL) or None
    run_trend(index, "failure_rate", since=..., until=...)
    index.close()

Modules: ``engine`` (DDL, protocol, shared SQL helpers, versions), ``embedded`` (ChdbIndex),
``server`` (ClickHouseServerIndex), ``rows``, ``trends``. See :mod:`consumers.index.engine` for the
chdb one-path-per-process rule.
"""

from __future__ import annotations

from producers.settings import BlackboxSettings
from schemas.errors import DataDirMissing

from .embedded import ChdbIndex, chdb_open_path
from .engine import TABLES, Index, load_ddl, parse_timestamp, split_statements, state_version
from .rows import CaptureRows, RowBatch, decision_rows, flag_row
from .server import ClickHouseServerIndex
from .trends import TRENDS, Trend, run_trend, trend_sql

__all__ = [
    "TABLES",
    "TRENDS",
    "CaptureRows",
    "ChdbIndex",
    "ClickHouseServerIndex",
    "Index",
    "RowBatch",
    "Trend",
    "chdb_open_path",
    "decision_rows",
    "flag_row",
    "load_ddl",
    "open_index",
    "parse_timestamp",
    "require_existing_index",
    "run_trend",
    "split_statements",
    "state_version",
    "trend_sql",
]


def require_existing_index(settings: BlackboxSettings) -> None:
    """Refuse a read on an embedded index that was never created: the usual cause is a mistyped
    ``BLACKBOX_DATA_DIR``, and creating an empty index there would answer "no such decision"."""
    if settings.clickhouse_url:
        return
    path = settings.resolved_chdb_path
    if not path.is_dir():
        where = f"BLACKBOX_DATA_DIR={settings.data_dir}"
        if settings.chdb_path is not None:
            where = f"BLACKBOX_CHDB_PATH={settings.chdb_path}"
        raise DataDirMissing(
            f"no blackbox index at {path} ({where}): that directory does not exist. Check the setting, "
            "or ingest captures there first with `blackbox consume` (or `blackbox demo`)."
        )


def open_index(
    settings: BlackboxSettings, *, database: str | None = None, ensure_schema: bool = True
) -> Index:
    """The index the settings name: a ClickHouse server when ``clickhouse_url`` is set, else chdb at
    ``resolved_chdb_path``. The schema is created if missing (idempotent) unless ``ensure_schema=False``.

    Every call returns a new handle with its own connection; close it when done. chdb handles share
    the process's one embedded engine (opened on first use, shut down when the last handle closes), so
    handles are cheap after the first; a handle on a *different* chdb path fails while one is open.
    """
    index: Index
    if settings.clickhouse_url:
        index = ClickHouseServerIndex(settings.clickhouse_url, database=database)
    else:
        index = ChdbIndex(settings.resolved_chdb_path, database=database or "blackbox")
    if ensure_schema:
        try:
            index.ensure_schema()
        except BaseException:
            index.close()
            raise
    return index
