"""Compaction: carry out a :class:`~consumers.retention.plan.CompactionPlan`, idempotently and resumably.

Due segments are processed in batches (``compaction.batch_decisions`` decisions). One batch is a
checkpoint in numbered steps; each step's effect is visible to the planner, so a run that dies
anywhere is finished by the next run, which plans again from what the index and the log say:

1. **copy out**: the frames of decisions whose content must stay (``promote``, ``hold-copy``, ``move``)
   are read by range GET, checked (one zstd frame whose bytes hash to the row's ``content_sha256``)
   and written verbatim into a new segment per target class, under a key derived from the source
   segment and the bytes (a rerun writes the same object);
2. **log** (write-ahead): one entry per decision (``compact`` / ``expire`` / the copy, with its target)
   and one ``delete-segment`` per segment, to the JSONL file and the ``deletions`` table; entries a
   crashed run already wrote are not written again;
3. **re-point** the copied rows to the new segment (a new row version; the source no longer holds them);
4. **rows**: new versions: ``metadata-only`` (segment location cleared, ``manifest_json`` kept, so
   show and verify still answer) or ``expired`` (``manifest_json`` cleared too; tool-call and memory
   rows deleted);
Object Lock (S3, ``BLACKBOX_S3_OBJECT_LOCK``): a segment whose deletion the store would refuse (retention
until a date, a legal hold) is left entirely as it is (nothing copied, no row changed) and counted as
``locked`` with the reason; a delete the lock refuses later (a pending one) stays pending. Neither fails
the run.

5. **delete** the source segments, and the claim-check blobs (``claims/...``, the full body of an
   oversized capture) of decisions that lose their content (idempotent);
6. **confirm**: a ``segment-deleted`` / ``claim-deleted`` entry per blob.

A crash after 4 leaves segments no row points at whose deletion is logged but not confirmed: the next
run deletes them first (``pending_deletes``); a crash before 4 leaves rows that still point at the
segment, so the next run plans it again. A second run over the same state finds nothing due and changes nothing.
``hook(point)`` is called after each step (``after_copy``, ``after_log``, ``after_copy_rows``,
``after_rows``, ``after_delete``) so tests can simulate a crash there.

Then the **sweep** (:mod:`consumers.retention.sweep`, its own hook points): quarantine segments past
``quarantine_days``, and segments and claim-check bodies no index row refers to once older than their
grace. It runs last, on a fresh listing, so the segments this run copied frames into are referenced.
Last of all, with a spool directory, the consumed spool files older releases kept are deleted, logged
(:mod:`consumers.retention.spool_sweep`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumers.index.engine import state_version
from consumers.retention.clock import Clock, SystemClock, as_utc
from consumers.retention.copyout import (
    CopyVerificationFailed,
    compact_change,
    copy_change,
    copy_frames,
    expire_change,
)
from consumers.retention.lock import retention_lock
from consumers.retention.log import DeletionEntry, DeletionLog
from consumers.retention.plan import (
    COPY_ACTIONS,
    Action,
    CompactionPlan,
    SegmentPlan,
    Step,
    SweepPlan,
    plan_compaction,
    plan_sweep,
)
from consumers.retention.policy import RetentionPolicy
from consumers.retention.spool_sweep import sweep_consumed_spool
from consumers.retention.store import (
    delete_child_rows,
    held_decisions,
    live_claims,
    load_candidates,
    logged_entries,
    pending_segment_deletes,
    quarantine_with_content,
    referenced_segments,
    unconfirmed_orphans,
    write_versions,
)
from consumers.retention.sweep import Sweeper, SweepTally
from consumers.storage.segments import SEGMENT_PREFIX, SegmentCorrupt
from producers.claimcheck import claim_key
from schemas.errors import BlobLocked, BlobNotFound

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

__all__ = [
    "HOOK_POINTS",
    "CompactionResult",
    "Compactor",
    "CopyVerificationFailed",
    "retention_dir",
]

HOOK_POINTS = ("after_copy", "after_log", "after_copy_rows", "after_rows", "after_delete")
CLAIMS_PREFIX = "claims/"

logger = logging.getLogger(__name__)


def retention_dir(data_dir: Path) -> Path:
    """``<data_dir>/retention``: the JSONL logs and the lock file."""
    return Path(data_dir) / "retention"


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a run did (or, with ``dry_run``, would do)."""

    as_of: datetime
    policy: str
    dry_run: bool
    segments_deleted: int = 0
    claims_deleted: int = 0
    compacted: int = 0
    expired: int = 0
    promoted: int = 0
    hold_copied: int = 0
    moved: int = 0
    held: int = 0
    pending_deleted: int = 0
    segments_not_due: int = 0
    new_segments: tuple[str, ...] = ()
    log_entries: int = 0
    errors: tuple[str, ...] = ()
    elapsed_seconds: float = 0.0
    quarantine_segments_deleted: int = 0
    quarantine_rows_cleared: int = 0
    orphan_segments_deleted: int = 0
    orphan_claims_deleted: int = 0
    orphans_in_grace: int = 0
    locked: tuple[str, ...] = ()  # segments the store's Object Lock kept, each with its reason
    spool_files_deleted: int = 0  # consumed spool files left by older releases (spool_sweep)

    @property
    def changed(self) -> bool:
        return bool(
            self.segments_deleted
            or self.compacted
            or self.expired
            or self.promoted
            or self.moved
            or self.hold_copied
            or self.pending_deleted
            or self.quarantine_segments_deleted
            or self.orphan_segments_deleted
            or self.orphan_claims_deleted
            or self.claims_deleted
            or self.spool_files_deleted
        )

    def summary(self) -> dict[str, Any]:
        return {
            "as_of": as_utc(self.as_of).isoformat(),
            "policy": self.policy,
            "dry_run": self.dry_run,
            "segments_deleted": self.segments_deleted,
            "claims_deleted": self.claims_deleted,
            "compacted": self.compacted,
            "expired": self.expired,
            "promoted": self.promoted,
            "hold_copied": self.hold_copied,
            "moved": self.moved,
            "held": self.held,
            "pending_deleted": self.pending_deleted,
            "segments_not_due": self.segments_not_due,
            "new_segments": len(self.new_segments),
            "quarantine_segments_deleted": self.quarantine_segments_deleted,
            "quarantine_rows_cleared": self.quarantine_rows_cleared,
            "orphan_segments_deleted": self.orphan_segments_deleted,
            "orphan_claims_deleted": self.orphan_claims_deleted,
            "orphans_in_grace": self.orphans_in_grace,
            "spool_files_deleted": self.spool_files_deleted,
            "locked": len(self.locked),
            "locked_reasons": list(self.locked),
            "log_entries": self.log_entries,
            "errors": list(self.errors),
            "elapsed_seconds": round(self.elapsed_seconds, 3),
        }


