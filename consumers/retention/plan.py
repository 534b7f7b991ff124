"""Compaction planning: what happens to each decision and segment at a given time. Pure: no I/O.

The planner sees every live decision that could be due (see :mod:`consumers.retention.store`) and
groups those with content by segment. A segment is *due* at ``as_of`` when its ordinary (not held)
decisions are past their content windows::

    due_at = min(latest window end, earliest window end + compaction.rewrite_grace_hours)

where a decision promoted out of a non-consequential segment counts with the window it had as
captured (a promotion is a reason to copy it out, not to keep the segment). So a segment is normally processed once all its decisions are due, and content
never outlives its window by more than the grace because it shares a segment with later decisions.
A segment whose decisions are all under legal hold is never due. In a due segment every decision gets one step:

- ``hold-copy``: under legal hold: its frame is copied verbatim into a segment of its class and its
  row keeps its state (content, class, expiry) - the hold blocks compaction and expiry;
- ``promote``: its content must stay (a flag_consequential came before its content window ended, or
  it is consequential but sits in a non-consequential segment): copied into a consequential segment,
  the row becomes consequential;
- ``move``: its own content window has not ended yet (the grace case): copied into a segment of its class;
- ``expire``: its record retention has ended: the row becomes an ``expired`` tombstone;
- ``compact``: otherwise: the row becomes ``metadata-only`` (manifest, hashes and row kept).

Then the segment is deleted. Decisions without content (already metadata-only) are only checked for
record expiry. Legal hold blocks both.

:func:`plan_sweep` decides the rest of what may not outlive retention: quarantine segments past
``quarantine_days`` (their rows stay as metadata), and blobs no index row refers to - segments of a
batch whose consumer died before indexing it, claim-check bodies whose message was never ingested -
once older than their grace. Legal hold keeps a held decision's quarantine segment and claim checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from consumers.retention.clock import as_utc
from consumers.retention.policy import RetentionClass, RetentionDecision, RetentionFacts, RetentionPolicy
from producers.blobstore import BlobInfo
from producers.claimcheck import claim_key

__all__ = [
    "COPY_ACTIONS",
    "Action",
    "Candidate",
    "CompactionPlan",
    "OrphanBlob",
    "QuarantineExpiry",
    "QuarantineRow",
    "SegmentPlan",
    "Step",
    "SweepPlan",
    "claim_decision",
    "claim_folder",
    "plan_compaction",
    "plan_sweep",
    "segment_class",
]

Action = Literal["compact", "expire", "promote", "hold-copy", "move"]
COPY_ACTIONS: frozenset[str] = frozenset({"promote", "hold-copy", "move"})


def segment_class(segment_key: str) -> str:
    """The retention class a segment key names (``segments/<class>/...``), or ``""``."""
    parts = segment_key.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "segments" else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One current ``decisions`` row as the planner needs it (plus its earliest flag, if any).

    ``consequential`` is the capture's own flag (from the signed manifest when the row has one), not
    the row column ingest may set when a late flag arrives: whether a late flag counts is the policy's
    call (:meth:`RetentionPolicy.promotes`).
    """

    decision_id: str
    agent_id: str
    captured_at: datetime
    capture_level: str
    content_state: str
    consequential: bool
    consequential_column: bool = False
    """The row's ``consequential`` column as it is (ingest sets it for late flags too)."""
    consequential_reason: str = ""
    legal_hold: bool = False
    hold_reason: str = ""
    trust: str = "verified"
    retention_class: str = ""
    segment_key: str = ""
    segment_offset: int = 0
    segment_length: int = 0
    content_sha256: str = ""
    capture_retention_days: int | None = None
    first_flag_at: datetime | None = None
    flag_reason: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Candidate:
        """From a row of :func:`consumers.retention.store.load_candidates` (or any ``decisions`` row)."""
        has_manifest = row.get("has_manifest")
        manifest_flagged = row.get("manifest_flagged")
        if has_manifest and manifest_flagged is not None:
            consequential = bool(manifest_flagged)
        elif has_manifest:
            consequential = False
        else:
            consequential = bool(row.get("consequential"))
        days = row.get("capture_retention_days")
        flag_at = row.get("first_flag_at")
        return cls(
            decision_id=str(row["decision_id"]),
            agent_id=str(row.get("agent_id") or ""),
            captured_at=as_utc(row["captured_at"]),
            capture_level=str(row.get("capture_level") or "full"),
            content_state=str(row.get("content_state") or "full"),
            consequential=consequential,
            consequential_column=bool(row.get("consequential")),
            consequential_reason=str(row.get("consequential_reason") or ""),
            legal_hold=bool(row.get("legal_hold")),
            hold_reason=str(row.get("hold_reason") or ""),
            trust=str(row.get("trust") or "verified"),
            retention_class=str(row.get("retention_class") or ""),
            segment_key=str(row.get("segment_key") or ""),
            segment_offset=int(row.get("segment_offset") or 0),
            segment_length=int(row.get("segment_length") or 0),
            content_sha256=str(row.get("content_sha256") or ""),
            capture_retention_days=int(days) if days is not None and days >= 0 else None,
            first_flag_at=as_utc(flag_at) if isinstance(flag_at, datetime) else None,
            flag_reason=str(row.get("flag_reason") or ""),
        )

    @property
    def facts(self) -> RetentionFacts:
        return RetentionFacts(
            captured_at=self.captured_at,
            capture_level=self.capture_level,
            consequential=self.consequential,
            capture_retention_days=self.capture_retention_days,
        )

    @property
    def has_content(self) -> bool:
        return bool(self.segment_key)


