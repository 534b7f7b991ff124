"""The retention log: every deletion (what, why, when) in two places.

Each entry goes to a JSON-lines file under the data directory (``<data_dir>/retention/deletions.jsonl``,
appended and fsync'd) and to the index's ``deletions`` table. The file is written first: if the index
insert then fails, the run stops before deleting anything and the rerun writes the entry again, so the
file may hold an entry twice (same ``entry_id``) but never misses one.

Actions:

- ``compact``: a decision's content is gone, its manifest, hashes and row kept (metadata-only);
- ``expire``: a decision's record retention ended; its row is an ``expired`` tombstone;
- ``promote`` / ``hold-copy`` / ``move``: a decision's frame was copied to ``target`` before its segment
  goes (not a deletion, logged because the bytes' location changed);
- ``delete-segment``: a segment is about to be deleted (written *before* the delete: the write-ahead
  record a crashed run is resumed from); ``segment-deleted``: the delete is done;
- ``delete-claim`` / ``claim-deleted``: the same for the claim-check blob of an oversized capture
  (``segment_key`` holds the blob key).
- ``quarantine-expire``: a quarantine row's bytes are deleted after ``quarantine_days`` (the row stays);
  its segment goes by ``delete-segment`` / ``segment-deleted``.
- ``orphan-segment`` / ``orphan-claim``: a blob no index row refers to, older than its grace, is about to
  be deleted; ``orphan-deleted``: the delete is done (see :mod:`consumers.retention.sweep`).
- ``delete-spool`` / ``spool-deleted``: a consumed spool file an older release kept is about to be /
  was deleted (``segment_key`` is ``spool:consumed/<name>``; :mod:`consumers.retention.spool_sweep`).
- ``hold`` / ``release``: legal hold set or released (see :mod:`consumers.retention.hold`).
- ``erase`` / ``erased``: a decision's data key is about to be destroyed (written before) / was destroyed:
  the original of its redacted personal data is unreadable, the capture stays (``segment_key`` holds
  the key record's blob key; see :mod:`consumers.retention.erasure`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumers.observability.metrics import count_deletions
from consumers.retention.clock import as_utc
from consumers.retention.store import DELETIONS_TABLE, insert_deletions
from schemas.errors import RetentionError

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["DELETIONS_TABLE", "DeletionEntry", "DeletionLog", "read_jsonl"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionEntry:
    """One line of the retention log. ``at``: when it happened; ``as_of``: the time the policy was
    evaluated at (``--as-of``); ``policy``: the policy fingerprint; ``target``: where a copy went."""

    at: datetime
    as_of: datetime
    decision_id: str
    segment_key: str
    action: str
    reason: str
    policy: str
    agent_id: str = ""
    target: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.segment_key, self.decision_id, self.action)

    @property
    def entry_id(self) -> str:
        """Stable id of (segment, decision, action): a rerun writes the same id."""
        return hashlib.sha256("\x1f".join(self.key).encode()).hexdigest()[:24]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": _iso(self.at),
            "as_of": _iso(self.as_of),
            "decision_id": self.decision_id,
            "segment_key": self.segment_key,
            "action": self.action,
            "reason": self.reason,
            "policy": self.policy,
            "agent_id": self.agent_id,
            "target": self.target,
            "entry_id": self.entry_id,
        }


def _iso(moment: datetime) -> str:
    return as_utc(moment).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class DeletionLog:
    """Appends :class:`DeletionEntry` records to the JSONL file, then the ``deletions`` table."""

    def __init__(self, index: Index, path: Path) -> None:
        self.index = index
        self.path = Path(path)

    def record(self, entries: Sequence[DeletionEntry]) -> None:
        """Durably record ``entries`` (file, then table); raises :class:`RetentionError` on failure."""
        if not entries:
            return
        lines = "".join(json.dumps(e.to_json(), ensure_ascii=False, sort_keys=True) + "\n" for e in entries)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(lines)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise RetentionError(f"cannot write the retention log {self.path}: {exc}") from exc
        insert_deletions(self.index, entries)
        count_deletions(e.action for e in entries)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All entries of a retention log file (tests, audits)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
