"""The SQL of pacts: ``pact_violations`` rows and the failure flags a violation writes.

Both are deterministic for a decision (the flag's ``flaggedAt`` is the decision's ``capturedAt``), so
a batch that ingest runs again writes the same keys and the ReplacingMergeTree tables keep one row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from consumers.index.engine import insert_rows
from consumers.pacts.evaluate import RuleResult

if TYPE_CHECKING:
    from consumers.index import Index
    from consumers.pacts.versions import PactVersion

__all__ = [
    "FLAG_PREFIX",
    "agent_known",
    "flag_reason",
    "insert_version",
    "insert_violations",
    "pact_flag_row",
    "violation_rows",
    "violations_of",
]

FLAG_PREFIX = "pact violated: "


def flag_reason(rules: Sequence[str]) -> str:
    """The ``flags.reason`` / ``consequential_reason`` of a decision that violated ``rules``."""
    return FLAG_PREFIX + ", ".join(rules)


def violation_rows(
    decision: Mapping[str, Any],
    results: Iterable[RuleResult],
    *,
    evaluated_at: datetime,
    pact_version: str = "",
) -> list[dict[str, Any]]:
    """``pact_violations`` rows of one decision (``decision``: its ``decisions`` row), naming the pact
    version that judged it (``''``: the local pacts file)."""
    return [
        {
            "decision_id": decision["decision_id"],
            "agent_id": decision["agent_id"],
            "captured_at": decision["captured_at"],
            "rule": r.rule,
            "kind": r.kind,
            "detail": r.detail,
            "pact_version": pact_version,
            "evaluated_at": evaluated_at,
        }
        for r in results
    ]


def pact_flag_row(
    decision: Mapping[str, Any], rules: Sequence[str], *, received_at: datetime
) -> dict[str, Any]:
    """The ``flags`` row of a violation: a failure, so ``failed_any`` counts it (the flags path of
    :mod:`consumers.ingest.flags`, without an event: ingest itself is the one that noticed)."""
    return {
        "decision_id": decision["decision_id"],
        "agent_id": decision["agent_id"],
        "reason": flag_reason(rules),
        "failure": True,
        "flagged_at": decision["captured_at"],
        "received_at": received_at,
    }


def insert_violations(index: Index, rows: Sequence[Mapping[str, Any]]) -> int:
    """``pact_violations`` rows, one insert."""
    return insert_rows(index, "pact_violations", rows)


def violations_of(index: Index, decision_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The pact results recorded for these decisions, by decision and rule."""
    return index.query(
        "SELECT decision_id, rule, kind, detail FROM pact_violations FINAL "
        "WHERE decision_id IN {ids:Array(String)} ORDER BY decision_id, rule, kind",
        {"ids": list(decision_ids)},
    )


def record_rows(
    index: Index, agent: str, *, since: datetime, until: datetime | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The rows behind an agent's record (:mod:`consumers.pacts.record`): ``head`` (one row: n,
    consequential, failures, clean), ``violations``, ``findings``, ``runs`` and ``applications``;
    decisions captured in ``[since, until)`` (no end when ``until`` is None)."""
    params = {"agent": agent, "since": since, "until": until or datetime(9999, 1, 1, tzinfo=UTC)}
    captured = "captured_at >= {since:DateTime64(3, 'UTC')} AND captured_at < {until:DateTime64(3, 'UTC')}"
    window = f"agent_id = {{agent:String}} AND trust = 'verified' AND {captured}"
    violated = (
        "SELECT decision_id FROM pact_violations FINAL WHERE kind = 'violation' "
        f"AND agent_id = {{agent:String}} AND {captured}"
    )
    head = index.query(
        "SELECT count() AS n, countIf(consequential OR decision_id IN "
        "(SELECT decision_id FROM flags WHERE agent_id = {agent:String})) AS consequential, "
        f"countIf(failed_any) AS failures, countIf(NOT failed_any AND decision_id NOT IN ({violated})) AS clean "
        f"FROM decisions_current WHERE {window}",
        params,
    )
    violations = index.query(
        "SELECT rule, uniqExact(decision_id) AS decisions, groupUniqArray(pact_version) AS versions "
        "FROM pact_violations FINAL WHERE kind = 'violation' AND agent_id = {agent:String} "
        f"AND {captured} AND decision_id IN "
        f"(SELECT decision_id FROM decisions_current WHERE {window}) GROUP BY rule ORDER BY rule",
        params,
    )
    findings = index.query(
        "SELECT name, uniqExact(decision_id) AS decisions FROM finding_decisions FINAL WHERE decision_id IN "
        f"(SELECT decision_id FROM decisions_current WHERE {window}) GROUP BY name ORDER BY name",
        params,
    )
    runs = index.query(
        "SELECT run_id, countIf(verdict LIKE 'regressed%' OR verdict LIKE 'not replayed%' "
        "OR verdict LIKE '%failing %') AS bad FROM replay_runs FINAL WHERE kind = 'regress' "
        "AND agent_id = {agent:String} AND at >= {since:DateTime64(3, 'UTC')} "
        "AND at < {until:DateTime64(3, 'UTC')} GROUP BY run_id",
        params,
    )
    applications = index.query(
        "SELECT a.version AS version, a.applied_at AS applied_at, a.forced AS forced, v.agents AS agents "
        "FROM (SELECT * FROM pact_applications FINAL) AS a "
        "LEFT JOIN (SELECT version, agents FROM pact_versions FINAL) AS v ON v.version = a.version "
        "ORDER BY a.applied_at"
    )
    return {
        "head": head,
        "violations": violations,
        "findings": findings,
        "runs": runs,
        "applications": applications,
    }


def insert_version(index: Index, version: PactVersion) -> None:
    """The ``pact_versions`` row of a proposed version (what ``pact history`` joins the applies to)."""
    insert_rows(
        index,
        "pact_versions",
        [
            {
                "version": version.version,
                "content_hash": version.content_hash,
                "parent": version.parent,
                "author": version.author,
                "reason": version.reason,
                "agents": ",".join(version.book.agents),
                "key_id": version.key_id,
                "created_at": version.created_at,
            }
        ],
    )


def agent_known(index: Index, agent: str) -> bool:
    """Whether the index holds any decision of ``agent`` (a record of an unknown agent is a 404)."""
    rows = index.query("SELECT count() AS n FROM decisions WHERE agent_id = {agent:String}", {"agent": agent})
    return bool(rows and int(rows[0]["n"]))


def gate_candidates(index: Index, *, sample: int, binds: Any) -> tuple[set[str], list[str]]:
    """What ``pact apply`` judges: every finding's pinned decision ids, and the ``sample`` most recent
    verified decisions of the agents ``binds(agent_id)`` accepts."""
    pinned = {str(r["decision_id"]) for r in index.query("SELECT decision_id FROM finding_decisions FINAL")}
    agents = [
        str(r["agent_id"])
        for r in index.query("SELECT DISTINCT agent_id FROM decisions")
        if binds(str(r["agent_id"]))
    ]
    recent = index.query(
        "SELECT decision_id FROM decisions_current WHERE trust = 'verified' "
        "AND agent_id IN {agents:Array(String)} ORDER BY captured_at DESC, decision_id LIMIT {n:UInt32}",
        {"agents": agents, "n": sample},
    )
    return pinned, [str(r["decision_id"]) for r in recent]
