"""The index side of the demo: the SQL the story runs besides the trend catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["failed_full_captures", "first_failed_capture"]


def first_failed_capture(index: Index, prompt_version: str) -> str | None:
    """The earliest decision on ``prompt_version`` that failed (by its outcome or a failure flag), is
    verified and still has its full content; None when there is none."""
    rows = index.query(
        "SELECT decision_id FROM decisions_current WHERE failed_any AND prompt_version = {p:String} "
        "AND content_state = 'full' AND trust = 'verified' ORDER BY captured_at, decision_id LIMIT 1",
        {"p": prompt_version},
    )
    return str(rows[0]["decision_id"]) if rows else None


def failed_full_captures(index: Index, prompt_version: str, *, limit: int) -> list[str]:
    """Up to ``limit`` earliest failed, verified, full decisions on ``prompt_version`` (replayable)."""
    rows = index.query(
        "SELECT decision_id FROM decisions_current WHERE failed_any AND prompt_version = {p:String} "
        "AND content_state = 'full' AND trust = 'verified' ORDER BY captured_at, decision_id LIMIT {n:UInt32}",
        {"p": prompt_version, "n": limit},
    )
    return [str(r["decision_id"]) for r in rows]