@dataclass(frozen=True, slots=True)
class Step:
    """What happens to one decision, and why (the ``why`` goes to the deletions log)."""

    candidate: Candidate
    action: Action
    decision: RetentionDecision
    promoted: bool
    target_class: RetentionClass
    reason: str

    @property
    def decision_id(self) -> str:
        return self.candidate.decision_id


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    """A due segment: a step for every decision still in it; the segment is deleted afterwards."""

    segment_key: str
    due_at: datetime
    steps: tuple[Step, ...]

    @property
    def copies(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.action in COPY_ACTIONS)

    @property
    def drops(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.action not in COPY_ACTIONS)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Everything one compaction run will do at ``as_of`` under ``policy``."""

    as_of: datetime
    policy: RetentionPolicy
    segments: tuple[SegmentPlan, ...]
    expiries: tuple[Step, ...]
    """Decisions without content whose record retention ended."""
    pending_deletes: tuple[str, ...] = ()
    """Segments whose deletion is logged but not confirmed (a crashed run): deleted again."""
    held: tuple[str, ...] = ()
    """Decisions the policy would compact or expire now but a legal hold blocks."""
    segments_not_due: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.segments or self.expiries or self.pending_deletes)

    @property
    def decisions(self) -> int:
        return sum(len(s.steps) for s in self.segments) + len(self.expiries)


def _fmt(moment: datetime) -> str:
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_promoted(policy: RetentionPolicy, c: Candidate) -> bool:
    if c.trust == "quarantined":  # evidence of tampering: kept like a consequential record
        return True
    return c.first_flag_at is not None and policy.promotes(c.facts, c.first_flag_at)


def _assess(policy: RetentionPolicy, c: Candidate) -> tuple[bool, RetentionDecision]:
    promoted = _is_promoted(policy, c)
    return promoted, policy.decide(c.facts, promoted=promoted)


def _step(
    policy: RetentionPolicy,
    c: Candidate,
    assessed: tuple[bool, RetentionDecision],
    as_of: datetime,
    *,
    in_due_segment: bool,
) -> Step | None:
    promoted, d = assessed
    rule = policy.rule(d.rule)
    source_class = segment_class(c.segment_key)
    if c.legal_hold:
        if not in_due_segment:
            return None
        reason = (
            f"legal hold ({c.hold_reason or 'no reason given'}): copied out of a segment due for compaction"
        )
        return Step(c, "hold-copy", d, promoted, d.retention_class if promoted else _keep_class(c, d), reason)
    if d.expires_at <= as_of:
        reason = f"{d.rule} retention ({d.retention_days} d) ended {_fmt(d.expires_at)}"
        return Step(c, "expire", d, promoted, d.retention_class, reason)
    if not in_due_segment:
        return None
    if d.content_expires_at > as_of:
        if d.retention_class == "consequential" and source_class != "consequential":
            why = (
                f"flag_consequential at {_fmt(c.first_flag_at)} before its content window ended"
                if c.first_flag_at is not None and promoted and c.trust != "quarantined"
                else "consequential"
            )
            if c.flag_reason:
                why += f": {c.flag_reason}"
            return Step(
                c,
                "promote",
                d,
                promoted,
                "consequential",
                f"promoted ({why}); kept until {_fmt(d.expires_at)}",
            )
        reason = f"content window ends {_fmt(d.content_expires_at)}: copied out of a segment rewritten after the grace"
        return Step(c, "move", d, promoted, _keep_class(c, d), reason)
    content = f"{d.rule}.content_days={rule.content_days}" if rule.content_days is not None else d.rule
    reason = f"content window ({content}) ended {_fmt(d.content_expires_at)}; metadata kept until {_fmt(d.expires_at)}"
    return Step(c, "compact", d, promoted, d.retention_class, reason)


def _keep_class(c: Candidate, d: RetentionDecision) -> RetentionClass:
    """A copy stays in the family its segment had (when that is a known class)."""
    source = segment_class(c.segment_key)
    if source in ("consequential", "routine", "structured"):
        return source  # type: ignore[return-value]
    return d.retention_class


def plan_compaction(
    candidates: Iterable[Candidate],
    *,
    policy: RetentionPolicy,
    as_of: datetime,
    pending_deletes: Iterable[str] = (),
) -> CompactionPlan:
    """The plan for ``as_of`` (see the module docstring). Deterministic: same inputs, same plan."""
    as_of = as_utc(as_of)
    grace = timedelta(hours=policy.compaction.rewrite_grace_hours)
    by_segment: dict[str, list[Candidate]] = {}
    expiries: list[Step] = []
    held: list[str] = []
    for c in candidates:
        if c.content_state == "expired":
            continue
        if c.has_content:
            by_segment.setdefault(c.segment_key, []).append(c)
            continue
        assessed = _assess(policy, c)
        if assessed[1].expires_at <= as_of:
            if c.legal_hold:
                held.append(c.decision_id)
            else:
                step = _step(policy, c, assessed, as_of, in_due_segment=False)
                if step is not None:
                    expiries.append(step)

    segments: list[SegmentPlan] = []
    not_due = 0
    for key in sorted(by_segment):
        members = sorted(by_segment[key], key=lambda c: (c.segment_offset, c.decision_id))
        assessed_all = [_assess(policy, c) for c in members]
        # the segment's own schedule: a decision promoted out of a non-consequential segment counts
        # with the window it had as captured (a promotion is a reason to copy it out, never to keep
        # the whole segment); held decisions do not count at all
        seg_class = segment_class(key)
        windows = [
            policy.decide(c.facts).content_expires_at
            if promoted and seg_class != "consequential"
            else d.content_expires_at
            for c, (promoted, d) in zip(members, assessed_all, strict=True)
            if not c.legal_hold
        ]
        held.extend(
            c.decision_id
            for c, a in zip(members, assessed_all, strict=True)
            if c.legal_hold and a[1].content_expires_at <= as_of
        )
        if not windows:
            not_due += 1
            continue
        due_at = min(max(windows), min(windows) + grace)
        if due_at > as_of:
            not_due += 1
            continue
        steps = tuple(
            s
            for c, a in zip(members, assessed_all, strict=True)
            if (s := _step(policy, c, a, as_of, in_due_segment=True)) is not None
        )
        segments.append(SegmentPlan(key, due_at, steps))

    pending = tuple(sorted(set(pending_deletes) - set(by_segment)))
    counts: dict[str, int] = {"segments": len(segments), "pending_deletes": len(pending), "held": len(held)}
    for seg in segments:
        for s in seg.steps:
            counts[s.action] = counts.get(s.action, 0) + 1
    for s in expiries:
        counts[s.action] = counts.get(s.action, 0) + 1
    return CompactionPlan(
        as_of=as_of,
        policy=policy,
        segments=tuple(segments),
        expiries=tuple(expiries),
        pending_deletes=pending,
        held=tuple(sorted(held)),
        segments_not_due=not_due,
        counts=counts,
    )


# --- the sweep: quarantine, orphan segments, orphan claim checks --------------------------------------------
SweepKind = Literal["orphan-segment", "orphan-claim"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuarantineRow:
    """One current ``quarantine`` row whose bytes are still stored."""

    decision_id: str
    agent_id: str
    reason: str
    segment_key: str
    content_sha256: str
    received_at: datetime

    @property
    def claim(self) -> str:
        """The claim-check key its bytes would have travelled under (if they did)."""
        return _claim_of(self.agent_id, self.decision_id, self.content_sha256)


@dataclass(frozen=True, slots=True)
class QuarantineExpiry:
    """A quarantine segment whose every row is past ``quarantine_days``: segment and claims go, rows stay."""

    segment_key: str
    due_at: datetime
    rows: tuple[QuarantineRow, ...]
    claims: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OrphanBlob:
    """A blob no index row refers to, older than its grace: deleted."""

    key: str
    kind: SweepKind
    modified: datetime
    decision_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """What the sweep of one run does: expire quarantine segments, delete orphan segments and claims."""

    as_of: datetime
    now: datetime
    segment_grace: timedelta
    claim_grace: timedelta
    quarantine: tuple[QuarantineExpiry, ...] = ()
    orphans: tuple[OrphanBlob, ...] = ()
    held: tuple[str, ...] = ()
    """Decisions whose quarantine segment or claim check is kept only because of a legal hold."""
    gone: tuple[tuple[str, SweepKind], ...] = ()
    """Orphans a crashed sweep logged and deleted but never confirmed: only the confirmation is due."""
    in_grace: int = 0
    """Unreferenced blobs younger than their grace (possibly still being written): left alone."""

    @property
    def empty(self) -> bool:
        return not (self.quarantine or self.orphans or self.gone)

    def grace_for(self, kind: SweepKind) -> timedelta:
        return self.segment_grace if kind == "orphan-segment" else self.claim_grace

    @property
    def orphan_segments(self) -> int:
        return sum(1 for o in self.orphans if o.kind == "orphan-segment")

    @property
    def orphan_claims(self) -> int:
        return sum(1 for o in self.orphans if o.kind == "orphan-claim")


def _claim_of(agent_id: str, decision_id: str, content_sha256: str) -> str:
    return claim_key(
        agent_id=agent_id, decision_id=decision_id, sha256_hex=content_sha256.removeprefix("sha256:")
    )


def claim_folder(agent_id: str, decision_id: str) -> str:
    """``claims/<agent>/<decision>/``: every claim-check key of one decision starts with it."""
    return _claim_of(agent_id, decision_id, "").rsplit("/", 1)[0] + "/"


def claim_decision(key: str) -> str:
    """The (key-safe) decision id a claim-check key names, or ``""``."""
    parts = key.split("/")
    return parts[2] if len(parts) == 4 and parts[0] == "claims" else ""


def plan_sweep(
    *,
    policy: RetentionPolicy,
    as_of: datetime,
    now: datetime,
    segments: Iterable[BlobInfo],
    claims: Iterable[BlobInfo],
    referenced_segments: Iterable[str],
    quarantine: Iterable[QuarantineRow],
    live_claims: Iterable[str],
    held: Iterable[tuple[str, str]],
    unconfirmed: Iterable[tuple[str, str]] = (),
) -> SweepPlan:
    """The sweep at ``as_of`` (policy time) and ``now`` (wall clock). Deterministic; no I/O.

    - ``segments`` / ``claims``: the blobs under ``segments/`` and ``claims/`` (key and modified time);
    - ``referenced_segments``: every segment key any ``decisions`` or ``quarantine`` row names;
    - ``quarantine``: the quarantine rows whose bytes are still stored;
    - ``live_claims``: claim keys of decisions whose content is still stored;
    - ``held``: ``(agent_id, decision_id)`` of decisions under legal hold;
    - ``unconfirmed``: ``(key, kind)`` of orphan deletions logged but not confirmed (a crashed sweep).

    A quarantine segment is due ``quarantine_days`` after the last of its rows was received (policy
    time, so ``--as-of`` moves it) unless one of its decisions is held. An unreferenced blob is an
    orphan once it is older than its grace by the wall clock (never ``--as-of``: the grace protects
    writes in flight, which only real time can tell).
    """
    as_of, now = as_utc(as_of), as_utc(now)
    rules = policy.compaction
    seg_grace = timedelta(hours=rules.orphan_grace_hours)
    claim_grace = timedelta(hours=rules.orphan_claim_grace_hours)
    held_by_folder = {claim_folder(agent, did): did for agent, did in held}
    held_ids = {did for _, did in held}
    kept_held: set[str] = set()
    claim_infos = {info.key: info for info in claims}
    segment_infos = sorted(segments, key=lambda i: i.key)
    listed = {i.key for i in segment_infos} | set(claim_infos)
    gone: tuple[tuple[str, SweepKind], ...] = tuple(
        (key, "orphan-claim" if kind == "orphan-claim" else "orphan-segment")
        for key, kind in sorted(unconfirmed)
        if key not in listed
    )

    by_segment: dict[str, list[QuarantineRow]] = {}
    for row in quarantine:
        by_segment.setdefault(row.segment_key, []).append(row)
    expiries: list[QuarantineExpiry] = []
    quarantine_claims: set[str] = set()
    for key in sorted(by_segment):
        rows = sorted(by_segment[key], key=lambda r: (r.decision_id, r.content_sha256, r.reason))
        quarantine_claims.update(r.claim for r in rows)
        due_at = max(r.received_at for r in rows) + timedelta(days=policy.quarantine_days)
        if due_at > as_of:
            continue
        blocked = sorted({r.decision_id for r in rows} & held_ids)
        if blocked:
            kept_held.update(blocked)
            continue
        claims_here = tuple(sorted({r.claim for r in rows} & set(claim_infos)))
        expiries.append(QuarantineExpiry(key, due_at, tuple(rows), claims_here))
    expiring_claims = {c for e in expiries for c in e.claims}

    orphans: list[OrphanBlob] = []
    in_grace = 0
    referenced = set(referenced_segments)
    for info in segment_infos:
        if info.key in referenced:
            continue
        if now - as_utc(info.modified) < seg_grace:
            in_grace += 1
            continue
        reason = (
            f"no index row refers to it (decisions, quarantine); written {_fmt(info.modified)}, "
            f"older than compaction.orphan_grace_hours={rules.orphan_grace_hours:g}"
        )
        orphans.append(OrphanBlob(info.key, "orphan-segment", as_utc(info.modified), "", reason))

    live = set(live_claims) | (quarantine_claims - expiring_claims)
    for key in sorted(claim_infos):
        info = claim_infos[key]
        if key in live or key in expiring_claims:
            continue
        holder = held_by_folder.get(key.rsplit("/", 1)[0] + "/")
        if holder is not None:
            kept_held.add(holder)
            continue
        if now - as_utc(info.modified) < claim_grace:
            in_grace += 1
            continue
        reason = (
            "claim-check body no decision or quarantine row with content refers to (never ingested, "
            f"dead-lettered, or its content is gone); written {_fmt(info.modified)}, older than "
            f"compaction.orphan_claim_grace_hours={rules.orphan_claim_grace_hours:g}"
        )
        orphans.append(OrphanBlob(key, "orphan-claim", as_utc(info.modified), claim_decision(key), reason))

    return SweepPlan(
        as_of=as_of,
        now=now,
        segment_grace=seg_grace,
        claim_grace=claim_grace,
        quarantine=tuple(expiries),
        orphans=tuple(orphans),
        held=tuple(sorted(kept_held)),
        gone=gone,
        in_grace=in_grace,
    )
