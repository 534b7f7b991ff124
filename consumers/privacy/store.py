"""The index side of personal data: which decisions belong to a subject (for erasure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["decisions_of_subject"]


def decisions_of_subject(index: Index, origin_ids: Iterable[str]) -> list[str]:
    """Every indexed decision whose ``origin_user_id`` is one of ``origin_ids`` (the forms a subject's
    id may be stored in: keyed hash, or raw)."""
    rows = index.query(
        "SELECT DISTINCT decision_id FROM decisions FINAL WHERE origin_user_id IN {s:Array(String)} "
        "ORDER BY decision_id",
        {"s": list(origin_ids)},
    )
    return [str(row["decision_id"]) for row in rows]
