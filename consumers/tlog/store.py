"""The log's SQL: ``tlog_leaves`` (decision id to leaf index), read and written here only (``ddl.sql``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumers.index.engine import insert_rows

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = [
    "LeafRow",
    "entry_keys",
    "insert_leaves",
    "last_typed_leaf",
    "leaf_count",
    "leaf_of",
    "leaves_of",
    "logged_ids",
]

_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class LeafRow:
    """One appended leaf: where it is, which decision it holds, and its bytes."""

    leaf_index: int
    decision_id: str
    captured_at: datetime
    leaf: bytes
    appended_at: datetime


def _row(r: dict[str, Any]) -> LeafRow:
    leaf = r["leaf"]
    return LeafRow(
        int(r["leaf_index"]),
        str(r["decision_id"]),
        r["captured_at"],
        leaf.encode("utf-8") if isinstance(leaf, str) else bytes(leaf),
        r["appended_at"],
    )


def leaf_count(index: Index) -> int:
    """The log's size as the index knows it (rows are written only after their tiles)."""
    # leaves are inserted in contiguous runs, so the size is the highest index + 1 (no FINAL: a repeated
    # row has the same index, and the count only tells an empty table apart)
    rows = index.query("SELECT count() AS n, max(leaf_index) AS top FROM tlog_leaves")
    return int(rows[0]["top"]) + 1 if rows and int(rows[0]["n"]) else 0


def logged_ids(index: Index, decision_ids: Sequence[str]) -> set[str]:
    """Which of ``decision_ids`` already have a leaf."""
    found: set[str] = set()
    ids = list(dict.fromkeys(decision_ids))
    for start in range(0, len(ids), _CHUNK):
        rows = index.query(
            "SELECT DISTINCT decision_id FROM tlog_leaves WHERE decision_id IN {ids:Array(String)}",
            {"ids": ids[start : start + _CHUNK]},
        )
        found.update(str(r["decision_id"]) for r in rows)
    return found


def insert_leaves(index: Index, rows: Sequence[LeafRow]) -> int:
    """One insert; the leaf bytes (UTF-8 JSON) are stored as text."""
    return insert_rows(
        index,
        "tlog_leaves",
        [
            {
                "leaf_index": r.leaf_index,
                "decision_id": r.decision_id,
                "captured_at": r.captured_at,
                "leaf": r.leaf.decode("utf-8"),
                "appended_at": r.appended_at,
            }
            for r in rows
        ],
        dedup_token=f"tlog:{rows[0].leaf_index}:{len(rows)}" if rows else None,
    )


def leaf_of(index: Index, decision_id: str) -> LeafRow | None:
    """The leaf of one decision (the first, should a race ever have appended it twice)."""
    rows = index.query(
        "SELECT * FROM tlog_leaves FINAL WHERE decision_id = {id:String} ORDER BY leaf_index LIMIT 1",
        {"id": decision_id},
    )
    return _row(rows[0]) if rows else None


# An entry other than a capture is found by its key's prefix and its leaf's type: a key is whatever a
# capture says its decision id is, so a capture can be named like an apply (``pact:…``), but its leaf's
# type member is a capture's, and a string inside a leaf cannot hold the unescaped quotes of that member.
_TYPED = "startsWith(decision_id, {p:String}) AND position(leaf, {t:String}) > 0"


def _typed(prefix: str, leaf_type: str) -> dict[str, str]:
    return {"p": prefix, "t": f'"type":"{leaf_type}"'}


def entry_keys(index: Index, prefix: str, leaf_type: str) -> list[str]:
    """The keys of the ``leaf_type`` entries whose key starts with ``prefix``, in log order."""
    rows = index.query(
        f"SELECT decision_id FROM tlog_leaves FINAL WHERE {_TYPED} ORDER BY leaf_index",
        _typed(prefix, leaf_type),
    )
    return [str(r["decision_id"]) for r in rows]


def last_typed_leaf(index: Index, prefix: str, leaf_type: str) -> LeafRow | None:
    """The last ``leaf_type`` leaf whose key starts with ``prefix`` (callers still parse it)."""
    rows = index.query(
        f"SELECT * FROM tlog_leaves FINAL WHERE {_TYPED} ORDER BY leaf_index DESC LIMIT 1",
        _typed(prefix, leaf_type),
    )
    return _row(rows[0]) if rows else None


def leaves_of(index: Index, *, start: int = 0, batch: int = 50_000) -> Iterator[LeafRow]:
    """Every leaf row in index order, read in batches."""
    at = start
    while True:
        rows = index.query(
            "SELECT * FROM tlog_leaves FINAL WHERE leaf_index >= {at:UInt64} ORDER BY leaf_index "
            "LIMIT {n:UInt64}",
            {"at": at, "n": batch},
        )
        if not rows:
            return
        for r in rows:
            yield _row(r)
        at = int(rows[-1]["leaf_index"]) + 1


# --- what `blackbox log verify` reads of the rest of the index -------------------------------------------
def decision_manifests(index: Index, decision_ids: Sequence[str]) -> list[dict[str, Any]]:
    """``decision_id, manifest_json, content_state`` of the current version of each decision."""
    return index.query(
        "SELECT decision_id, manifest_json, content_state FROM decisions FINAL "
        "WHERE decision_id IN {ids:Array(String)}",
        {"ids": list(decision_ids)},
    )


def expired_ids(index: Index, decision_ids: Sequence[str]) -> set[str]:
    """Which of ``decision_ids`` the retention policy expired (the deletions log says so)."""
    rows = index.query(
        "SELECT DISTINCT decision_id FROM deletions WHERE action = 'expire' AND decision_id IN {ids:Array(String)}",
        {"ids": list(decision_ids)},
    )
    return {str(r["decision_id"]) for r in rows}


def verified_ids(index: Index) -> list[str]:
    """Every decision whose current version ingest accepted as verified."""
    return [
        str(r["decision_id"])
        for r in index.query("SELECT decision_id FROM decisions FINAL WHERE trust = 'verified'")
    ]
