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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from consumers.retention.clock import as_utc
from consumers.retention.policy import RetentionClass, RetentionDecision, RetentionFacts, RetentionPolicy

__all__ = [
    "COPY_ACTIONS",
    "Action",
    "Candidate",
    "CompactionPlan",
    "SegmentPlan",
    "Step",
    "plan_compaction",
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
