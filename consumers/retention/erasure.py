"""Erasure by crypto-shredding (GDPR Art. 17) that keeps the evidence.

``blackbox erase --subject ID | --decision ID --reason ...`` destroys the data key of each decision:
its key record becomes a tombstone (when, why). Every copy of the sealed original - topic, segments,
copies, backups of the segments - is unreadable from then on, all at once; the redacted capture, its
manifest, its signature and its index row are untouched and still verify, and ``show`` says
"original erased on DATE (reason)".

Per decision: one under legal hold is refused (and reported); one whose key is already erased, or
that has none, is a no-op; otherwise ``erase`` is written to the retention log (file and ``deletions``
table) *before* the key is destroyed, and ``erased`` after. The work is batched (a subject may have
thousands of decisions): one index query for the holds, then per chunk of :data:`CHUNK` decisions one
write-ahead log record of every ``erase``, the keys destroyed (concurrently: each is one blob PUT), one
record of every ``erased``. A rerun after a crash finds each key still there (erases it; the log entry
ids are stable, so the log holds the same entry again) or gone: a no-op, except that a destroyed key
whose ``erased`` entry the crash prevented gets it now, so the log never has a gap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from consumers.privacy.ids import IndexIds
from consumers.privacy.store import confirmed_erasures, decisions_of_subject, erasure_states
from consumers.retention.log import DeletionEntry, DeletionLog
from producers.privacy.keys import DataKeyRecord, DataKeyStore
from schemas.errors import ContractError

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["CHUNK", "ERASURE_POLICY", "Erased", "Eraser"]

CHUNK = 1000
"""Decisions per write-ahead log record: a crash leaves at most this many logged but not yet erased."""
_BLOB_THREADS = 8  # key records are small blobs: the time is round trips, which overlap

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
        """Erase each decision's original (module docstring); one :class:`Erased` per distinct id, in order."""
        if not reason.strip():
            raise ContractError("an erasure needs a reason (--reason), recorded in the retention log")
        wanted = list(dict.fromkeys(decision_ids))
        states = erasure_states(self.index, wanted)
        with ThreadPoolExecutor(max_workers=_BLOB_THREADS) as pool:
            records = dict(zip(wanted, pool.map(self.keys.get, wanted), strict=True))
            outcome: dict[str, Erased] = {}
            due: list[str] = []
            gone: list[str] = []
            for decision_id in wanted:
                state = states.get(decision_id) or {}
                record = records[decision_id]
                if state.get("legal_hold"):
                    why = f"under legal hold: {state.get('hold_reason') or 'no reason'}"
                    outcome[decision_id] = Erased(decision_id, "held", why)
                elif record is None:
                    why = "nothing was redacted, or no key was stored"
                    outcome[decision_id] = Erased(decision_id, "no original", why)
                elif record.erased:
                    why = f"on {record.erased_at} ({record.erase_reason})"
                    outcome[decision_id] = Erased(decision_id, "already erased", why)
                    gone.append(decision_id)
                else:
                    due.append(decision_id)
            unconfirmed = set(gone) - confirmed_erasures(self.index, gone)
            for start in range(0, len(due), CHUNK):
                chunk = due[start : start + CHUNK]
                self._erase_chunk(chunk, states=states, reason=reason, pool=pool)
                done = f"data key destroyed; reason: {reason}"
                outcome.update((d, Erased(d, "erased", done)) for d in chunk)
        if unconfirmed:  # destroyed by a run that crashed before confirming: confirm now, with its reason
            at = self.clock()
            self.log.record(
                [
                    entry
                    for d in gone
                    if d in unconfirmed
                    for entry in self._entries(
                        [d],
                        "erased",
                        states=states,
                        reason=getattr(records[d], "erase_reason", "") or reason,
                        at=at,
                    )
                ]
            )
        return [outcome[decision_id] for decision_id in wanted]

    def _erase_chunk(
        self,
        chunk: Sequence[str],
        *,
        states: dict[str, dict[str, Any]],
        reason: str,
        pool: ThreadPoolExecutor,
    ) -> None:
        at = self.clock()
        stamp = at.isoformat(timespec="seconds").replace("+00:00", "Z")

        def entries(action: str) -> list[DeletionEntry]:
            return self._entries(chunk, action, states=states, reason=reason, at=at)

        def shred(decision_id: str) -> None:
            # the tombstone replaces the wrapped key: DataKeyStore.shred without its second read
            self.keys.put(DataKeyRecord(decision_id=decision_id, erased_at=stamp, erase_reason=reason))

        self.log.record(entries("erase"))  # before: no erasure happens unlogged
        list(pool.map(shred, chunk))  # re-raises the first failure; the rerun finishes the chunk
        self.log.record(entries("erased"))

    @staticmethod
    def _entries(
        decision_ids: Sequence[str],
        action: str,
        *,
        states: dict[str, dict[str, Any]],
        reason: str,
        at: datetime,
    ) -> list[DeletionEntry]:
        return [
            DeletionEntry(
                at=at,
                as_of=at,
                decision_id=decision_id,
                segment_key=DataKeyStore.key(decision_id),
                action=action,
                reason=reason,
                policy=ERASURE_POLICY,
                agent_id=str((states.get(decision_id) or {}).get("agent_id") or ""),
            )
            for decision_id in decision_ids
        ]
