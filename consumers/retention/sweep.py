"""The sweep: carry out a :class:`~consumers.retention.plan.SweepPlan` after compaction, idempotently.

What it deletes is what compaction's segment-by-segment work never reaches: quarantine segments past
``quarantine_days``, and blobs no index row refers to (a killed consumer's segment, a claim-check body
whose message was never ingested). Like compaction, every deletion is logged before it happens and
confirmed after, and a run that dies anywhere is finished by the next one:

Quarantine, for every due quarantine segment:

1. **log** (write-ahead) ``quarantine-expire`` per quarantine row, ``delete-claim`` per claim-check
   body of those rows, ``delete-segment`` per segment; entries a crashed run already wrote are skipped;
2. **rows**: a new version of each quarantine row with its location cleared (the row stays: the fact
   of the quarantine, its reason and hash remain);
3. **delete** the segments and claims; 4. **confirm** ``segment-deleted`` / ``claim-deleted``.

A crash before 2 leaves rows that still point at the segment: the next run plans it again (compaction
leaves a logged-but-referenced segment to the sweep). A crash after 2 leaves a logged, unconfirmed
delete that compaction's ``pending_deletes`` finishes first.

Orphans: **log** ``orphan-segment`` / ``orphan-claim``, **delete**, **confirm** ``orphan-deleted``. Each
orphan is stat'ed again just before: one written again since it was listed (a redelivered batch, a
producer retry) is young again and left alone. An orphan is never resumed from the log alone - only a
blob that is still unreferenced and old at the next run is deleted - because a redelivered batch may
have written and indexed the same key meanwhile.

``hook(point)`` is called after each step (:data:`SWEEP_HOOK_POINTS`) so tests can simulate a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from consumers.retention.clock import as_utc
from consumers.retention.log import DeletionEntry
from consumers.retention.plan import OrphanBlob, SweepPlan
from consumers.retention.store import clear_quarantine_content, logged_entries
from schemas.errors import BlobNotFound

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

__all__ = ["ORPHAN_CONFIRMATION", "SWEEP_HOOK_POINTS", "SweepTally", "Sweeper"]

SWEEP_HOOK_POINTS = (
    "after_quarantine_log",
    "after_quarantine_rows",
    "after_quarantine_delete",
    "after_orphan_log",
    "after_orphan_delete",
)
SWEPT_PREFIXES = ("segments/", "claims/")
"""The only blobs the sweep may delete. Anything else - the transparency log's tiles and checkpoints
above all (``BLACKBOX_TLOG_PREFIX``, :mod:`consumers.tlog`) - is never swept, whatever a plan says."""
ORPHAN_CONFIRMATION = "orphan-deleted"
"""Not ``segment-deleted``: an orphan's key may come back (a redelivered batch writes it again) and must
not read as an already-confirmed compaction delete then."""


@dataclass(frozen=True, slots=True)
class SweepTally:
    """What one sweep did."""

    quarantine_segments: int = 0
    quarantine_rows: int = 0
    claims: int = 0
    orphan_segments: int = 0
    orphan_claims: int = 0
    log_entries: int = 0


class Sweeper:
    """Executes a sweep plan against one index and blob store; log entries come from ``entry``."""

    def __init__(
        self,
        *,
        index: Index,
        store: BlobStore,
        entry: Callable[..., DeletionEntry],
        record: Callable[[list[DeletionEntry]], None],
        hook: Callable[[str], None],
    ) -> None:
        self.index = index
        self.store = store
        self._entry = entry
        self._record = record
        self._hook = hook

    def run(self, plan: SweepPlan) -> SweepTally:
        """Quarantine first, then orphans (see the module docstring for the steps)."""
        q_segments, q_rows, q_claims, q_logged = self._quarantine(plan)
        orphans, o_logged = self._orphans(plan)
        return SweepTally(
            quarantine_segments=q_segments,
            quarantine_rows=q_rows,
            claims=q_claims,
            orphan_segments=sum(1 for o in orphans if o.kind == "orphan-segment"),
            orphan_claims=sum(1 for o in orphans if o.kind == "orphan-claim"),
            log_entries=q_logged + o_logged,
        )

    def _write(self, entries: list[DeletionEntry]) -> int:
        self._record(entries)
        return len(entries)

    # --- quarantine ---------------------------------------------------------------------------------
    def _quarantine(self, plan: SweepPlan) -> tuple[int, int, int, int]:
        if not plan.quarantine:
            return 0, 0, 0, 0
        segments = [q.segment_key for q in plan.quarantine]
        claims = sorted({c for q in plan.quarantine for c in q.claims})
        logged = logged_entries(self.index, [*segments, *claims])
        entries: list[DeletionEntry] = []
        for q in plan.quarantine:
            reason = f"quarantine_days ended {_iso(q.due_at)}: quarantined bytes deleted, row kept"
            for row in q.rows:
                entries.append(
                    self._entry(
                        decision_id=row.decision_id,
                        segment_key=q.segment_key,
                        action="quarantine-expire",
                        reason=f"{reason} (quarantined as {row.reason})",
                        agent_id=row.agent_id,
                    )
                )
            for claim in q.claims:
                row = next(r for r in q.rows if r.claim == claim)
                entries.append(
                    self._entry(
                        decision_id=row.decision_id,
                        segment_key=claim,
                        action="delete-claim",
                        reason="claim-check body of a quarantined capture whose quarantine_days ended",
                        agent_id=row.agent_id,
                    )
                )
            entries.append(
                self._entry(
                    decision_id="",
                    segment_key=q.segment_key,
                    action="delete-segment",
                    reason=f"quarantine segment: every row's quarantine_days ended (due {_iso(q.due_at)})",
                )
            )
        written = self._write([e for e in entries if e.key not in logged])
        self._hook("after_quarantine_log")

        clear_quarantine_content(self.index, segments)
        self._hook("after_quarantine_rows")

        for key in [*segments, *claims]:
            if key.startswith(SWEPT_PREFIXES):
                self.store.delete(key)
        self._hook("after_quarantine_delete")
        written += self._write(
            [
                self._entry(decision_id="", segment_key=key, action=action, reason="done")
                for keys, action in ((segments, "segment-deleted"), (claims, "claim-deleted"))
                for key in keys
            ]
        )
        return len(segments), sum(len(q.rows) for q in plan.quarantine), len(claims), written

    # --- orphans ------------------------------------------------------------------------------------
    def _orphans(self, plan: SweepPlan) -> tuple[list[OrphanBlob], int]:
        resumed = [
            OrphanBlob(key, kind, plan.now, "", "resumed: deleted by an interrupted run")
            for key, kind in plan.gone
        ]
        orphans = [
            o for o in plan.orphans if o.key.startswith(SWEPT_PREFIXES) and self._still_orphan(o, plan)
        ]
        if not orphans:
            return resumed, self._confirm(resumed)
        logged = logged_entries(self.index, [o.key for o in orphans])
        entries: list[DeletionEntry] = []
        for o in orphans:
            entry = self._entry(decision_id=o.decision_id, segment_key=o.key, action=o.kind, reason=o.reason)
            resuming = entry.key in logged and (o.key, "", ORPHAN_CONFIRMATION) not in logged
            if not resuming:  # a new orphan, or the same key orphaned again after an earlier sweep
                entries.append(entry)
        written = self._write(entries)
        self._hook("after_orphan_log")

        for o in orphans:
            self.store.delete(o.key)
        self._hook("after_orphan_delete")
        written += self._confirm([*resumed, *orphans])
        return [*resumed, *orphans], written

    def _confirm(self, orphans: list[OrphanBlob]) -> int:
        return self._write(
            [
                self._entry(
                    decision_id="",
                    segment_key=o.key,
                    action=ORPHAN_CONFIRMATION,
                    reason="resumed" if o.reason.startswith("resumed") else "done",
                )
                for o in orphans
            ]
        )

    def _still_orphan(self, orphan: OrphanBlob, plan: SweepPlan) -> bool:
        """Stat again right before deleting: gone, or written again since the listing, means leave it."""
        try:
            fresh = self.store.stat(orphan.key)
        except BlobNotFound:
            return False
        if plan.now - as_utc(fresh.modified) < plan.grace_for(orphan.kind):
            return False
        # an object the store's lock still protects waits for a later sweep (S3 Object Lock)
        return self.store.lock_reason(orphan.key) is None


def _iso(moment: datetime) -> str:
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")