@dataclass(slots=True)
class _Tally:
    counts: dict[str, int] = field(default_factory=dict)
    new_segments: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    log_entries: int = 0
    segments_deleted: int = 0
    claims_deleted: int = 0
    pending_deleted: int = 0
    locked: list[str] = field(default_factory=list)

    def count(self, action: str, n: int = 1) -> None:
        self.counts[action] = self.counts.get(action, 0) + n


class Compactor:
    """Plans and runs compaction against one index and one blob store (see the module docstring)."""

    def __init__(
        self,
        *,
        index: Index,
        store: BlobStore,
        policy: RetentionPolicy,
        log_path: Path,
        lock_path: Path | None = None,
        clock: Clock | None = None,
        hook: Callable[[str], None] | None = None,
        spool_dir: Path | None = None,
    ) -> None:
        self.index = index
        self.spool_dir = spool_dir
        self.store = store
        self.policy = policy
        self._fingerprint = policy.fingerprint
        self.log = DeletionLog(index, log_path)
        self.lock_path = lock_path or Path(log_path).with_name("retention.lock")
        self.clock: Clock = clock or SystemClock()
        self._hook = hook or (lambda point: None)
        self._claims: set[str] | None = None

    @classmethod
    def in_data_dir(
        cls,
        data_dir: Path,
        *,
        index: Index,
        store: BlobStore,
        policy: RetentionPolicy,
        clock: Clock | None = None,
        hook: Callable[[str], None] | None = None,
        spool_dir: Path | None = None,
    ) -> Compactor:
        """``policy`` at work; log and lock under ``<data_dir>/retention``; ``spool_dir``'s consumed
        leftovers swept."""
        base = retention_dir(data_dir)
        return cls(
            index=index,
            store=store,
            policy=policy,
            log_path=base / "deletions.jsonl",
            lock_path=base / "retention.lock",
            clock=clock,
            hook=hook,
            spool_dir=spool_dir,
        )

    # --- planning ---------------------------------------------------------------------------------------
    def plan(self, *, as_of: datetime | None = None) -> CompactionPlan:
        """What a run at ``as_of`` (default: now) would do. Reads only."""
        moment = as_utc(as_of) if as_of is not None else self.clock.now()
        candidates = load_candidates(self.index, as_of=moment, policy=self.policy)
        # a quarantine segment whose delete is logged but whose rows still point at it is the sweep's
        # to finish (rows first), never a bare pending delete
        quarantined = {row.segment_key for row in quarantine_with_content(self.index)}
        return plan_compaction(
            candidates,
            policy=self.policy,
            as_of=moment,
            pending_deletes=[k for k in pending_segment_deletes(self.index) if k not in quarantined],
        )

    def plan_sweep(self, *, as_of: datetime | None = None) -> SweepPlan:
        """What the sweep at ``as_of`` (quarantine) and the clock's now (orphans) would do. Reads only."""
        moment = as_utc(as_of) if as_of is not None else self.clock.now()
        claims = list(self.store.list_info(CLAIMS_PREFIX))
        return plan_sweep(
            policy=self.policy,
            as_of=moment,
            now=self.clock.now(),
            segments=self.store.list_info(SEGMENT_PREFIX + "/"),
            claims=claims,
            referenced_segments=referenced_segments(self.index),
            quarantine=quarantine_with_content(self.index),
            live_claims=live_claims(self.index, (c.key for c in claims)) if claims else (),
            held=held_decisions(self.index),
            unconfirmed=unconfirmed_orphans(self.index),
        )

    # --- running ----------------------------------------------------------------------------------------
    def run(
        self,
        *,
        as_of: datetime | None = None,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
        on_plan: Callable[[CompactionPlan], None] | None = None,
    ) -> CompactionResult:
        """Compact and expire everything due at ``as_of`` (default: now).

        ``progress(done, total)`` is called as decisions are handled; ``on_plan`` sees the plan first.
        With ``dry_run`` nothing is written (no lock, no log): the result counts what would happen.
        """
        started = time.perf_counter()
        moment = as_utc(as_of) if as_of is not None else self.clock.now()
        if dry_run:
            plan = self.plan(as_of=moment)
            if on_plan is not None:
                on_plan(plan)
            sweep = self.plan_sweep(as_of=moment)
            self._claims = None
            claims = len(self._claims_of([s for seg in plan.segments for s in seg.drops]))
            result = self._result(
                plan, dry_run=True, tally=None, started=started, sweep=sweep, claims_due=claims
            )
            return replace(result, spool_files_deleted=self._sweep_spool(plan, dry_run=True))
        with retention_lock(self.lock_path):
            self._claims = None
            plan = self.plan(as_of=moment)
            if on_plan is not None:
                on_plan(plan)
            tally = _Tally()
            total = plan.decisions + len(plan.pending_deletes)
            done = 0
            if progress is not None:
                progress(0, total)
            self._finish_pending(plan, tally)
            done += len(plan.pending_deletes)
            for batch in _batches(plan.segments, self.policy.compaction.batch_decisions):
                self._run_batch(batch, plan, tally)
                done += sum(len(s.steps) for s in batch)
                if progress is not None:
                    progress(done, total)
            self._expire_rows(plan, tally)
            sweep = self.plan_sweep(as_of=moment)
            swept = self._sweeper(plan).run(sweep)
            tally.log_entries += swept.log_entries
            spooled = self._sweep_spool(plan, dry_run=False, tally=tally)
            if progress is not None:
                progress(total, total)
            result = self._result(plan, dry_run=False, tally=tally, started=started, sweep=sweep, swept=swept)
            return replace(result, spool_files_deleted=spooled)

    def _sweep_spool(self, plan: CompactionPlan, *, dry_run: bool, tally: _Tally | None = None) -> int:
        if self.spool_dir is None:
            return 0
        return sweep_consumed_spool(
            self.spool_dir,
            entry=lambda **fields: self._entry(plan, **fields),
            record=self.log.record if tally is None else (lambda entries: self._record(entries, tally)),
            dry_run=dry_run,
        )

    def _sweeper(self, plan: CompactionPlan) -> Sweeper:
        return Sweeper(
            index=self.index,
            store=self.store,
            entry=lambda **fields: self._entry(plan, **fields),
            record=self.log.record,
            hook=self._hook,
        )

    def _result(
        self,
        plan: CompactionPlan,
        *,
        dry_run: bool,
        tally: _Tally | None,
        started: float,
        sweep: SweepPlan,
        swept: SweepTally | None = None,
        claims_due: int = 0,
    ) -> CompactionResult:
        counts = dict(plan.counts) if tally is None else tally.counts
        if swept is None:  # the dry run: what the sweep plan would do
            swept = SweepTally(
                quarantine_segments=len(sweep.quarantine),
                quarantine_rows=sum(len(q.rows) for q in sweep.quarantine),
                claims=sum(len(q.claims) for q in sweep.quarantine),
                orphan_segments=sweep.orphan_segments,
                orphan_claims=sweep.orphan_claims,
            )
        return CompactionResult(
            as_of=plan.as_of,
            policy=self._fingerprint,
            dry_run=dry_run,
            segments_deleted=len(plan.segments) if tally is None else tally.segments_deleted,
            claims_deleted=swept.claims + (claims_due if tally is None else tally.claims_deleted),
            compacted=counts.get("compact", 0),
            expired=counts.get("expire", 0),
            promoted=counts.get("promote", 0),
            hold_copied=counts.get("hold-copy", 0),
            moved=counts.get("move", 0),
            held=len(set(plan.held) | set(sweep.held)),
            pending_deleted=len(plan.pending_deletes) if tally is None else tally.pending_deleted,
            segments_not_due=plan.segments_not_due,
            new_segments=() if tally is None else tuple(tally.new_segments),
            log_entries=0 if tally is None else tally.log_entries,
            errors=() if tally is None else tuple(tally.errors),
            elapsed_seconds=time.perf_counter() - started,
            quarantine_segments_deleted=swept.quarantine_segments,
            quarantine_rows_cleared=swept.quarantine_rows,
            orphan_segments_deleted=swept.orphan_segments,
            orphan_claims_deleted=swept.orphan_claims,
            orphans_in_grace=sweep.in_grace,
            locked=() if tally is None else tuple(tally.locked),
        )

    def _entry(self, plan: CompactionPlan, **fields: Any) -> DeletionEntry:
        return DeletionEntry(at=self.clock.now(), as_of=plan.as_of, policy=self._fingerprint, **fields)

    def _record(self, entries: list[DeletionEntry], tally: _Tally) -> None:
        self.log.record(entries)
        tally.log_entries += len(entries)

    def _finish_pending(self, plan: CompactionPlan, tally: _Tally) -> None:
        """Blobs a crashed run logged for deletion: delete (idempotent) and confirm."""
        if not plan.pending_deletes:
            return
        done = [key for key in plan.pending_deletes if self._delete(key, tally)]
        self._record(
            [
                self._entry(
                    plan, decision_id="", segment_key=key, action=_confirmation(key), reason="resumed"
                )
                for key in done
            ],
            tally,
        )
        tally.pending_deleted += len(done)
        tally.segments_deleted += sum(1 for key in done if not _is_claim(key))
        tally.claims_deleted += sum(1 for key in done if _is_claim(key))

    def _delete(self, key: str, tally: _Tally) -> bool:
        """Delete ``key``; False (and counted as locked) when the store's Object Lock refuses it: its
        deletion stays logged and unconfirmed, so a later run finishes it once the lock allows."""
        try:
            self.store.delete(key)
        except BlobLocked as exc:
            self._locked(f"{key}: {exc}; deletion pending until the lock allows", tally)
            return False
        return True

    def _locked(self, reason: str, tally: _Tally) -> None:
        logger.warning("compaction: locked %s", reason)
        tally.locked.append(reason)

    def _claims_of(self, steps: Sequence[Step]) -> list[tuple[Step, str]]:
        """Claim-check blobs (the full capture body of an oversized capture) of decisions losing content.

        Their keys are deterministic (:func:`producers.claimcheck.claim_key` of agent, decision and the
        capture's sha256, which the row keeps as ``content_sha256``); the ``claims/`` listing is read
        once per run so decisions that never went by claim check cost nothing.
        """
        if not steps:
            return []
        if self._claims is None:
            self._claims = set(self.store.list(CLAIMS_PREFIX))
        if not self._claims:
            return []
        found: list[tuple[Step, str]] = []
        for s in steps:
            c = s.candidate
            if not c.content_sha256.startswith("sha256:"):
                continue
            key = claim_key(
                agent_id=c.agent_id,
                decision_id=c.decision_id,
                sha256_hex=c.content_sha256.removeprefix("sha256:"),
            )
            if key in self._claims:
                found.append((s, key))
        return found

    def _run_batch(self, batch: Sequence[SegmentPlan], plan: CompactionPlan, tally: _Tally) -> None:
        logged = logged_entries(self.index, (s.segment_key for s in batch))
        version = state_version(self.clock.now())

        # 1. copy out
        ready: list[tuple[SegmentPlan, dict[str, tuple[str, int, int]]]] = []
        for seg in batch:
            lock = self.store.lock_reason(seg.segment_key)
            if lock is not None:  # the store would refuse the delete: leave the segment as it is
                self._locked(
                    f"{seg.segment_key}: {lock}; its {len(seg.steps)} decision(s) left as they are", tally
                )
                continue
            try:
                placed, made = copy_frames(self.store, seg, index=self.index)
                tally.new_segments.extend(made)
            except BlobNotFound:
                if (seg.segment_key, "", "delete-segment") not in logged:
                    tally.errors.append(
                        f"segment {seg.segment_key} is missing from the blob store and its deletion was never "
                        f"logged; its {len(seg.steps)} decision(s) were left alone"
                    )
                    continue
                seg = _content_already_gone(seg, plan.as_of, tally)
                placed = {}
            except (CopyVerificationFailed, SegmentCorrupt) as exc:
                tally.errors.append(f"segment {seg.segment_key} kept: {exc}")
                continue
            ready.append((seg, placed))
        self._hook("after_copy")

        # 2. write-ahead log
        claims = self._claims_of([s for seg, _ in ready for s in seg.drops])
        if claims:
            logged |= logged_entries(self.index, (key for _, key in claims))
        entries: list[DeletionEntry] = []
        for s, key in claims:
            entry = self._entry(
                plan,
                decision_id=s.decision_id,
                segment_key=key,
                action="delete-claim",
                reason=f"claim-check body of a decision that loses its content ({s.action})",
                agent_id=s.candidate.agent_id,
            )
            if entry.key not in logged:
                entries.append(entry)
        for seg, placed in ready:
            for s in seg.steps:
                target = placed[s.decision_id][0] if s.decision_id in placed else ""
                entry = self._entry(
                    plan,
                    decision_id=s.decision_id,
                    segment_key=seg.segment_key,
                    action=s.action,
                    reason=s.reason,
                    agent_id=s.candidate.agent_id,
                    target=target,
                )
                if entry.key not in logged:
                    entries.append(entry)
            entry = self._entry(
                plan,
                decision_id="",
                segment_key=seg.segment_key,
                action="delete-segment",
                reason=f"every decision compacted, expired or copied out (segment due {_iso(seg.due_at)})",
            )
            if entry.key not in logged:
                entries.append(entry)
        self._record(entries, tally)
        self._hook("after_log")

        # 3. re-point the copies
        copied = [(s, placed) for seg, placed in ready for s in seg.copies]
        copy_changes = [(s.decision_id, copy_change(s, placed[s.decision_id])) for s, placed in copied]
        write_versions(self.index, copy_changes, version=version, captured_between=_bounds(copied))
        self._hook("after_copy_rows")

        # 4. rows
        drops = [s for seg, _ in ready for s in seg.drops]
        self._write_drops(drops, version)
        self._hook("after_rows")

        # 5. delete, 6. confirm
        deleted = [
            key
            for key in [seg.segment_key for seg, _ in ready] + [key for _, key in claims]
            if self._delete(key, tally)
        ]
        self._hook("after_delete")
        self._record(
            [
                self._entry(plan, decision_id="", segment_key=key, action=_confirmation(key), reason="done")
                for key in deleted
            ],
            tally,
        )
        tally.segments_deleted += sum(1 for key in deleted if not _is_claim(key))
        tally.claims_deleted += sum(1 for key in deleted if _is_claim(key))
        for seg, _ in ready:
            for s in seg.steps:
                tally.count(s.action)

    def _write_drops(self, drops: Sequence[Step], version: int) -> None:
        compacts = [s for s in drops if s.action == "compact"]
        expires = [s for s in drops if s.action == "expire"]
        write_versions(
            self.index,
            [(s.decision_id, compact_change(s)) for s in compacts],
            version=version,
            captured_between=_bounds(compacts),
        )
        write_versions(
            self.index,
            [(s.decision_id, expire_change(s)) for s in expires],
            version=version,
            captured_between=_bounds(expires),
        )
        if expires:
            delete_child_rows(self.index, [s.decision_id for s in expires])

    def _expire_rows(self, plan: CompactionPlan, tally: _Tally) -> None:
        """Records without content whose retention ended: log, then tombstone."""
        if not plan.expiries:
            return
        logged = logged_entries(self.index, [""], decision_ids=[s.decision_id for s in plan.expiries])
        entries = [
            e
            for s in plan.expiries
            if (
                e := self._entry(
                    plan,
                    decision_id=s.decision_id,
                    segment_key="",
                    action="expire",
                    reason=s.reason,
                    agent_id=s.candidate.agent_id,
                )
            ).key
            not in logged
        ]
        self._record(entries, tally)
        self._write_drops(plan.expiries, state_version(self.clock.now()))
        tally.count("expire", len(plan.expiries))

    # --- copying frames ---------------------------------------------------------------------------------


