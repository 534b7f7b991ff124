"""The stored-capture reader: decision id → index row → one range GET → zstd → decode → JSON form.

Three kinds of answer, always saying which one it is (``content_state``):

- ``full`` / ``structured-only``: the capture as ingested, read from its segment. The bytes are checked
  against the row's ``content_sha256`` before they are decoded, so a segment that was overwritten or
  tampered with is refused (:class:`StoredCaptureMismatch`, part ``segment``) instead of shown; a
  segment that is gone (:class:`SegmentMissing`), shorter than the row says (:class:`SegmentTruncated`)
  or whose frame does not decompress (:class:`FrameUnreadable`) is refused the same way. Those are
  verdicts on the evidence (``VerificationError``), not operational errors: an unreachable blob store
  still raises ``BlobStoreError``.
- ``metadata-only``: compacted. Content is gone; the manifest and every hash are kept in the index
  row (``manifest_json``), so the decision is still verifiable. Content fields are absent (``null``).
- ``quarantined``: the decision id is only in ``quarantine`` (failed verification, or a conflicting
  duplicate). The bytes are shown from the quarantine segment, flagged, with the reasons; once the
  retention policy's ``quarantine_days`` have deleted them, ``quarantine-expired`` with the rows only.

A decision that is indexed *and* also has quarantined copies (conflicting duplicates) is shown from
``decisions`` with the quarantine rows listed beside it.

Reads of content pass the access gate (DESIGN decision 12) when one is given: the gate sees the
capture's metadata from the index row before any content is fetched, and logs the read.

Loading is not verifying: whether what was loaded is evidence is decided at read time by
:func:`consumers.verify.stored.judge_shown` and passed to :meth:`StoredCapture.to_json` as its
``verification`` (the row's ``trust`` column is what ingest decided then, shown as ``stored.trust``,
never as the verdict). :func:`read_stored` is the one checked read that ``show``, ``verify`` and
replay's indexed source share.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumers.privacy.manifest import gate_manifest
from schemas.codec import decode
from schemas.errors import BlobNotFound, BlobStoreError, CaptureNotFound, DecodeError, VerificationError

from .segments import SegmentCorrupt, read_capture
from .store import current_row_and_quarantine
from .versions import Tampering, covered, tampering_lines

if TYPE_CHECKING:
    from consumers.access import AccessGate, Caller
    from consumers.index import Index
    from consumers.privacy.ids import IndexIds
    from producers.blobstore import BlobStore

__all__ = [
    "CONTENT_NOTES",
    "FrameUnreadable",
    "SegmentMissing",
    "SegmentTruncated",
    "StoredCapture",
    "StoredCaptureMismatch",
    "load_capture",
    "read_stored",
]

# Index columns shown beside the capture (where it lives, how it is kept).
ROW_FIELDS = (
    "trust",
    "content_state",
    "fidelity",
    "retention_class",
    "retention_days",
    "expires_at",
    "legal_hold",
    "consequential",
    "consequential_reason",
    "failed",
    "segment_key",
    "segment_offset",
    "segment_length",
    "capture_bytes",
    "content_sha256",
    "key_id",
    "source",
    "ingested_at",
    "version",
)
CONTENT_NOTES = {
    "full": "content present",
    "structured-only": "structured-only capture: rendered content was never captured; hashes kept",
    "metadata-only": "content compacted: manifest and hashes kept, still verifiable; content fields are null",
    "expired": "EXPIRED under the retention policy: content, manifest and hashes deleted; see the deletions log",
    "quarantined": "QUARANTINED: failed verification or conflicts with an indexed decision; not trusted",
    "quarantine-expired": "QUARANTINED, and its bytes deleted after quarantine_days; the quarantine rows remain",
}


class StoredCaptureMismatch(VerificationError):
    """The bytes at a capture's segment range are not the bytes the index row recorded."""


class SegmentMissing(StoredCaptureMismatch):
    """The segment the index row points at is not in the blob store (evidence missing)."""


class SegmentTruncated(StoredCaptureMismatch):
    """The segment exists but ends before the range the index row points at."""


class FrameUnreadable(SegmentCorrupt, StoredCaptureMismatch):
    """The frame at a row's range does not decompress: a storage fault (still a :class:`SegmentCorrupt`
    for storage code) that, read as evidence, is a verdict naming part ``segment``."""

    def __init__(self, corrupt: SegmentCorrupt) -> None:
        message = f"the frame at offset {corrupt.offset} does not decompress: {corrupt.reason}"
        SegmentCorrupt.__init__(self, message, key=corrupt.key, offset=corrupt.offset, length=corrupt.length)
        self.part = "segment"


