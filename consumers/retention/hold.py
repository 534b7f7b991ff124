"""Legal hold: set and release, always with a reason, always audited.

A hold is two columns of the decision's row (``legal_hold``, ``hold_reason``), written as a new row
version. While it is set, compaction neither compacts nor expires the decision (its frame is copied
out of a segment that goes, byte for byte) and the index's TTL backstop skips it. Releasing it hands
the decision back to the policy: if its windows have passed, the next compaction applies them.

Every request, including one that changes nothing (already held, not held), is audited twice: a line
in ``<data_dir>/retention/holds.jsonl`` and a row of ``access_log`` (action ``legal-hold`` /
``legal-release``, with the caller, scope and reason).

With a blob store that has S3 Object Lock on, a hold also sets an S3 legal hold on the decision's
segment (the store then refuses to delete it, whoever asks), and a release clears it once no other
held decision lives in that segment. Without one, the index's hold is the whole hold.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from consumers.access.log import AccessRecord, IndexAccessLog
from consumers.index.engine import state_version
from consumers.retention.clock import Clock, SystemClock, as_utc
from consumers.retention.lock import retention_lock
from consumers.retention.store import held_in_segment, hold_state, holds, write_versions
from schemas.errors import CaptureNotFound, RetentionError

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

__all__ = ["HoldResult", "LegalHolds"]

HoldAction = Literal["legal-hold", "legal-release"]


@dataclass(frozen=True, slots=True)
class HoldResult:
    """The decision's hold state after the request; ``changed`` is False when it already was so."""

    decision_id: str
    legal_hold: bool
    hold_reason: str
    changed: bool
    content_state: str
    at: datetime
    store_hold: bool = False  # an S3 legal hold was set (hold) or cleared (release) on the segment


class LegalHolds:
    """Set and release legal holds on decisions of one index (see the module docstring)."""

    def __init__(
        self,
        *,
        index: Index,
        audit_path: Path,
        lock_path: Path,
        caller: str,
        scope: str = "operator",
        clock: Clock | None = None,
        store: BlobStore | None = None,
    ) -> None:
        self.index = index
        self.store = store
        self.audit_path = Path(audit_path)
        self.lock_path = Path(lock_path)
        self.caller = caller
        self.scope = scope
        self.clock: Clock = clock or SystemClock()

    @classmethod
    def in_data_dir(
        cls,
        data_dir: Path,
        *,
        index: Index,
        caller: str,
        scope: str,
        clock: Clock | None = None,
        store: BlobStore | None = None,
    ) -> LegalHolds:
        """Holds audited in ``<data_dir>/retention/holds.jsonl``, under the retention lock there."""
        base = Path(data_dir) / "retention"
        return cls(
            index=index,
            audit_path=base / "holds.jsonl",
            lock_path=base / "retention.lock",
            caller=caller,
            scope=scope,
            clock=clock,
            store=store,
        )

    def hold(self, decision_id: str, *, reason: str) -> HoldResult:
        """Put ``decision_id`` under legal hold. Raises :class:`CaptureNotFound` for an unknown decision
        and :class:`RetentionError` for an expired one (nothing is left to hold)."""
        return self._change(decision_id, reason=reason, hold=True)

    def release(self, decision_id: str, *, reason: str) -> HoldResult:
        """Release the hold; the decision follows the retention policy again from the next compaction."""
        return self._change(decision_id, reason=reason, hold=False)

    def held(self) -> list[dict[str, Any]]:
        """Every decision currently under hold: id, agent, reason, content state."""
        return holds(self.index)

    def _change(self, decision_id: str, *, reason: str, hold: bool) -> HoldResult:
        action: HoldAction = "legal-hold" if hold else "legal-release"
        if not reason.strip():
            raise RetentionError(f"{action} of {decision_id} needs a reason (--reason)")
        with retention_lock(self.lock_path):
            row = hold_state(self.index, decision_id)
            if row is None:
                raise CaptureNotFound(f"no decision {decision_id} in the index")
            now = self.clock.now()
            if hold and row["content_state"] == "expired":
                raise RetentionError(
                    f"{decision_id} has expired under the retention policy; nothing is left to hold"
                )
            new_reason = reason if hold else ""
            changed = bool(row["legal_hold"]) != hold or (hold and row["hold_reason"] != reason)
            self._audit(action, row, reason=reason, changed=changed, at=now)
            if changed:
                write_versions(
                    self.index,
                    [(decision_id, {"legal_hold": hold, "hold_reason": new_reason})],
                    version=state_version(now),
                )
            store_hold = self._store_hold(str(row.get("segment_key") or ""), hold=hold)
            return HoldResult(
                decision_id=decision_id,
                legal_hold=hold,
                hold_reason=new_reason if changed else str(row["hold_reason"]),
                changed=changed,
                content_state=str(row["content_state"]),
                at=now,
                store_hold=store_hold,
            )

    def _store_hold(self, segment_key: str, *, hold: bool) -> bool:
        """Mirror the hold onto the segment as an S3 legal hold (idempotent); a release leaves it while
        another held decision shares the segment. False when there is nothing to set."""
        if self.store is None or not segment_key:
            return False
        if not hold and held_in_segment(self.index, segment_key):
            return False
        return self.store.set_legal_hold(segment_key, hold)

    def _audit(
        self, action: HoldAction, row: dict[str, Any], *, reason: str, changed: bool, at: datetime
    ) -> None:
        detail = {
            "changed": changed,
            "previous_hold": bool(row["legal_hold"]),
            "previous_reason": row["hold_reason"],
        }
        line = {
            "at": as_utc(at).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "action": action,
            "decision_id": row["decision_id"],
            "agent_id": row["agent_id"],
            "caller": self.caller,
            "scope": self.scope,
            "reason": reason,
            **detail,
        }
        try:
            self.audit_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.audit_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise RetentionError(f"cannot write the hold audit log {self.audit_path}: {exc}") from exc
        IndexAccessLog(self.index).append(
            [
                AccessRecord(
                    at=as_utc(at),
                    caller=self.caller,
                    scope=self.scope,
                    decision_id=str(row["decision_id"]),
                    agent_id=str(row["agent_id"]),
                    action=action,
                    reason=reason,
                    outcome="allowed",
                    detail=json.dumps(detail, sort_keys=True),
                )
            ]
        )
