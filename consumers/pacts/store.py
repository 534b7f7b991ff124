"""The SQL of pacts: ``pact_violations`` rows and the failure flags a violation writes.

Both are deterministic for a decision (the flag's ``flaggedAt`` is the decision's ``capturedAt``), so
a batch that ingest runs again writes the same keys and the ReplacingMergeTree tables keep one row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumers.index.engine import insert_rows
from consumers.pacts.evaluate import RuleResult

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = [
    "FLAG_PREFIX",
    "flag_reason",
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
