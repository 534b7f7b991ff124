"""ChdbIndex: the index on embedded ClickHouse (chdb) over a persistent directory.

See :mod:`consumers.index.engine` for the one-path-per-process rule this module enforces.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from datetime import UTC
from typing import Any
from urllib.parse import urlencode

from consumers.index.engine import (
    DEFAULT_DATABASE,
    QueryLimits,
    SqlIndex,
    base_type,
    check_identifier,
    escape_literal,
    first_line,
    normalize_param,
    normalize_rows,
    tsv_lines,
)
from schemas.errors import IndexError_

__all__ = ["ChdbIndex", "chdb_open_path"]

_ARROW_TYPES: dict[str, Any] = {}


def _arrow_type(base: str) -> Any:
    import pyarrow as pa

    if not _ARROW_TYPES:
        _ARROW_TYPES.update(
            {
                "String": pa.string(),
                "Bool": pa.bool_(),
                "UInt8": pa.uint8(),
                "UInt16": pa.uint16(),
                "UInt32": pa.uint32(),
                "UInt64": pa.uint64(),
                "Int8": pa.int8(),
                "Int16": pa.int16(),
                "Int32": pa.int32(),
                "Int64": pa.int64(),
                "Float32": pa.float32(),
                "Float64": pa.float64(),
                "Date": pa.date32(),
            }
        )
    found = _ARROW_TYPES.get(base)
    if found is not None:
        return found
    if base.startswith("DateTime64"):
        return pa.timestamp("ms", tz="UTC")
    if base.startswith("DateTime"):
        return pa.timestamp("s", tz="UTC")
    raise IndexError_(f"chdb insert: unsupported column type {base}")


def _as_binary(arrow_type: Any) -> Any:
    """``arrow_type`` with every string inside it (lists, maps, structs included) read as bytes."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pa.binary()
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(_as_binary(arrow_type.value_type))
    if pa.types.is_map(arrow_type):
        return pa.map_(_as_binary(arrow_type.key_type), _as_binary(arrow_type.item_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_as_binary(f.type)) for f in arrow_type])
    return arrow_type


