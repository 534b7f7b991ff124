"""Erasure by crypto-shredding (GDPR Art. 17) that keeps the evidence.

``blackbox erase --subject ID | --decision ID --reason ...`` destroys the data key of each decision:
its key record becomes a tombstone (when, why). Every copy of the sealed original - topic, segments,
copies, backups of the segments - is unreadable from then on, all at once; the redacted capture, its
manifest, its signature and its index row are untouched and still verify, and ``show`` says
"original erased on DATE (reason)".

Per decision, in this order: a decision under legal hold is refused (and reported); one whose key is
already erased, or that has none, is a no-op; otherwise ``erase`` is written to the retention log
(file and ``deletions`` table) *before* the key is destroyed, and ``erased`` after. A rerun after a
crash between the two finds the key gone (no-op) or still there (erases it; the log entry ids are
stable, so the log holds the same entry again, never a gap).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from consumers.privacy.ids import IndexIds
from consumers.privacy.store import decisions_of_subject
from consumers.retention.log import DeletionEntry, DeletionLog
from consumers.retention.store import hold_state
from producers.privacy.keys import DataKeyStore
from schemas.errors import ContractError

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["ERASURE_POLICY", "Erased", "Eraser"]

ERASURE_POLICY = "erasure"
"""The ``policy`` column of erasure entries in the retention log (not a retention policy's fingerprint)."""

Outcome = Literal["erased", "already erased", "no original", "held"]


@dataclass(frozen=True, slots=True)
class Erased:
    """What one decision's erasure did."""

    decision_id: str
    outcome: Outcome
    detail: str = ""

    def line(self) -> str:
        return f"{self.decision_id}  {self.outcome}" + (f"  ({self.detail})" if self.detail else "")


def _now() -> datetime:
    return datetime.now(UTC)


class Eraser:
    """Crypto-shred the data keys of decisions of one index (see the module docstring)."""

    def __init__(
        self,
        *,
        index: Index,
        keys: DataKeyStore,
        log: DeletionLog,
        ids: IndexIds | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.index = index
        self.ids = ids or IndexIds(None)
        self.keys = keys
        self.log = log
        self.clock = clock

    def decisions_of(self, subject: str) -> list[str]:
        """Every indexed decision whose ``input.originUserId`` is ``subject`` (the index holds it as a
        keyed hash, or raw for rows from before hashing or opted out: both are looked up)."""
        return decisions_of_subject(self.index, self.ids.lookup(subject))

    def erase(self, decision_ids: Sequence[str], *, reason: str) -> list[Erased]:
        if not reason.strip():
            raise ContractError("an erasure needs a reason (--reason), recorded in the retention log")
        return [self._erase_one(decision_id, reason=reason) for decision_id in decision_ids]

    def _erase_one(self, decision_id: str, *, reason: str) -> Erased:
        state = hold_state(self.index, decision_id)
        if state is not None and state.get("legal_hold"):
            return Erased(decision_id, "held", f"under legal hold: {state.get('hold_reason') or 'no reason'}")
        record = self.keys.get(decision_id)
        if record is None:
            return Erased(decision_id, "no original", "nothing was redacted, or no key was stored")
        if record.erased:
            return Erased(decision_id, "already erased", f"on {record.erased_at} ({record.erase_reason})")
        at = self.clock()
        agent_id = str(state.get("agent_id") or "") if state is not None else ""
        key = DataKeyStore.key(decision_id)

        def entry(action: str) -> DeletionEntry:
            return DeletionEntry(
                at=at,
                as_of=at,
                decision_id=decision_id,
                segment_key=key,
                action=action,
                reason=reason,
                policy=ERASURE_POLICY,
                agent_id=agent_id,
            )

        self.log.record([entry("erase")])  # before: no erasure happens unlogged
        self.keys.shred(decision_id, at=at, reason=reason)
        self.log.record([entry("erased")])
        return Erased(decision_id, "erased", f"data key destroyed; reason: {reason}")
