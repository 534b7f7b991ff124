"""One batch, from message bytes to durable segments and index rows.

For every message, in order (steps 1 and 3 run in :mod:`consumers.ingest.prepare`, inline or in
worker processes; the rest here, in the consumer's process):

1. **decode** (:func:`producers.avro.decode`: the native reader, else :func:`schemas.codec.decode`).
   Undecodable bytes (truncated Avro, bad magic byte, unknown fingerprint) are dead-lettered with
   the reason; the partition keeps moving.
2. **claim check**: fetch the blob, check its size and sha256, decode it as a capture
   (:func:`producers.claimcheck.resolve_claim_check`). A missing or mismatching blob is a dead letter.
   The claim-check blob is left in place: a redelivered reference must still resolve.
3. **verify** (:func:`producers.evidence.verify_capture`). A capture that fails is *quarantined*:
   its bytes go to a quarantine segment and a ``quarantine`` row names the reason and the part. It
   never reaches ``decisions``, so nothing treats it as trusted. Flag events are verified the same
   way (their inline signature; :mod:`consumers.ingest.flags`); a bad or missing one quarantines the flag.
   A key bound to agents that signed for another agent fails here too (``KeyNotAuthorizedForAgent``),
   and a flag naming a decision of another agent than its own ``agentId`` is quarantined
   (``flag AgentMismatch``): a key may only speak for its own agents' decisions.
4. **dedup** against the index (one query per batch) and within the batch: the same decision id
   with the same ``content_sha256`` (sha256 of the capture's Avro bytes) is skipped - redelivery is
   idempotent; with *different* bytes it is quarantined as ``ConflictingDuplicate`` and reported,
   unless it is the flight recorder's full capture of a decision stored structured-only (:mod:`.upgrade`:
   the same signed structure and hashes, content added): then it becomes the decision's row, as a new
   version; a structured-only capture arriving after its upgrade is a duplicate.
   Only verified captures take part (indexed rows and this batch's verified captures): a quarantined
   forgery that came first never makes the genuine capture a conflict.
5. **route** by retention class (:mod:`consumers.ingest.classify`), applying flags that arrived
   earlier or in the same batch, and **write segments**: one PUT per class per batch.
6. **dead letters** are flushed to the DLQ.
7. **index rows**: flags, quarantine rows, then tool calls / memory entries / decisions (decisions
   last, so an existing decision row implies its child rows exist), then a new ``decisions`` version
   for every already-indexed decision a flag upgrades to consequential. Pacts (:mod:`.pacts`): a
   verified capture that violates one is flagged like an early flag (a failure ``flags`` row, made
   consequential at insert) and its results go to ``pact_violations``; an evaluation error is a row.
8. **transparency log** (:mod:`consumers.tlog`, when configured): one leaf per verified capture that
   is indexed - now, or by an earlier delivery that crashed before its leaf - and has none yet,
   integrated while this process holds the log's writer lease (one writer across every ingest host,
   fenced in the object store: :mod:`consumers.tlog.log`). Commit order: segments, index rows, leaves
   integrated, offsets.

The caller (:mod:`consumers.ingest.loop`) commits offsets only after :meth:`BatchProcessor.process`
returns. Failures of the blob store, the index or the DLQ propagate uncommitted; the whole batch is
safe to run again (segment keys are deterministic, rows are deduplicated).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from consumers.index import CaptureRows, Index, flag_row, state_version
from consumers.pacts.applied import AppliedPacts
from consumers.pacts.evaluate import Evaluation
from consumers.pacts.store import insert_violations
from consumers.privacy.identifiers import IdentifierResolver
from consumers.privacy.ids import IndexIds
from consumers.retention.policy import RetentionPolicy, default_policy
from consumers.storage.segments import DEFAULT_LEVEL, FrameLocation, SegmentWriter
from consumers.storage.versions import record_versions
from consumers.tlog.log import Entry, TransparencyLog
from producers.avro import decode  # the native reader when it loads, else the codec
from producers.blobstore import BlobStore
from producers.claimcheck import resolve_claim_check
from producers.evidence import TrustStore
from producers.pacts.expression import Rule
from producers.transports.base import DeadLetter, DeadLetterSink, SourceMessage
from schemas.errors import BlobNotFound, ContentHashMismatch, DecodeError, VerificationError

from .admission import IntegerRanges, integer_ranges, unexpected_reason
from .dlq import DlqLimit, DlqLimitState
from .flags import pending_reasons, upgrade_indexed, verify_flag
from .pacts import apply_pacts
from .prepare import (
    PrepareContext,
    Prepared,
    PreparePool,
    frame_compressor,
    manifest_json,
    prepare_capture,
    quarantine_reason,
)
from .store import current_decisions, insert_captures, insert_flags, insert_quarantine, known_quarantine
from .upgrade import relation

__all__ = ["BatchProcessor", "BatchResult", "manifest_json", "source_of", "utc_now"]

logger = logging.getLogger(__name__)

QUARANTINE_CLASS = "quarantine"
CONFLICT_REASON = "ConflictingDuplicate"
# read for a decision that arrives again with other bytes (an upgrade, or a conflict)
_UPGRADE_COLUMNS = (
    "content_sha256",
    "manifest_json",
    "capture_level",
    "content_state",
    "legal_hold",
    "hold_reason",
    "consequential",
    "consequential_reason",
)
AGENT_MISMATCH_REASON = "flag AgentMismatch"


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What one batch did. ``conflicts`` lists decision ids quarantined as ConflictingDuplicate."""

    messages: int = 0
    indexed: int = 0
    duplicates: int = 0
    quarantined: int = 0
    dead_lettered: int = 0
    flags: int = 0
    upgraded: int = 0
    content_upgrades: int = 0  # structured-only decisions whose full capture arrived (flight recorder)
    pact_violations: int = 0  # (decision, rule) pairs that did not hold
    pact_errors: int = 0  # (decision, rule) pairs that could not be evaluated
    logged: int = 0  # leaves appended to the transparency log
    conflicts: tuple[str, ...] = ()
    segments: tuple[str, ...] = ()


