"""Applying a pact version: gate, log, move the shared pointer (``blackbox pact apply`` and the demo).
It lives in the app room, above pacts and findings, because it works over the whole runtime.

1. the gate (:mod:`consumers.pacts.gate`) judges every finding's pinned decisions and the ``sample``
   most recent decisions of the agents either version binds, under the applied rules and the new
   ones; every capture read passes the access gate (action ``evaluate``, logged);
2. only if it passes, or ``force`` (with a reason; recorded as forced, with the gate's reasons):
   the apply is appended to the transparency log (:mod:`consumers.pacts.logged`), then the shared
   pointer moves and a ``pact_applications`` row is written.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumers.findings.captures import stored_capture
from consumers.findings.store import decision_rows_by_id
from consumers.index.engine import insert_rows
from consumers.pacts.gate import GateReport, judge_change
from consumers.pacts.logged import log_apply
from consumers.pacts.store import gate_candidates
from consumers.pacts.versions import (
    AppliedPointer,
    PactVersion,
    PactVersionError,
    applied_pointer,
    load_version,
    write_applied,
)
from consumers.privacy.ids import index_ids
from producers.evidence import TrustStore
from schemas.errors import BlackboxError

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime

__all__ = ["ApplyOutcome", "apply_version"]


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    version: PactVersion
    report: GateReport
    applied: bool
    logged: str  # the transparency log entry's key ('' when not applied or the log is off)
    applied_at: datetime


def apply_version(
    rt: Runtime,
    version: str,
    *,
    now: datetime,
    sample: int = 200,
    force: bool = False,
    reason: str = "",
    applied_by: str | None = None,
) -> ApplyOutcome:
    """Gate ``version``, and apply it when the gate passes or ``force`` (module docstring)."""
    if force and not reason.strip():
        raise PactVersionError("--force needs --reason: a forced apply is logged with why")
    trust = TrustStore.load(rt.settings.resolved_trust_store, missing_ok=True)
    new = load_version(rt.blob_store, version, trust)
    pointer = applied_pointer(rt.blob_store)
    old_book = load_version(rt.blob_store, pointer.version, trust).book if pointer else rt.pacts
    pinned, recent = gate_candidates(
        rt.index, sample=sample, binds=lambda a: new.book.binds(a) or old_book.binds(a)
    )
    captures, unreadable = _read(rt, sorted(pinned | set(recent)), version)
    report = judge_change(old_book, new.book, captures, pinned=pinned, unreadable=unreadable)
    if not (report.passed or force):
        return ApplyOutcome(new, report, applied=False, logged="", applied_at=now)
    record = AppliedPointer(
        version=new.version,
        applied_at=now,
        applied_by=applied_by or getpass.getuser(),
        reason=reason.strip() or new.reason,
        forced=not report.passed,
        gate="passed" if report.passed else "failed: " + "; ".join(report.reasons()),
    )
    logged = ""
    if rt.settings.tlog:  # logged first: an apply the log does not hold never takes effect
        try:
            logged = log_apply(rt.transparency_log, rt.blob_store, record)
        finally:
            rt.transparency_log.close()  # the witnesses get the new checkpoint, then stop
    write_applied(rt.blob_store, record)
    insert_rows(
        rt.index,
        "pact_applications",
        [
            {
                "version": record.version,
                "applied_at": now,
                "applied_by": record.applied_by,
                "reason": record.reason,
                "forced": record.forced,
                "gate": record.gate,
            }
        ],
    )
    return ApplyOutcome(new, report, applied=True, logged=logged, applied_at=now)


def _read(rt: Runtime, ids: list[str], version: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The stored captures of ``ids`` through the access gate; the ids that could not be read."""
    rows = decision_rows_by_id(rt.index, ids)
    loaded: list[dict[str, Any]] = []
    unreadable = [did for did in ids if did not in rows]
    for did, row in rows.items():
        try:
            loaded.append(stored_capture(rt.blob_store, row, index_ids(rt.settings)))
        except (BlackboxError, ValueError):
            unreadable.append(did)
    records = rt.gate.authorize_many(
        rt.caller(f"pact apply {version}"), loaded, action="evaluate", detail=f"pact gate {version}"
    )
    allowed = [c for c, r in zip(loaded, records, strict=True) if r.outcome == "allowed"]
    unreadable += [
        str(c.get("decisionId")) for c, r in zip(loaded, records, strict=True) if r.outcome != "allowed"
    ]
    return allowed, sorted(unreadable)
