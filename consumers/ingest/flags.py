"""Flag events (``flag_consequential``): verified, recorded, and applied to their decision.

A flag may arrive before its capture, with it, or long after (DESIGN decision 5). Each verified flag
becomes a ``flags`` row (the ``decisions_current`` view folds failure flags into ``failed_any``), and:

- its capture not indexed yet: the row waits in ``flags``; the capture is made consequential when it
  is indexed, if the flag's ``agentId`` is the capture's (:func:`pending_reasons`, one query per batch);
- its capture already indexed: a new ``decisions`` version with ``consequential`` and retention class
  ``consequential`` (:func:`upgrade_indexed`), so compaction keeps its content for ``retentionDays``.

The ``failed`` column keeps meaning "the capture's own outcome"; failure flags are read through
``failed_any`` rather than rewriting it.

A flag carries an inline signature (schema ``flag/v1``), checked by
:func:`producers.evidence.verify_flag`. Unsigned flags are refused by default: a forged failure flag
would change trend results and extend retention.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from consumers.index import Index, state_version
from consumers.ingest.store import flag_reasons, update_decisions
from producers.evidence import TrustStore
from producers.evidence import verify_flag as verify_signed_flag


def verify_flag(
    value: Mapping[str, Any], trust: TrustStore, *, now: datetime, require_signed: bool = True
) -> None:
    """Raise a VerificationError unless a trusted key signed ``value`` (or it is unsigned and allowed)."""
    if value.get("signature") is None and not require_signed:
        return
    verify_signed_flag(value, trust, at=now)


def pending_reasons(
    index: Index, agents: Mapping[str, str], batch_flags: Iterable[Mapping[str, Any]]
) -> dict[str, str]:
    """``{decision id: reason}`` for the ids of ``agents`` (``{decision id: agent id}``) flagged
    earlier (``flags`` table) or in this batch by a flag of the same agent: a flag signed for one
    agent never upgrades another agent's decision that arrives later under the same id."""
    reasons: dict[str, str] = {}
    if agents:
        for row in flag_reasons(index, list(agents)):
            if agents.get(row["decision_id"]) == row["agent_id"]:
                reasons.setdefault(row["decision_id"], row["reason"])
    for flag in batch_flags:
        did = str(flag["decisionId"])
        if did in agents and agents[did] == str(flag.get("agentId") or ""):
            reasons.setdefault(did, str(flag.get("reason") or ""))
    return reasons


def upgrade_indexed(
    index: Index,
    flags: Sequence[Mapping[str, Any]],
    existing: Mapping[str, Mapping[str, Any]],
    *,
    skip: set[str],
    now: datetime,
) -> int:
    """A new version of each already-indexed, not-yet-consequential decision a flag names; returns how many.

    ``existing`` holds the current rows (at least ``consequential``); ``skip`` the ids indexed by this
    batch, which were made consequential at insert. Idempotent: a consequential row is left alone.
    """
    upgraded = 0
    done: set[str] = set()
    for flag in flags:
        did = str(flag["decisionId"])
        row = existing.get(did)
        if did in skip or did in done or row is None or row.get("consequential"):
            continue
        done.add(did)
        update_decisions(
            index,
            [did],
            {
                "consequential": True,
                "consequential_reason": str(flag.get("reason") or ""),
                "retention_class": "consequential",
            },
            version=state_version(now),
        )
        upgraded += 1
    return upgraded