@dataclass(slots=True)
class _Item:
    """A message on its way to a segment: a capture (verified or not), or a quarantined flag."""

    message: SourceMessage
    decision_id: str
    agent_id: str
    frame: bytes  # zstd of the capture's Avro bytes (the claim-check body, if any)
    sha: str
    rows: CaptureRows | None = None  # verified captures only
    reason: str = ""  # quarantine reason; empty for a verified capture
    part: str = ""
    location: FrameLocation | None = None
    flag_reason: str | None = None  # a flag made it consequential before it was indexed
    pacts: Evaluation | None = None  # the pacts' verdict (verified captures, when pacts are loaded)
    tlog_leaf: bytes = b""  # its transparency-log leaf (verified captures)

    @classmethod
    def of(cls, message: SourceMessage, p: Prepared) -> _Item:
        return cls(
            message,
            p.decision_id,
            p.agent_id,
            p.frame,
            p.sha,
            p.rows,
            p.reason,
            p.part,
            pacts=p.pacts,
            tlog_leaf=p.tlog_leaf,
        )

    @property
    def source(self) -> str:
        return source_of(self.message)


def source_of(m: SourceMessage) -> str:
    return f"{m.topic}/{m.partition}/{m.offset}"


@dataclass(slots=True)
class _Work:
    letters: list[DeadLetter] = field(default_factory=list)
    invalid: list[bool] = field(default_factory=list)
    captures: list[_Item] = field(default_factory=list)
    quarantine: list[_Item] = field(default_factory=list)
    flags: list[tuple[SourceMessage, dict[str, Any]]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    logged: list[_Item] = field(default_factory=list)  # indexed now or before: each needs its log leaf
    duplicates: int = 0
    upgrades: int = 0


class BatchProcessor:
    """Turns a batch of messages into segments, index rows and dead letters (module docstring)."""

    def __init__(
        self,
        *,
        store: BlobStore,
        index: Index,
        trust: TrustStore | Callable[[], TrustStore],
        dead_letters: DeadLetterSink,
        dlq_limit: DlqLimit | None = None,
        policy: RetentionPolicy | None = None,
        clock: Callable[[], datetime] = utc_now,
        level: int = DEFAULT_LEVEL,
        require_signed_flags: bool = True,
        workers: int = 0,
        pacts: Sequence[Rule] | Callable[[], AppliedPacts] = (),
        tlog: TransparencyLog | None = None,
        index_id_key: bytes | None = None,
        identifiers: IdentifierResolver | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self._trust_source = trust
        self.trust = trust() if callable(trust) else trust
        self.dead_letters = dead_letters
        self.policy = policy or default_policy()
        self.clock = clock
        self.level = level
        self.require_signed_flags = require_signed_flags
        # a callable is the shared applied pact version (consumers.pacts.applied), checked per batch
        self._pact_source = pacts if callable(pacts) else None
        self.pacts: tuple[Rule, ...] = () if callable(pacts) else tuple(pacts)
        self.pact_version = ""
        self._pact_binds: Callable[[str], bool] | None = None
        self.tlog = tlog
        self.index_id_key = index_id_key  # None: origin ids indexed raw (consumers.privacy.ids)
        self.identifiers = identifiers  # opens committed ids for the index (consumers.privacy.identifiers)
        self._dlq = DlqLimitState(dlq_limit or DlqLimit())
        self._pool = PreparePool(workers)
        self._trust_keys: tuple[Any, ...] = ()
        self._trust_version = ""
        self._trust_seen: TrustStore | None = None
        self._ranges: IntegerRanges | None = None

    def close(self) -> None:
        """Stop the worker processes, if any, and give the witnesses a moment for the last checkpoint."""
        self._pool.close()
        if self.tlog is not None:
            self.tlog.close()

    def idle(self) -> None:
        """Between batches, when the source had nothing: sign the log's pending leaves once the
        checkpoint interval has passed, so the last captures of a burst are not left unsigned."""
        if self.tlog is not None:
            self.tlog.tick()

    def _context(self, now: datetime) -> PrepareContext:
        if self.trust is not self._trust_seen:  # a reloaded trust store: workers rebuild theirs
            self._trust_seen = self.trust
            self._trust_keys = tuple(self.trust)
            self._trust_version = uuid.uuid4().hex
        if self._ranges is None:  # read once: admission checks row values against the index columns
            self._ranges = integer_ranges(self.index)
        return PrepareContext(
            self._trust_keys,
            self._trust_version,
            now,
            self.policy,
            self.level,
            integer_ranges=self._ranges,
            pacts=self.pacts,
            index_id_key=self.index_id_key,
        )

    # --- the whole batch ----------------------------------------------------------------------------
    def process(
        self, batch: Sequence[SourceMessage], *, hook: Callable[[str], None] | None = None
    ) -> BatchResult:
        """Make ``batch`` durable (see the module docstring); the caller commits afterwards."""
        now = self.clock()
        if callable(self._trust_source):  # e.g. re-read when the trust store file changes
            self.trust = self._trust_source()
        if self._pact_source is not None:  # a newly applied pact version judges this batch
            applied = self._pact_source()
            self.pacts, self.pact_version = applied.book.rules, applied.version
            self._pact_binds = applied.book.binds
        work = _Work()
        ctx = self._context(now)
        prepared = self._pool.run([(m.value, source_of(m)) for m in batch], ctx)
        if self.identifiers is not None:  # before dedup compares rows: the index form of committed ids
            self.identifiers.index_rows(
                [p.rows for p in prepared if p.rows is not None], IndexIds(self.index_id_key)
            )
        for message, p in zip(batch, prepared, strict=True):
            self._admit(message, p, work, ctx)
        run = self._dlq.check(work.invalid)  # raises DlqLimitExceeded before anything is written

        verified_flags = self._verified_flags(work, now)
        existing = self._existing(work, [value for _, value in verified_flags])
        flag_values = self._flags_of_their_agents(work, verified_flags, existing)
        accepted = self._dedup(work, existing)
        self._apply_pending_flags(accepted, flag_values)
        pacts = apply_pacts(accepted, now=now, version=self.pact_version, binds=self._pact_binds)
        quarantine = self._new_quarantine(work.quarantine)

        segments = self._write_segments(accepted, quarantine)
        if hook is not None:
            hook("after_segments")
        if work.letters:
            self.dead_letters.send(work.letters)
            self.dead_letters.flush()

        if pacts.flags:
            insert_flags(self.index, pacts.flags)
        if pacts.results:
            insert_violations(self.index, pacts.results)
        if flag_values:
            insert_flags(self.index, [flag_row(v, received_at=now) for v in flag_values])
        if quarantine:
            insert_quarantine(self.index, [self._quarantine_row(item, now) for item in quarantine])
        if accepted:
            rows = [self._rows(item) for item in accepted]
            insert_captures(self.index, rows, dedup_token=_dedup_token(accepted))
        upgraded = upgrade_indexed(
            self.index, flag_values, existing, skip={item.decision_id for item in accepted}, now=now
        )
        # 8. the transparency log: after the rows are durable, before the caller commits (consumers.tlog)
        logged = 0
        if self.tlog is not None and work.logged:
            logged = self.tlog.append([_entry(item) for item in work.logged], hook=hook)

        self._dlq.accept(run)
        if work.conflicts:
            logger.warning(
                "quarantined %d conflicting duplicates: %s", len(work.conflicts), work.conflicts[:10]
            )
        return BatchResult(
            messages=len(batch),
            indexed=len(accepted) - work.upgrades,
            content_upgrades=work.upgrades,
            duplicates=work.duplicates,
            quarantined=len(quarantine),
            dead_lettered=len(work.letters),
            flags=len(flag_values),
            upgraded=upgraded,
            pact_violations=pacts.violations,
            pact_errors=pacts.errors,
            logged=logged,
            conflicts=tuple(work.conflicts),
            segments=tuple(segments),
        )

    # --- 1-3: decode, claim check, verify -------------------------------------------------------------
    def _admit(self, message: SourceMessage, p: Prepared, work: _Work, ctx: PrepareContext) -> None:
        def dead(reason: str, detail: str) -> None:
            work.letters.append(DeadLetter(message, reason, detail))
            work.invalid.append(True)

        if p.kind == "dead":
            return dead(p.reason, p.detail)
        if p.kind == "flag":
            assert p.value is not None
            work.flags.append((message, p.value))
            work.invalid.append(False)
            return None
        if p.kind == "claim_check":
            assert p.value is not None
            try:
                body = resolve_claim_check(self.store, p.value)
            except BlobNotFound as exc:
                return dead("claim_check_missing", f"{type(exc).__name__}: {exc}")
            except ContentHashMismatch as exc:
                return dead("claim_check_mismatch", f"{type(exc).__name__}: {exc}")
            try:
                inner = decode(body)
            except DecodeError as exc:
                return dead("claim_check_undecodable", f"{type(exc).__name__}: {exc}")
            if inner.kind != "capture":
                return dead("claim_check_undecodable", f"the blob holds a {inner.kind}, not a capture")
            p = prepare_capture(body, inner.value, ctx, source=source_of(message))
            if self.identifiers is not None and p.rows is not None:
                self.identifiers.index_rows([p.rows], IndexIds(self.index_id_key))
        work.invalid.append(False)
        item = _Item.of(message, p)
        if p.verified:
            work.captures.append(item)
        else:
            logger.warning("quarantine %s (%s): %s", item.decision_id, item.source, p.detail)
            work.quarantine.append(item)
        return None

    def _verified_flags(self, work: _Work, now: datetime) -> list[tuple[SourceMessage, dict[str, Any]]]:
        """Flags whose signature verifies; the others are quarantined with their bytes."""
        good: list[tuple[SourceMessage, dict[str, Any]]] = []
        for message, value in work.flags:
            try:
                verify_flag(value, self.trust, now=now, require_signed=self.require_signed_flags)
            except VerificationError as exc:
                self._quarantine_flag(work, message, value, f"flag {quarantine_reason(exc)}", exc.part, exc)
                continue
            except Exception as exc:  # one odd flag must not stop the batch
                logger.exception("unexpected error verifying a flag (%s)", source_of(message))
                self._quarantine_flag(work, message, value, f"flag {unexpected_reason(exc)}", "", exc)
                continue
            good.append((message, value))
        return good

    def _flags_of_their_agents(
        self,
        work: _Work,
        flags: Sequence[tuple[SourceMessage, dict[str, Any]]],
        existing: Mapping[str, Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        """The flags whose ``agentId`` is the agent of the decision they name, where it is known (indexed,
        or verified in this batch); the others are quarantined. A flag for a decision not seen yet waits
        in ``flags`` and applies only to a capture of its agent (:func:`pending_reasons`)."""
        agents = {did: str(row.get("agent_id") or "") for did, row in existing.items()}
        for item in work.captures:
            agents.setdefault(item.decision_id, item.agent_id)
        good: list[dict[str, Any]] = []
        for message, value in flags:
            did, agent = str(value["decisionId"]), str(value.get("agentId") or "")
            owner = agents.get(did)
            if owner is not None and owner != agent:
                detail = f"the flag is for agent {agent!r}, decision {did} belongs to agent {owner!r}"
                self._quarantine_flag(work, message, value, AGENT_MISMATCH_REASON, "agentId", detail)
                continue
            good.append(value)
        return good

    def _quarantine_flag(
        self,
        work: _Work,
        message: SourceMessage,
        value: Mapping[str, Any],
        reason: str,
        part: str,
        detail: object,
    ) -> None:
        item = _Item(
            message,
            str(value.get("decisionId") or ""),
            str(value.get("agentId") or ""),
            self._compress(message.value),
            "sha256:" + hashlib.sha256(message.value).hexdigest(),
            reason=reason,
            part=part,
        )
        logger.warning("quarantine flag for %s (%s): %s", item.decision_id, item.source, detail)
        work.quarantine.append(item)

    # --- 4: dedup ----------------------------------------------------------------------------------------
    def _existing(self, work: _Work, flags: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        ids = [item.decision_id for item in work.captures] + [str(f["decisionId"]) for f in flags]
        if not ids:
            return {}
        return current_decisions(
            self.index, ids, columns=("decision_id", "agent_id", "content_sha256", "consequential")
        )

    def _dedup(self, work: _Work, existing: Mapping[str, Mapping[str, Any]]) -> list[_Item]:
        accepted: list[_Item] = []
        seen: dict[str, Mapping[str, Any]] = {}  # decision id -> row of the capture accepted in this batch
        stored = self._stored_rows(work, existing)
        for item in work.captures:
            did = item.decision_id
            current = seen.get(did) or existing.get(did)
            known = None if current is None else current["content_sha256"]
            if known is None or known == item.sha:
                how = "new" if known is None else "duplicate"
            else:
                how = self._relation(item, seen.get(did) or stored.get(did))
            if how == "duplicate" or how == "subsumed":
                work.duplicates += 1
                work.logged.append(item)  # a crash may have come between its index row and its leaf
            elif how == "new" or how == "upgrade":
                assert item.rows is not None
                if how == "upgrade":
                    self._make_upgrade(item, None if did in seen else stored[did], work)
                seen[did] = item.rows.decision
                accepted.append(item)
                work.logged.append(item)
            else:
                item.reason, item.part = CONFLICT_REASON, "decisionId"
                logger.warning(
                    "ConflictingDuplicate: %s arrived again (%s) with %s, already indexed with %s",
                    did,
                    item.source,
                    item.sha,
                    known,
                )
                work.conflicts.append(did)
                work.quarantine.append(item)
        return accepted

    def _stored_rows(
        self, work: _Work, existing: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        """What :mod:`.upgrade` compares, for indexed decisions that arrive again with other bytes."""
        ids = [
            item.decision_id
            for item in work.captures
            if item.decision_id in existing and existing[item.decision_id]["content_sha256"] != item.sha
        ]
        if not ids:
            return {}
        return current_decisions(self.index, ids, columns=_UPGRADE_COLUMNS)

    @staticmethod
    def _relation(item: _Item, current: Mapping[str, Any] | None) -> str:
        """``upgrade``, ``subsumed`` or ``conflict`` (:func:`.upgrade.relation`)."""
        if current is None or item.rows is None:
            return "conflict"
        return relation(stored=dict(current), arriving=item.rows.decision)

    def _make_upgrade(self, item: _Item, indexed: Mapping[str, Any] | None, work: _Work) -> None:
        """Make ``item`` the next version of the decision's row. ``indexed``: the stored row, when it
        was indexed before this batch; what was decided about it since (legal hold, a flag's
        upgrade) stays decided. A structured-only capture of this same batch has no history."""
        assert item.rows is not None
        decision = item.rows.decision
        decision["version"] = state_version(self.clock())  # above the structured-only row's
        if indexed is not None:
            decision["legal_hold"] = bool(indexed["legal_hold"])
            decision["hold_reason"] = str(indexed.get("hold_reason") or "")
            if indexed.get("consequential") and item.flag_reason is None:
                item.flag_reason = str(indexed.get("consequential_reason") or "")
        work.upgrades += 1
        logger.info(
            "content upgrade: %s arrived in full (%s) over its structured-only capture",
            item.decision_id,
            item.source,
        )

    def _new_quarantine(self, items: Sequence[_Item]) -> list[_Item]:
        """Quarantine items not already quarantined (same id, bytes and reason): redelivery is idempotent."""
        if not items:
            return []
        ids = sorted({item.decision_id for item in items})
        known = known_quarantine(self.index, ids)
        fresh: list[_Item] = []
        for item in items:
            key = (item.decision_id, item.sha, item.reason)
            if key not in known:
                known.add(key)
                fresh.append(item)
        return fresh

    # --- 5: flags, classes, segments -------------------------------------------------------------------
    def _apply_pending_flags(self, accepted: Sequence[_Item], flags: Sequence[Mapping[str, Any]]) -> None:
        """A flag that arrived before (or with) its capture makes the capture consequential at insert."""
        if not accepted:
            return
        reasons = pending_reasons(self.index, {item.decision_id: item.agent_id for item in accepted}, flags)
        for item in accepted:
            if item.decision_id in reasons:
                item.flag_reason = reasons[item.decision_id]

    def _write_segments(self, accepted: Sequence[_Item], quarantine: Sequence[_Item]) -> list[str]:
        groups: dict[str, list[_Item]] = {}
        for item in accepted:
            assert item.rows is not None
            cls = "consequential" if item.flag_reason is not None else item.rows.decision["retention_class"]
            groups.setdefault(str(cls), []).append(item)
        if quarantine:
            groups[QUARANTINE_CLASS] = list(quarantine)
        keys: list[str] = []
        versions: list[tuple[str, str | None]] = []
        for cls, items in groups.items():
            first = items[0].message
            writer = SegmentWriter(
                retention_class=cls,
                topic=first.topic,
                partition=first.partition,
                first_offset=first.offset,
                level=self.level,
            )
            for item in items:
                writer.append_frame(item.frame)
            key, body = writer.finish()
            versions.append((key, self.store.put(key, body, retain_until=_locked_until(cls, items))))
            for item, location in zip(items, writer.locations(), strict=True):
                item.location = location
            keys.append(key)
        record_versions(self.index, versions)  # a versioned store: read what was sealed (storage.versions)
        return keys

    def _compress(self, data: bytes) -> bytes:
        return frame_compressor(self.level).compress(data)

    # --- 7: rows -----------------------------------------------------------------------------------------
    @staticmethod
    def _rows(item: _Item) -> CaptureRows:
        """The prepared rows, placed in their segment (and upgraded by an early flag)."""
        assert item.rows is not None and item.location is not None
        decision = item.rows.decision
        decision["segment_key"] = item.location.key
        decision["segment_offset"] = item.location.offset
        decision["segment_length"] = item.location.length
        if item.flag_reason is not None:
            decision["retention_class"] = "consequential"  # expiry is retentionDays either way
            if not decision["consequential"]:
                decision["consequential"] = True
                decision["consequential_reason"] = item.flag_reason
        return item.rows

    @staticmethod
    def _quarantine_row(item: _Item, now: datetime) -> dict[str, Any]:
        assert item.location is not None
        return {
            "decision_id": item.decision_id,
            "agent_id": item.agent_id,
            "reason": item.reason,
            "part": item.part,
            "source": item.source,
            "segment_key": item.location.key,
            "segment_offset": item.location.offset,
            "segment_length": item.location.length,
            "received_at": now,
            "content_sha256": item.sha,
        }


def _entry(item: _Item) -> Entry:
    assert item.rows is not None
    return Entry(item.decision_id, item.rows.decision["captured_at"], item.tlog_leaf)


def _dedup_token(items: Sequence[_Item]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for item in items:
        digest.update(item.decision_id.encode())
        digest.update(item.sha.encode())
    return "ingest:" + digest.hexdigest()


def _locked_until(retention_class: str, items: Sequence[_Item]) -> datetime | None:
    """A consequential segment is kept (S3 Object Lock, where the store has it on) until its last
    decision's record expires; other classes are compacted after 30 days and are never locked."""
    if retention_class != "consequential":
        return None
    moments = [
        m
        for item in items
        if item.rows is not None and isinstance(m := item.rows.decision.get("expires_at"), datetime)
    ]
    return max(moments) if moments else None