def _escaped_text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, list):
        return [_escaped_text(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_escaped_text(v) for v in value)
    if isinstance(value, dict):
        return {_escaped_text(k): _escaped_text(v) for k, v in value.items()}
    return value


def _python_rows(table: Any) -> list[dict[str, Any]]:
    """The rows of an Arrow result. A string the engine returns that is not UTF-8 (``unhex('ff')``)
    becomes text with its bad bytes escaped (``\\xff``) instead of failing the whole result."""
    try:
        return list(table.to_pylist())
    except UnicodeDecodeError:
        import pyarrow as pa

        binary = pa.schema([f.with_type(_as_binary(f.type)) for f in table.schema])
        return [_escaped_text(row) for row in table.cast(binary).to_pylist()]


_chdb_lock = threading.Lock()
_chdb_open: dict[str, int] = {}  # realpath -> open ChdbIndex count in this process


def chdb_open_path() -> str | None:
    """The chdb data path this process has open through :class:`ChdbIndex`, if any (tests use it to
    share the process's one engine path instead of failing on a second one)."""
    with _chdb_lock:
        return next(iter(_chdb_open), None)


def _locked_by_another_process(path: str) -> bool:
    """True when another process holds the engine's ``status`` file lock (ClickHouse takes an exclusive
    flock on it for as long as a server, embedded or not, has the directory open)."""
    import fcntl

    try:
        fd = os.open(os.path.join(path, "status"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class ChdbIndex(SqlIndex):
    """Embedded ClickHouse over a persistent directory (see the module docstring for the one-path rule).

    Inserts build an Arrow table from the column lists (typed from the table schema) and run
    ``INSERT INTO t (cols) SELECT * FROM Python(bb_batch)`` — chdb's ``Python()`` table function
    resolves ``bb_batch`` as a local variable of the calling frame. Measured here, that is ~3x faster
    than ``Python(dict_of_lists)`` for our 50-column rows, and Arrow carries NULLs and exact types
    (``Python(dict)`` infers types from the first element and turns ``None`` into defaults).
    """

    def __init__(self, path: str | os.PathLike[str], *, database: str = DEFAULT_DATABASE) -> None:
        super().__init__()
        import chdb

        self.path = os.path.realpath(os.fspath(path))  # chdb compares engine paths literally
        self.database = check_identifier(database, "database")
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as exc:  # a file in the way, no permission: say which path, no traceback
            raise IndexError_(f"cannot use {self.path} as the chdb data directory: {exc.strerror}") from exc
        self._lock = threading.Lock()
        self._ro_conn: Any = None
        self._confined: dict[QueryLimits, Any] = {}
        with _chdb_lock:
            try:
                self._conn: Any = chdb.connect(self.path)
            except Exception as exc:
                others = [p for p in _chdb_open if p != self.path]
                if not others and _locked_by_another_process(self.path):
                    raise IndexError_(
                        f"the embedded index at {self.path} is in use by another process (is `blackbox "
                        "consume` running on it?). Embedded chdb allows one process per data directory: "
                        "stop that process first, or run the services on a ClickHouse server "
                        "(BLACKBOX_CLICKHOUSE_URL) so several processes can share the index."
                    ) from exc
                hint = f" (this process already has chdb open at {others[0]})" if others else ""
                raise IndexError_(
                    f"cannot open chdb at {self.path}{hint}: one chdb data path per process; "
                    f"close other indexes first ({exc})"
                ) from exc
            _chdb_open[self.path] = _chdb_open.get(self.path, 0) + 1
        self._closed = False
        self._use_database(self._conn)

    def _use_database(self, conn: Any) -> None:
        with contextlib.suppress(Exception):  # the database does not exist yet: ensure_schema creates it
            conn.query(f"USE {self.database}")

    def _create_database(self) -> None:
        self._run(self._conn, f"CREATE DATABASE IF NOT EXISTS {self.database}", None, "CSV")
        self._run(self._conn, f"USE {self.database}", None, "CSV")

    @staticmethod
    def _format_params(params: Mapping[str, Any] | None) -> dict[str, str] | None:
        if not params:
            return None
        from clickhouse_connect.driver.binding import format_bind_value

        return {k: format_bind_value(normalize_param(v), UTC) for k, v in params.items()}

    def _run(self, conn: Any, sql: str, params: Mapping[str, Any] | None, fmt: str) -> Any:
        if self._closed:
            raise IndexError_("index is closed")
        try:
            with self._lock:
                return conn.query(sql, fmt, params=self._format_params(params))
        except IndexError_:
            raise
        except Exception as exc:
            raise IndexError_(f"chdb: {first_line(exc)}") from exc

    def _read_only_conn(self) -> Any:
        if self._ro_conn is None:
            import chdb

            try:
                self._ro_conn = chdb.connect(f"{self.path}?readonly=2")
            except Exception as exc:
                raise IndexError_(f"chdb read-only connection: {first_line(exc)}") from exc
            self._use_database(self._ro_conn)
        return self._ro_conn

    def _confined_conn(self, limits: QueryLimits) -> Any:
        """A ``readonly = 1`` connection carrying the limits. They ride in the connection string because
        ``readonly = 1`` forbids changing any setting afterwards (a SETTINGS clause included)."""
        conn = self._confined.get(limits)
        if conn is None:
            import chdb

            options = urlencode({**limits.engine_settings(), "readonly": 1})
            try:
                conn = chdb.connect(f"{self.path}?{options}")
            except Exception as exc:
                raise IndexError_(f"chdb confined connection: {first_line(exc)}") from exc
            self._use_database(conn)
            self._confined[limits] = conn
        return conn

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        read_only: bool = False,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        if limits is not None:
            conn = self._confined_conn(limits)
        else:
            conn = self._read_only_conn() if read_only else self._conn
        table = self._run(conn, sql, params, "ArrowTable")
        if limits is not None:
            limits.check_result_size(table.nbytes)
        return normalize_rows(_python_rows(table))

    def explain_ast(self, sql: str, *, limits: QueryLimits) -> list[str]:
        result = self._run(self._confined_conn(limits), f"EXPLAIN AST {sql}", None, "TabSeparated")
        return tsv_lines(result.bytes())

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._run(self._conn, sql, params, "CSV")

    def _insert_prepared(
        self, table: str, names: list[str], data: list[list[Any]], types: list[str], dedup_token: str | None
    ) -> None:
        import pyarrow as pa

        arrays = []
        for name, values, ch_type in zip(names, data, types, strict=True):
            arrow_type = _arrow_type(base_type(ch_type)[0])
            try:
                arrays.append(pa.array(values, type=arrow_type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
                raise IndexError_(f"{table}.{name}: values do not fit {ch_type}: {exc}") from exc
        bb_batch = pa.Table.from_arrays(arrays, names=names)  # noqa: F841 - resolved by Python() below
        # INSERT ... SELECT deduplicates blocks only for "stable" selects and chdb cannot tell that
        # Python() is: it is exactly our block, so opt in — the same block dedup a server applies to a
        # Native insert (tables with non_replicated_deduplication_window > 0; others ignore it).
        settings = " SETTINGS deduplicate_insert_select = 'enable_even_for_bad_queries'"
        if dedup_token is not None:
            settings += f", insert_deduplication_token = '{escape_literal(dedup_token)}'"
        sql = f"INSERT INTO {table} ({', '.join(names)}){settings} SELECT * FROM Python(bb_batch)"
        if self._closed:
            raise IndexError_("index is closed")
        try:
            with self._lock:
                self._conn.query(sql, "CSV")
        except Exception as exc:
            raise IndexError_(f"chdb insert into {table}: {first_line(exc)}") from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _chdb_lock:
            for conn in (*self._confined.values(), self._ro_conn, self._conn):
                if conn is not None:
                    with contextlib.suppress(Exception):  # best effort; the engine cleans up on exit
                        conn.close()
            self._ro_conn = None
            self._confined.clear()
            left = _chdb_open.get(self.path, 1) - 1
            if left:
                _chdb_open[self.path] = left
            else:
                _chdb_open.pop(self.path, None)

    def __repr__(self) -> str:
        return f"ChdbIndex(path={self.path!r}, database={self.database!r})"
