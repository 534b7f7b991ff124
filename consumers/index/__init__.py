"""The ClickHouse index: one DDL (``ddl.sql``), two engines (chdb embedded, ClickHouse server), rows
from captures (:mod:`consumers.index.rows`) and the named trend catalog (:mod:`consumers.index.trends`).

Typical use::

    index = open_index(settings)                       # schema ensured
    index.insert("flags", columns)                     # one column-oriented batch
    index.query("SELECT ... {id:String}", {"id": ...}) # rows as dicts
    run_trend(index, "failure_rate", since=..., until=...)
    index.close()

The seam (:class:`Index`) is the engine primitives only: schema, column types, insert, query,
``EXPLAIN AST``, command, close. Each area keeps the SQL it runs in its own store module
(``consumers/ingest/store.py``, ``consumers/retention/store.py``, ``consumers/replay/store.py``, ...);
the SQL that stays here is the schema (``ddl.sql``), the trend catalog and the confined query.

Modules: ``engine`` (DDL, protocol, shared insert coercion, versions), ``embedded`` (ChdbIndex),
``server`` (ClickHouseServerIndex), ``rows``, ``trends``, ``confined``. See
:mod:`consumers.index.engine` for the chdb one-path-per-process rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from schemas.errors import DataDirMissing

from .embedded import ChdbIndex, chdb_open_path
from .engine import TABLES, Index, insert_rows, load_ddl, parse_timestamp, split_statements, state_version
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
    "IndexSettings",
    "RowBatch",
    "Trend",
    "chdb_open_path",
    "decision_rows",
    "flag_row",
    "insert_rows",
    "load_ddl",
    "open_index",
    "parse_timestamp",
    "require_existing_index",
    "run_trend",
    "split_statements",
    "state_version",
    "trend_sql",
]


class IndexSettings(Protocol):
    """The settings the index reads (the services' settings, :mod:`consumers.app.settings`)."""

    @property
    def data_dir(self) -> Path: ...
    @property
    def clickhouse_url(self) -> str | None: ...
    @property
    def chdb_path(self) -> Path | None: ...
    @property
    def resolved_chdb_path(self) -> Path: ...


def require_existing_index(settings: IndexSettings) -> None:
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


def open_index(settings: IndexSettings, *, database: str | None = None, ensure_schema: bool = True) -> Index:
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