def _content_already_gone(seg: SegmentPlan, as_of: datetime, tally: _Tally) -> SegmentPlan:
    """The segment was deleted by an earlier run that logged it: its copies can only become drops."""
    steps: list[Step] = []
    for s in seg.steps:
        if s.action not in COPY_ACTIONS:
            steps.append(s)
            continue
        held = s.action == "hold-copy"
        if held:
            tally.errors.append(
                f"{s.decision_id} is under legal hold but its segment {seg.segment_key} was already deleted "
                "by an earlier run (logged); only its metadata remains"
            )
        action: Action = "expire" if not held and s.decision.expires_at <= as_of else "compact"
        reason = f"content already deleted with segment {seg.segment_key} by an earlier run"
        steps.append(replace(s, action=action, reason=reason))
    return replace(seg, steps=tuple(steps))


def _is_claim(key: str) -> bool:
    return key.startswith(CLAIMS_PREFIX)


def _confirmation(key: str) -> str:
    return "claim-deleted" if _is_claim(key) else "segment-deleted"


def _bounds(steps: Sequence[Step] | Sequence[tuple[Step, Any]]) -> tuple[datetime, datetime] | None:
    moments = [(s[0] if isinstance(s, tuple) else s).candidate.captured_at for s in steps]
    return (min(moments), max(moments)) if moments else None


def _batches(segments: Sequence[SegmentPlan], limit: int) -> Iterator[list[SegmentPlan]]:
    batch: list[SegmentPlan] = []
    size = 0
    for seg in segments:
        if batch and size + len(seg.steps) > limit:
            yield batch
            batch, size = [], 0
        batch.append(seg)
        size += len(seg.steps)
    if batch:
        yield batch


def _iso(moment: datetime) -> str:
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")
