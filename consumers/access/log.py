"""The access log: one append-only row per attempt to read capture content, allowed or denied.

Two sinks behind one Protocol: the index's ``access_log`` table (the default, queryable next to
the decisions) and a JSON-lines file (fsync'd per append) for setups without an index. A sink
that cannot write raises; the gate then refuses the read.

Both sinks chain their rows (:mod:`consumers.access.chain`): each row carries a sequence number,
the previous row's hash and its own, so a row changed, removed or inserted afterwards breaks the
chain that ``blackbox access log verify`` walks. Appends are serialized in the process (one lock per
sink target); the embedded index admits one process, and on a ClickHouse server every writer should
be one process per database, or the chain forks (which ``verify`` reports).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from consumers.access.chain import GENESIS, chain_hash, log_time

Outcome = Literal["allowed", "denied"]
ACCESS_LOG_TABLE = "access_log"


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One row of ``access_log`` (columns of the same names)."""

    at: datetime
    caller: str
    scope: str
    decision_id: str
    agent_id: str
    action: str
    reason: str
    outcome: Outcome
    detail: str = ""
    grant_id: str = ""  # the grant that allowed it (a request id, a grants-file entry, or the default)
    authority: str = ""  # that grant's legal basis and reference
    purpose: str = ""  # that grant's stated purpose


class AccessLog(Protocol):
    def append(self, records: Sequence[AccessRecord]) -> None:
        """Durably append ``records`` (one write); raise if they could not be written."""
        ...


class TableWriter(Protocol):
    """The slice of ``consumers.index.Index`` the access log and replay runs need."""

    def insert(self, table: str, columns: Mapping[str, Sequence[Any]]) -> Any: ...


class LogTable(TableWriter, Protocol):
    """A table writer that can also read the chain's last row."""

    @property
    def database(self) -> str: ...

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...


_TAIL_SQL = f"SELECT seq, row_hash FROM {ACCESS_LOG_TABLE} WHERE row_hash != '' ORDER BY seq DESC LIMIT 1"
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def chained_columns(
    records: Sequence[AccessRecord], *, seq: int, prev: str
) -> tuple[dict[str, list[Any]], int, str]:
    """The column batch for ``records`` chained after ``(seq, prev)``; returns it and the new tail."""
    columns: dict[str, list[Any]] = {
        name: [] for name in (*AccessRecord.__dataclass_fields__, "seq", "prev_hash", "row_hash")
    }
    for record in records:
        record = replace(record, at=log_time(record.at))
        seq += 1
        digest = chain_hash(prev, seq, asdict(record))
        for name, value in asdict(record).items():
            columns[name].append(value)
        columns["seq"].append(seq)
        columns["prev_hash"].append(prev)
        columns["row_hash"].append(digest)
        prev = digest
    return columns, seq, prev


class IndexAccessLog:
    """Rows in the index's ``access_log`` table, one chained insert per batch."""

    def __init__(self, index: LogTable) -> None:
        self._index = index

    def append(self, records: Sequence[AccessRecord]) -> None:
        if not records:
            return
        target = getattr(self._index, "path", None) or getattr(self._index, "url", None) or id(self._index)
        with _lock_for(f"index:{target}:{getattr(self._index, 'database', '')}"):
            tail = self._index.query(_TAIL_SQL)
            seq, prev = (int(tail[0]["seq"]), str(tail[0]["row_hash"])) if tail else (0, GENESIS)
            columns, _, _ = chained_columns(records, seq=seq, prev=prev)
            self._index.insert(ACCESS_LOG_TABLE, columns)


class JsonlAccessLog:
    """One JSON object per line in ``path``, chained like the table; each append is flushed and
    fsync'd before returning."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, records: Sequence[AccessRecord]) -> None:
        if not records:
            return
        with _lock_for(f"file:{self.path.resolve()}"):
            rows = self.read()
            tail = next((r for r in reversed(rows) if r.get("row_hash")), None)
            seq, prev = (int(tail["seq"]), str(tail["row_hash"])) if tail else (0, GENESIS)
            columns, _, _ = chained_columns(records, seq=seq, prev=prev)
            lines = "".join(
                json.dumps(
                    {name: _jsonable(values[i]) for name, values in columns.items()}, ensure_ascii=False
                )
                + "\n"
                for i in range(len(records))
            )
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(lines)
                fh.flush()
                os.fsync(fh.fileno())

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]


def read_access_log(index: LogTable) -> list[dict[str, Any]]:
    """Every row of ``access_log`` with the chained columns (``blackbox access log verify``)."""
    return index.query(
        "SELECT seq, prev_hash, row_hash, at, caller, scope, decision_id, agent_id, action, reason, "
        f"outcome, detail, grant_id, authority, purpose FROM {ACCESS_LOG_TABLE}"
    )


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value
