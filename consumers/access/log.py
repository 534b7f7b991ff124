"""The access log: one append-only row per attempt to read capture content, allowed or denied.

Two sinks behind one Protocol: the index's ``access_log`` table (the default, queryable next to
the decisions) and a JSON-lines file (fsync'd per append) for setups without an index. A sink
that cannot write raises; the gate then refuses the read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

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


class AccessLog(Protocol):
    def append(self, records: Sequence[AccessRecord]) -> None:
        """Durably append ``records`` (one write); raise if they could not be written."""
        ...


class TableWriter(Protocol):
    """The slice of ``consumers.index.Index`` the access log and replay runs need."""

    def insert(self, table: str, columns: Mapping[str, Sequence[Any]]) -> Any: ...


class IndexAccessLog:
    """Rows in the index's ``access_log`` table, one insert per batch."""

    def __init__(self, index: TableWriter) -> None:
        self._index = index

    def append(self, records: Sequence[AccessRecord]) -> None:
        if not records:
            return
        columns: dict[str, list[Any]] = {name: [] for name in AccessRecord.__dataclass_fields__}
        for record in records:
            for name, value in asdict(record).items():
                columns[name].append(value)
        self._index.insert(ACCESS_LOG_TABLE, columns)


class JsonlAccessLog:
    """One JSON object per line in ``path``; each append is flushed and fsync'd before returning."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, records: Sequence[AccessRecord]) -> None:
        if not records:
            return
        lines = "".join(
            json.dumps({**asdict(r), "at": r.at.isoformat()}, ensure_ascii=False) + "\n" for r in records
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
