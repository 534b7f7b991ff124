"""The index side of replay: what a replay reads about a capture and where its results go.

* :func:`capture_row`: the one narrow ``FINAL`` read that locates a capture (segment key, offset,
  length, content hash) or, once compacted, hands back its signed manifest;
* :func:`sample_full`: a reproducible sample of full captures for regression runs;
* :func:`insert_runs`: ``replay_runs`` rows, one insert per batch;
* :func:`seen_versions`: the prompt / tool-schema / model versions trusted captures ran, and which
  full capture holds each one's content (``system_prompt=v4.6`` resolves through it);
* :func:`decision_failed`: whether a decision failed, flags included (what a probe reproduces).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.access.log import TableWriter
    from consumers.index import Index

__all__ = [
    "REPLAY_RUNS_TABLE",
    "capture_row",
    "decision_failed",
    "insert_runs",
    "sample_full",
    "seen_versions",
]

REPLAY_RUNS_TABLE = "replay_runs"

# One narrow FINAL read: the decisions_current view (SELECT *, flags join) costs ~7x more.
_ROW_SQL = (
    "SELECT content_state, segment_key, segment_offset, segment_length, content_sha256, manifest_json "
    "FROM decisions FINAL WHERE decision_id = {id:String} LIMIT 1"
)


def capture_row(index: Index, decision_id: str) -> dict[str, Any] | None:
    """Where the capture of ``decision_id`` is stored (``content_state``, ``segment_key``,
    ``segment_offset``, ``segment_length``, ``content_sha256``, ``manifest_json``), or None."""
    rows = index.query(_ROW_SQL, {"id": decision_id})
    return rows[0] if rows else None


def sample_full(index: Index, *, since: datetime | None, agent: str | None, n: int) -> list[str]:
    """Up to ``n`` ids of decisions whose full content is still stored (``full`` or ``sampled``
    captures, not compacted), captured at or after ``since``, of ``agent``; the same ids every time
    for the same index (ordered by a hash of the id)."""
    conditions = ["capture_level IN ('full', 'sampled')", "content_state = 'full'"]
    params: dict[str, Any] = {"n": n}
    if since is not None:
        conditions.append("captured_at >= {since:DateTime64(3, 'UTC')}")
        params["since"] = since if since.tzinfo else since.replace(tzinfo=UTC)
    if agent is not None:
        conditions.append("agent_id = {agent:String}")
        params["agent"] = agent
    rows = index.query(
        f"SELECT decision_id FROM decisions_current WHERE {' AND '.join(conditions)} "
        "ORDER BY cityHash64(decision_id) LIMIT {n:UInt32}",
        params,
    )
    return [str(r["decision_id"]) for r in rows]


def insert_runs(index: TableWriter, rows: Sequence[Mapping[str, Any]]) -> None:
    """``replay_runs`` rows, each a mapping of column name to value (the run log hands its rows over
    as plain mappings, so this store does not import the run log's types), one insert."""
    if not rows:
        return
    columns: dict[str, list[Any]] = {name: [] for name in rows[0]}
    for row in rows:
        for name, value in row.items():
            columns[name].append(value)
    index.insert(REPLAY_RUNS_TABLE, columns)


# Columns a version may be read from (never user input: the catalog passes one of these).
_VERSION_COLUMNS = frozenset({"prompt_version", "tool_schema_version", "model_version", "model_id"})
_HASH_COLUMNS = frozenset({"prompt_hash", "tool_schema_hash"})
_HOLDS_CONTENT = "content_state = 'full' AND capture_level IN ('full', 'sampled')"


def seen_versions(index: Index, *, column: str, hash_column: str | None = None) -> list[dict[str, Any]]:
    """Each value of ``column`` among trusted decisions: ``version``, ``decisions``, ``held`` (full
    captures still holding content), ``contents`` (distinct ``hash_column`` values among those) and
    ``example`` (the newest of them)."""
    if column not in _VERSION_COLUMNS or (hash_column is not None and hash_column not in _HASH_COLUMNS):
        raise ValueError(f"not a version column: {column}")
    contents = (
        f"uniqExactIf({hash_column}, {_HOLDS_CONTENT})"
        if hash_column
        else f"toUInt64(countIf({_HOLDS_CONTENT}) > 0)"
    )
    return index.query(
        f"SELECT {column} AS version, count() AS decisions, countIf({_HOLDS_CONTENT}) AS held, "
        f"{contents} AS contents, argMaxIf(decision_id, captured_at, {_HOLDS_CONTENT}) AS example "
        f"FROM decisions_current WHERE trust = 'verified' AND {column} != '' GROUP BY version"
    )


def decision_failed(index: Index, decision_id: str) -> bool | None:
    """Whether the decision failed (its outcome or a later failure flag); None when not indexed."""
    rows = index.query(
        "SELECT failed_any FROM decisions_current WHERE decision_id = {id:String} LIMIT 1",
        {"id": decision_id},
    )
    return bool(rows[0]["failed_any"]) if rows else None
