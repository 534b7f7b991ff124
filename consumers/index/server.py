"""ClickHouseServerIndex: the index on a ClickHouse server through clickhouse-connect."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlparse, urlunparse

from consumers.index.engine import (
    DEFAULT_DATABASE,
    QueryLimits,
    SqlIndex,
    check_identifier,
    first_line,
    normalize_param,
    normalize_rows,
    redact_url,
    tsv_lines,
)
from schemas.errors import IndexError_

__all__ = ["ClickHouseServerIndex"]


class ClickHouseServerIndex(SqlIndex):
    """A ClickHouse server over HTTP(S) with clickhouse-connect (``client.insert`` / ``client.query`` /
    ``client.command``), or clickhouse-connect's in-process chdb backend for a ``chdb://`` DSN.

    ``url``: ``http(s)://user:pass@host:8123/database`` — the path names the database (default
    ``blackbox``; created by :meth:`ensure_schema`). Query parameters are bound server-side.
    """

    def __init__(self, url: str, *, database: str | None = None, client: Any = None) -> None:
        super().__init__()
        import clickhouse_connect

        parsed = urlparse(url)
        self.url = url
        if parsed.scheme.startswith("chdb"):
            url_database = None
            dsn = url
        else:
            url_database = unquote(parsed.path.strip("/")) or None
            dsn = urlunparse(parsed._replace(path=""))
        self.database = check_identifier(database or url_database or DEFAULT_DATABASE, "database")
        self._dsn = dsn if client is None else None
        self._ro_client: Any = None
        self._confined: dict[QueryLimits, Any] = {}
        try:
            self._client = client or clickhouse_connect.get_client(dsn=dsn)
        except Exception as exc:
            raise IndexError_(
                f"cannot connect to ClickHouse at {redact_url(url)}: {first_line(exc)}"
            ) from exc
        self._closed = False
        try:
            exists = self._client.command(
                "SELECT count() FROM system.databases WHERE name = {db:String}",
                parameters={"db": self.database},
            )
        except Exception as exc:
            raise IndexError_(f"ClickHouse at {redact_url(url)}: {first_line(exc)}") from exc
        if int(str(exists)) > 0:
            self._client.database = self.database

    def _create_database(self) -> None:
        self._call(self._client.command, f"CREATE DATABASE IF NOT EXISTS {self.database}")
        self._client.database = self.database

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise IndexError_("index is closed")
        try:
            return fn(*args, **kwargs)
        except IndexError_:
            raise
        except Exception as exc:
            raise IndexError_(f"clickhouse: {first_line(exc)}") from exc

    @staticmethod
    def _params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return {k: normalize_param(v) for k, v in params.items()} if params else None

    def _read_only_client(self) -> Any:
        """A second client whose every request carries ``readonly = 2`` (a client setting, not a
        per-query one: clickhouse-connect's chdb backend keeps per-query settings on its session)."""
        if self._ro_client is None:
            import clickhouse_connect

            if self._dsn is None:
                raise IndexError_("read-only queries need an index opened from a URL")
            try:
                self._ro_client = clickhouse_connect.get_client(dsn=self._dsn, settings={"readonly": 2})
            except Exception as exc:
                raise IndexError_(f"read-only connection: {first_line(exc)}") from exc
            self._ro_client.database = self._client.database
        return self._ro_client

    def _confined_client(self, limits: QueryLimits) -> Any:
        """A client whose every request carries the limits and ``readonly = 1``.

        A dedicated query user (README: readonly, SELECT on the index tables only) may not change its
        settings: what it cannot change is left to its own profile, which is then the limit (the caller
        still cuts rows and the HTTP timeout still ends a stuck request). ``readonly`` goes last: the
        chdb backend applies client settings one SET at a time, and after ``readonly = 1`` none is allowed.
        """
        client = self._confined.get(limits)
        if client is None:
            import clickhouse_connect

            if self._dsn is None:
                raise IndexError_("confined queries need an index opened from a URL")
            extra: dict[str, Any] = {}
            if not self._dsn.startswith("chdb"):
                extra["send_receive_timeout"] = limits.timeout_s + 10  # the server's own limit fires first
            try:
                client = clickhouse_connect.get_client(dsn=self._dsn, **extra)
                for key, value in [*limits.engine_settings().items(), ("readonly", 1)]:
                    current = client.server_settings.get(key)
                    if current is not None and (current.readonly or str(current.value) == str(value)):
                        continue
                    if key == "readonly" and current is not None and str(current.value) != "0":
                        continue  # already read-only (1 or 2); readonly cannot be changed from there
                    client.set_client_setting(key, value)
            except Exception as exc:
                raise IndexError_(f"confined connection: {first_line(exc)}") from exc
            client.database = self._client.database
            self._confined[limits] = client
        return client

    def query(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        read_only: bool = False,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        if limits is not None:
            client = self._confined_client(limits)
        else:
            client = self._read_only_client() if read_only else self._client
        result = self._call(client.query, sql, parameters=self._params(params))
        return normalize_rows(result.named_results())

    def explain_ast(self, sql: str, *, limits: QueryLimits) -> list[str]:
        # raw_query adds no FORMAT clause (``query`` appends FORMAT Native, which EXPLAIN would parse as
        # the statement's own), so the answer is the default TabSeparated
        raw = self._call(self._confined_client(limits).raw_query, f"EXPLAIN AST {sql}")
        return tsv_lines(bytes(raw))

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._call(self._client.command, sql, parameters=self._params(params))

    def _insert_prepared(
        self, table: str, names: list[str], data: list[list[Any]], types: list[str], dedup_token: str | None
    ) -> None:
        settings = {"insert_deduplication_token": dedup_token} if dedup_token is not None else None
        self._call(
            self._client.insert,
            table,
            data,
            column_names=names,
            column_type_names=types,
            column_oriented=True,
            settings=settings,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for client in (*self._confined.values(), self._ro_client, self._client):
            if client is not None:
                with contextlib.suppress(Exception):  # best effort
                    client.close()
        self._ro_client = None
        self._confined.clear()

    def __repr__(self) -> str:
        return f"ClickHouseServerIndex(url={redact_url(self.url)!r}, database={self.database!r})"