@dataclass(frozen=True, slots=True)
class StoredCapture:
    """One capture as stored, with the index rows that say where it lives and how it is kept."""

    decision_id: str
    content_state: str
    capture: dict[str, Any]
    row: dict[str, Any] = field(default_factory=dict)
    quarantine: tuple[dict[str, Any], ...] = ()
    kind: str = "capture"
    tampering: tuple[Tampering, ...] = ()  # what lies over the sealed segment version (versioned store)

    @property
    def quarantined(self) -> bool:
        return self.content_state == "quarantined"

    def to_json(self, *, verification: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A JSON-ready view: the capture in the contract's JSON form, the read-time ``verification``
        (a verdict's JSON; null when nobody verified it) and a ``stored`` block (the index row; its
        ``trust`` is ingest's)."""
        return {
            "decisionId": self.decision_id,
            "contentState": self.content_state,
            "note": CONTENT_NOTES.get(self.content_state, ""),
            "kind": self.kind,
            "verification": None if verification is None else dict(verification),
            "stored": {k: _jsonable(self.row[k]) for k in ROW_FIELDS if k in self.row},
            "quarantine": [{k: _jsonable(v) for k, v in q.items()} for q in self.quarantine],
            "tampering": tampering_lines(self.tampering),
            "capture": self.capture,
        }


def load_capture(
    decision_id: str,
    *,
    index: Index,
    store: BlobStore,
    gate: AccessGate | None = None,
    caller: Caller | None = None,
    action: str = "show",
    ids: IndexIds | None = None,
) -> StoredCapture:
    """The stored capture of ``decision_id`` (see the module docstring); raises CaptureNotFound.
    ``ids`` unseals the origin ids of the index's manifest (for the gate, and a compacted decision)."""
    row, quarantine = current_row_and_quarantine(index, decision_id)
    if row is None:
        if not quarantine:
            raise CaptureNotFound(f"no decision {decision_id} in the index (nor in quarantine)")
        stored = [q for q in quarantine if q.get("segment_key")]
        if not stored:  # quarantine_days ended: the bytes are gone, the rows still say what happened
            if gate is not None and caller is not None:
                subject = {"decisionId": decision_id, "agentId": quarantine[0]["agent_id"]}
                gate.authorize(caller, subject, action=action)
            return StoredCapture(decision_id, "quarantine-expired", {}, {}, tuple(quarantine), "none")
        first = stored[0]
        found: list[Tampering] = []
        data = read_stored(store, first, index=index, tampering=found)
        decoded = _decode(data, first)
        if gate is not None and caller is not None:
            gate.authorize(caller, decoded.value, action=action)
        return StoredCapture(
            decision_id, "quarantined", decoded.value, {}, tuple(quarantine), decoded.kind, tuple(found)
        )

    # the signed manifest (the index holds a view with origin ids as keyed hashes: consumers.privacy.manifest)
    metadata = gate_manifest(str(row.get("manifest_json") or ""), ids)
    if gate is not None and caller is not None:
        gate.authorize(
            caller, metadata or {"decisionId": decision_id, "agentId": row["agent_id"]}, action=action
        )
    state = str(row.get("content_state") or "full")
    if state == "expired":
        return StoredCapture(decision_id, "expired", metadata, row, tuple(quarantine))
    if state == "metadata-only" or not row.get("segment_key"):
        return StoredCapture(decision_id, "metadata-only", metadata, row, tuple(quarantine))
    found = []
    data = read_stored(store, row, index=index, tampering=found)
    return StoredCapture(
        decision_id, state, _decode(data, row).value, row, tuple(quarantine), tampering=tuple(found)
    )


def read_stored(
    store: BlobStore,
    row: Mapping[str, Any],
    *,
    index: Index | None = None,
    tampering: list[Tampering] | None = None,
) -> bytes:
    """The capture bytes a ``decisions`` or ``quarantine`` row points at, checked against its hash.

    With ``index``, on a versioned store, the segment's sealed version is read, and whatever lies over
    it is logged and appended to ``tampering`` (:mod:`.versions`)."""
    key, offset, length = str(row["segment_key"]), int(row["segment_offset"]), int(row["segment_length"])
    version, _ = covered(store, index, key, found=tampering)
    try:
        data = read_capture(store, key, offset, length, version_id=version)
    except BlobNotFound as exc:
        raise SegmentMissing(
            f"segment {key} is missing from the blob store (the index row points at [{offset}, +{length}))",
            part="segment",
        ) from exc
    except SegmentCorrupt as exc:
        raise FrameUnreadable(exc) from exc
    except BlobStoreError as exc:
        # A range the store refuses is a segment shorter than the row says, if the store itself answers.
        if not _answers(store, key):
            raise
        raise SegmentTruncated(
            f"segment {key} ends before the range the index row points at [{offset}, +{length}) ({exc})",
            part="segment",
        ) from exc
    expected = row.get("content_sha256")
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if expected and actual != expected:
        raise StoredCaptureMismatch(
            f"{row['segment_key']} [{row['segment_offset']}, +{row['segment_length']}) holds bytes hashing to "
            f"{actual}, the index row says {expected}",
            part="segment",
        )
    return data


def _answers(store: BlobStore, key: str) -> bool:
    """Whether the store serves the first byte of ``key`` (it is up and the object is there)."""
    try:
        store.get(key, offset=0, length=1)
    except BlobStoreError:
        return False
    return True


def _decode(data: bytes, row: Mapping[str, Any]) -> Any:
    try:
        return decode(data)
    except DecodeError as exc:
        raise StoredCaptureMismatch(
            f"{row['segment_key']} at {row['segment_offset']} is not a blackbox message: {exc}",
            part="segment",
        ) from exc


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value
