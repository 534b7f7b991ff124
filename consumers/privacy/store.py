"""The index side of personal data: which decisions belong to a subject, and their holds (for erasure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["confirmed_erasures", "decisions_of_subject", "erasure_states"]

_CHUNK = 10_000  # ids per query parameter: bounded, far below the engine's query size limit


def decisions_of_subject(index: Index, origin_ids: Iterable[str]) -> list[str]:
    """Every indexed decision whose ``origin_user_id`` is one of ``origin_ids`` (the forms a subject's
    id may be stored in: keyed hash, or raw)."""
    rows = index.query(
        "SELECT DISTINCT decision_id FROM decisions FINAL WHERE origin_user_id IN {s:Array(String)} "
        "ORDER BY decision_id",
        {"s": list(origin_ids)},
    )
    return [str(row["decision_id"]) for row in rows]


def erasure_states(index: Index, decision_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{decision_id: {agent_id, legal_hold, hold_reason}}`` of the current version of each indexed one
    of ``decision_ids`` (absent: not in the index), in one query per :data:`_CHUNK` ids."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(decision_ids), _CHUNK):
        rows = index.query(
            "SELECT decision_id, agent_id, legal_hold, hold_reason FROM decisions FINAL "
            "WHERE decision_id IN {ids:Array(String)}",
            {"ids": list(decision_ids[start : start + _CHUNK])},
        )
        found.update((str(row["decision_id"]), row) for row in rows)
    return found


def confirmed_erasures(index: Index, decision_ids: Sequence[str]) -> set[str]:
    """Those of ``decision_ids`` whose erasure the retention log confirms (an ``erased`` entry)."""
    found: set[str] = set()
    for start in range(0, len(decision_ids), _CHUNK):
        rows = index.query(
            "SELECT DISTINCT decision_id FROM deletions WHERE action = 'erased' "
            "AND decision_id IN {ids:Array(String)}",
            {"ids": list(decision_ids[start : start + _CHUNK])},
        )
        found.update(str(row["decision_id"]) for row in rows)
    return found
