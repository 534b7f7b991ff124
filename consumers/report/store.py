"""The index side of the report: the SQL the page runs besides the trend catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["recent_replays"]


def recent_replays(index: Index, *, limit: int = 20) -> list[dict[str, Any]]:
    """The latest ``replay_runs`` rows (``at, decision_id, kind, variable, verdict, outcome_changed``),
    newest first."""
    return index.query(
        "SELECT at, decision_id, kind, variable, verdict, outcome_changed FROM replay_runs "
        "ORDER BY at DESC, decision_id LIMIT {limit:UInt32}",
        {"limit": limit},
    )
