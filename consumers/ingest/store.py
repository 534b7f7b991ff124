"""The index side of ingest: the rows a batch writes and the SQL it reads before writing them.

Writes go child tables first and ``decisions`` last (:func:`insert_captures`), so a decision row that
exists implies its tool-call and memory rows exist (the trend catalog relies on it). A state change of
an indexed decision is a new row version copied inside the engine (:func:`update_decisions`); reads of
the current state go through ``FINAL`` (``decisions`` is a ReplacingMergeTree; see ``ddl.sql``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from consumers.index.engine import base_type, check_identifier, insert_rows, state_version
from consumers.index.rows import CaptureRows, RowBatch
from schemas.errors import IndexError_

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = [
    "CHUNK",
    "current_decisions",
    "flag_reasons",
    "insert_captures",
    "insert_flags",
    "insert_quarantine",
    "known_quarantine",
    "update_decisions",
]

CHUNK = 10_000
"""Ids per statement (the parameter arrays stay well below the server's query size limits)."""

_FROZEN_COLUMNS = frozenset({"decision_id", "agent_id", "captured_at", "version"})


# --- writes ------------------------------------------------------------------------------------------
def insert_captures(
    index: Index, captures: RowBatch | Iterable[CaptureRows], *, dedup_token: str | None = None
) -> int:
    """Insert the rows of many captures (each a :class:`~consumers.index.rows.CaptureRows`, or one
    :class:`~consumers.index.rows.RowBatch`). Child tables go first and ``decisions`` last, so a
    decision row that exists implies its tool-call and memory rows exist. Returns decisions inserted.

    ``dedup_token`` (per table: ``<token>:<table>``) lets the engine drop a retried batch at insert.
    """
    batch = captures if isinstance(captures, RowBatch) else RowBatch.of(captures)
    for table in ("tool_calls", "memory_entries", "decisions"):
        columns = batch.columns(table)
        if columns:
            token = f"{dedup_token}:{table}" if dedup_token else None
            index.insert(table, columns, dedup_token=token)
    return len(batch)


def insert_flags(index: Index, rows: Sequence[Mapping[str, Any]]) -> int:
    """``flags`` rows (:func:`consumers.index.rows.flag_row`), one insert."""
    return insert_rows(index, "flags", rows)


def insert_quarantine(index: Index, rows: Sequence[Mapping[str, Any]]) -> int:
    """``quarantine`` rows, one insert."""
    return insert_rows(index, "quarantine", rows)


def update_decisions(
    index: Index, decision_ids: Sequence[str], changes: Mapping[str, Any], *, version: int | None = None
) -> None:
    """Write a new version of each listed decision with ``changes`` applied (all other columns are
    copied from its current version, inside the engine). Decisions whose current version is already
    >= ``version`` are left alone, so a late or repeated update never rolls state back.
    """
    if not changes:
        raise IndexError_("update_decisions needs at least one column to change")
    version = state_version() if version is None else version
    types = index.column_types("decisions")
    replace: list[str] = []
    params: dict[str, Any] = {"version": version}
    for i, (column, value) in enumerate(changes.items()):
        if column not in types or column in _FROZEN_COLUMNS:
            raise IndexError_(f"decisions: column {column!r} cannot be updated")
        base, nullable = base_type(types[column])
        param_type = f"Nullable({base})" if nullable else base
        replace.append(f"{{c{i}:{param_type}}} AS {column}")
        params[f"c{i}"] = value
    replace.append("{version:UInt64} AS version")
    # The filter sits in a subquery: in ClickHouse a REPLACE alias would shadow the column in WHERE.
    sql = (
        f"INSERT INTO decisions SELECT * REPLACE ({', '.join(replace)}) FROM "
        "(SELECT * FROM decisions FINAL WHERE decision_id IN {ids:Array(String)} "
        "AND version < {version:UInt64})"
    )
    ids = list(dict.fromkeys(decision_ids))
    for start in range(0, len(ids), CHUNK):
        index.command(sql, {**params, "ids": ids[start : start + CHUNK]})


# --- reads -------------------------------------------------------------------------------------------
def current_decisions(
    index: Index, decision_ids: Sequence[str], *, columns: Sequence[str] = ("decision_id", "content_sha256")
) -> dict[str, dict[str, Any]]:
    """Current version of many decisions, keyed by id; only ``columns`` are read (dedup uses them to
    spot same-id-different-content before inserting)."""
    cols = ", ".join(check_identifier(c, "column") for c in dict.fromkeys(["decision_id", *columns]))
    found: dict[str, dict[str, Any]] = {}
    ids = list(dict.fromkeys(decision_ids))
    for start in range(0, len(ids), CHUNK):
        for row in index.query(
            f"SELECT {cols} FROM decisions FINAL WHERE decision_id IN {{ids:Array(String)}}",
            {"ids": ids[start : start + CHUNK]},
        ):
            found[row["decision_id"]] = row
    return found


def known_quarantine(index: Index, decision_ids: Sequence[str]) -> set[tuple[str, str, str]]:
    """``(decision_id, content_sha256, reason)`` already in ``quarantine`` for these decisions."""
    rows = index.query(
        "SELECT DISTINCT decision_id, content_sha256, reason FROM quarantine WHERE decision_id IN {ids:Array(String)}",
        {"ids": list(decision_ids)},
    )
    return {(r["decision_id"], r["content_sha256"], r["reason"]) for r in rows}


def flag_reasons(index: Index, decision_ids: Sequence[str]) -> list[dict[str, Any]]:
    """One ``{decision_id, agent_id, reason}`` per (decision, flagging agent) in ``flags``."""
    return index.query(
        "SELECT decision_id, agent_id, any(reason) AS reason FROM flags "
        "WHERE decision_id IN {ids:Array(String)} GROUP BY decision_id, agent_id",
        {"ids": list(decision_ids)},
    )
