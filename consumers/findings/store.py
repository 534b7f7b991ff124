"""The SQL of findings: the ``findings`` and ``finding_decisions`` tables, and the index reads a finding
needs (the decisions a replay run touched, where each candidate capture is stored)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumers.index.engine import insert_rows
from consumers.index.trends import DIMENSIONS

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = [
    "STORED_COLUMNS",
    "decision_rows_by_id",
    "get_finding",
    "insert_finding",
    "list_findings",
    "pinned_decisions",
    "replay_run_decisions",
    "window_rows",
]

STORED_COLUMNS = (
    "decision_id, agent_id, captured_at, trust, content_state, segment_key, segment_offset, "
    "segment_length, content_sha256, manifest_json"
)
"""What locating and reading a stored capture takes (``consumers.storage.reader.read_stored``)."""

_FINDING_SQL = (
    "SELECT name, rule, description, created_at, created_by, from_replay FROM findings FINAL "
    "WHERE name = {name:String} LIMIT 1"
)


def insert_finding(index: Index, finding: Mapping[str, Any], decisions: Sequence[Mapping[str, Any]]) -> None:
    """The pinned decisions first, then the finding row (a finding that exists has its suite)."""
    insert_rows(index, "finding_decisions", decisions)
    insert_rows(index, "findings", [finding])


def get_finding(index: Index, name: str) -> dict[str, Any] | None:
    rows = index.query(_FINDING_SQL, {"name": name})
    return rows[0] if rows else None


def list_findings(index: Index) -> list[dict[str, Any]]:
    """Every finding with the size of its pinned suite, oldest first."""
    return index.query(
        "SELECT f.name AS name, f.rule AS rule, f.created_at AS created_at, f.from_replay AS from_replay, "
        "count(d.decision_id) AS pinned "
        "FROM (SELECT * FROM findings FINAL) AS f "
        "LEFT JOIN (SELECT name, decision_id FROM finding_decisions FINAL) AS d ON d.name = f.name "
        "GROUP BY f.name, f.rule, f.created_at, f.from_replay ORDER BY f.created_at, f.name"
    )


def pinned_decisions(index: Index, name: str) -> list[dict[str, Any]]:
    """The suite of a finding, oldest decision first, with its current failure state (flags included)."""
    return index.query(
        "SELECT p.decision_id AS decision_id, p.agent_id AS agent_id, p.captured_at AS captured_at, "
        "p.source AS source, d.prompt_version AS prompt_version, d.model_version AS model_version, "
        "d.failed_any AS failed "
        "FROM (SELECT * FROM finding_decisions FINAL WHERE name = {name:String}) AS p "
        "LEFT JOIN (SELECT decision_id, prompt_version, model_version, failed_any FROM decisions_current "
        "WHERE decision_id IN (SELECT decision_id FROM finding_decisions WHERE name = {name:String})) AS d "
        "ON d.decision_id = p.decision_id ORDER BY p.captured_at, p.decision_id",
        {"name": name},
    )


def replay_run_decisions(index: Index, run_id: str) -> list[str]:
    """The decisions a replay run (``replay_runs.run_id``) replayed, in id order."""
    rows = index.query(
        "SELECT DISTINCT decision_id FROM replay_runs WHERE run_id = {run:String} ORDER BY decision_id",
        {"run": run_id},
    )
    return [str(r["decision_id"]) for r in rows]


def decision_rows_by_id(index: Index, decision_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Where each of these decisions is stored (:data:`STORED_COLUMNS`), keyed by id; unknown ids are absent."""
    rows = index.query(
        f"SELECT {STORED_COLUMNS} FROM decisions FINAL WHERE decision_id IN {{ids:Array(String)}}",
        {"ids": list(decision_ids)},
    )
    return {str(r["decision_id"]): r for r in rows}


def window_rows(
    index: Index, *, since: datetime, until: datetime, agent: str | None, by: str | None
) -> list[dict[str, Any]]:
    """The trusted decisions captured in ``[since, until)`` (of ``agent``), where each is stored, its
    day and, with ``by``, its value of that dimension (a name from the trend catalog's ``DIMENSIONS``,
    checked by the caller), ordered by time."""
    group = f", {DIMENSIONS[by]} AS by_value" if by else ""
    return index.query(
        f"SELECT {STORED_COLUMNS}, toDate(captured_at) AS day{group} FROM decisions_current "
        "WHERE trust = 'verified' AND captured_at >= {since:DateTime64(3, 'UTC')} "
        "AND captured_at < {until:DateTime64(3, 'UTC')} AND ({agent:String} = '' OR agent_id = {agent:String}) "
        "ORDER BY captured_at, decision_id",
        {"since": since, "until": until, "agent": agent or ""},
    )
