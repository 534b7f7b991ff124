"""The index side of storage: the rows that say where a stored capture lives and what it recorded.

Every read is a ``FINAL`` read of one decision id (flags, compaction and holds write new row
versions), with ``{name:Type}`` parameters, on both engines (chdb and a ClickHouse server).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from consumers.index.engine import insert_rows

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = [
    "CHILD_TABLES",
    "VERSIONS_TABLE",
    "child_rows",
    "current_row",
    "current_row_and_quarantine",
    "insert_blob_versions",
    "quarantine_rows",
    "sealed_version",
]

VERSIONS_TABLE = "blob_versions"
"""The version id of each blob written on a versioned store (:mod:`.versions`)."""

# The tables derived from a capture beside its ``decisions`` row, and the columns that order them.
CHILD_TABLES: dict[str, tuple[str, ...]] = {
    "tool_calls": ("sequence",),
    "memory_entries": ("context_position", "entry_id"),
}


def current_row(index: Index, decision_id: str) -> dict[str, Any] | None:
    """The current version of one decision row (``FINAL``: flags, compaction and holds write versions).

    A direct read of ``decisions`` rather than the ``decisions_current`` view: show needs no failure
    join, and this is the path that has to stay well under the 20 ms show budget.
    """
    rows = index.query(
        "SELECT * FROM decisions FINAL WHERE decision_id = {id:String} LIMIT 1", {"id": decision_id}
    )
    return rows[0] if rows else None


def current_row_and_quarantine(
    index: Index, decision_id: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """:func:`current_row` and :func:`quarantine_rows` for the show path, in one query when the decision
    is indexed and has no quarantined copy (the common case): the row carries a count of its copies, and
    the quarantine table is read in full only when that count says there is something to list. Reading a
    56-column row costs the embedded engine ~12 ms; a second query only for an empty answer cost ~2.5 ms
    more, an eighth of show's budget."""
    rows = index.query(
        "SELECT *, (SELECT count() FROM quarantine WHERE decision_id = {id:String}) AS quarantined_copies_ "
        "FROM decisions FINAL WHERE decision_id = {id:String} LIMIT 1",
        {"id": decision_id},
    )
    if not rows:
        return None, quarantine_rows(index, decision_id)
    row = dict(rows[0])
    copies = row.pop("quarantined_copies_", 0)
    return row, quarantine_rows(index, decision_id) if copies else []


def quarantine_rows(index: Index, decision_id: str) -> list[dict[str, Any]]:
    """Every quarantined copy of ``decision_id``, oldest first."""
    return index.query(
        "SELECT * FROM quarantine FINAL WHERE decision_id = {id:String} ORDER BY received_at, source",
        {"id": decision_id},
    )


def child_rows(index: Index, table: str, decision_id: str) -> list[dict[str, Any]]:
    """The rows of one :data:`CHILD_TABLES` table for ``decision_id``, in their key order."""
    keys = CHILD_TABLES[table]  # a KeyError for any other name: the table is never caller-supplied SQL
    return index.query(
        f"SELECT * FROM {table} FINAL WHERE decision_id = {{id:String}} ORDER BY {', '.join(keys)}",
        {"id": decision_id},
    )


def sealed_version(index: Index, key: str) -> str | None:
    """The version id recorded for blob ``key`` (its latest write), or None when none was recorded."""
    rows = index.query(
        f"SELECT version_id FROM {VERSIONS_TABLE} FINAL WHERE blob_key = {{k:String}} LIMIT 1", {"k": key}
    )
    return str(rows[0]["version_id"]) if rows else None


def insert_blob_versions(index: Index, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert ``blob_versions`` rows (``blob_key``, ``version_id``, ``written_at``)."""
    return insert_rows(index, VERSIONS_TABLE, rows)
