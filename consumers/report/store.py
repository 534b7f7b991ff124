"""The index side of the report: the SQL the page runs besides the trend catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["latest_probe", "recent_gates", "recent_replays"]


def recent_replays(index: Index, *, limit: int = 20) -> list[dict[str, Any]]:
    """The latest ``replay_runs`` rows (``at, decision_id, kind, variable, verdict, outcome_changed``),
    newest first."""
    return index.query(
        "SELECT at, decision_id, kind, variable, verdict, outcome_changed FROM replay_runs "
        "ORDER BY at DESC, decision_id LIMIT {limit:UInt32}",
        {"limit": limit},
    )


def latest_probe(index: Index) -> list[dict[str, Any]]:
    """Every row of the newest probe run (``kind = 'probe'``): ``decision_id``, ``variable``,
    ``verdict``, ``probe_point`` (JSON: step, x, measure, series), ``run_id``, ``at``."""
    return index.query(
        "SELECT run_id, at, decision_id, variable, verdict, probe_point FROM replay_runs "
        "WHERE kind = 'probe' AND run_id = (SELECT argMax(run_id, at) FROM replay_runs WHERE kind = 'probe') "
        "ORDER BY attempt"
    )


def recent_gates(index: Index, *, limit: int = 10) -> list[dict[str, Any]]:
    """The newest regress runs, one row each: ``suite``, ``configuration``, ``decisions`` and how many
    were ``fixed`` / ``regressed`` / ``not_replayed`` / ``failing`` (a check fails after the change),
    and ``passed`` (what the run's exit code said)."""
    return index.query(
        "SELECT run_id, min(at) AS at, any(suite) AS suite, any(variation_value) AS configuration, "
        "count() AS decisions, countIf(startsWith(verdict, 'fixed')) AS fixed, "
        "countIf(startsWith(verdict, 'regressed')) AS regressed, "
        "countIf(startsWith(verdict, 'not replayed')) AS not_replayed, "
        "countIf(position(verdict, 'failing ') > 0) AS failing, "
        "(regressed + not_replayed + failing) = 0 AS passed "
        "FROM replay_runs WHERE kind = 'regress' GROUP BY run_id ORDER BY at DESC LIMIT {limit:UInt32}",
        {"limit": limit},
    )
