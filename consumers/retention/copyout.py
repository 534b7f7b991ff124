"""Copying frames out of a segment that is about to go, byte for byte, and the row changes of each step.

A decision whose content must outlive its segment (promoted, under legal hold, or still inside its
window when the segment is rewritten) keeps its exact frame: the compressed bytes are copied, never
re-encoded, after checking that they are one intact zstd frame whose content hashes to the row's
``content_sha256``. Frames going to the same class share one new segment under a deterministic key
(``segments/<class>/retention/<source segment>/0...0-<digest of the bytes>.seg``), so a rerun after a
crash writes the same object again instead of a second copy.
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING, Any

from consumers.retention.plan import SegmentPlan, Step
from consumers.storage.segments import decompress_frame, partition_label, segment_key
from consumers.storage.versions import covered, record_versions
from schemas.errors import RetentionError

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

__all__ = [
    "COPY_TOPIC",
    "CopyVerificationFailed",
    "compact_change",
    "copy_change",
    "copy_frames",
    "expire_change",
]

COPY_TOPIC = "retention"
_WHOLE_SEGMENT_COPIES = 4  # more copies than this from one segment: one GET of the whole segment
Placement = tuple[str, int, int]


class CopyVerificationFailed(RetentionError):
    """A frame to be copied out is not intact (bad frame, or its bytes do not match ``content_sha256``);
    its segment is left alone and reported."""


def copy_frames(
    store: BlobStore, seg: SegmentPlan, *, index: Index | None = None
) -> tuple[dict[str, Placement], list[str]]:
    """Copy the frames of ``seg.copies`` into one new segment per target class.

    Returns where each decision landed (key, offset, length) and the new segment keys. Raises
    :class:`~schemas.errors.BlobNotFound` if the source is gone, :class:`CopyVerificationFailed` or
    :class:`~consumers.storage.segments.SegmentCorrupt` if a frame is not intact; nothing is written then.
    With ``index``, on a versioned store, the source's sealed version is read and the new segments'
    versions are recorded (:mod:`consumers.storage.versions`).
    """
    copies = seg.copies
    if not copies:
        return {}, []
    version, _ = covered(store, index, seg.segment_key)
    read = functools.partial(store.get, version_id=version) if version is not None else store.get
    whole = read(seg.segment_key) if len(copies) > _WHOLE_SEGMENT_COPIES else None
    groups: dict[str, list[tuple[Step, bytes]]] = {}
    for s in copies:
        c = s.candidate
        if whole is not None:
            frame = whole[c.segment_offset : c.segment_offset + c.segment_length]
        else:
            frame = read(seg.segment_key, offset=c.segment_offset, length=c.segment_length)
        _check_frame(frame, s, seg.segment_key)
        groups.setdefault(s.target_class, []).append((s, frame))
    placed: dict[str, Placement] = {}
    keys: list[str] = []
    label = partition_label(seg.segment_key.rsplit("/", 1)[-1].removesuffix(".seg"))
    for cls, frames in sorted(groups.items()):
        body = b"".join(frame for _, frame in frames)
        key = segment_key(
            retention_class=cls,
            topic=COPY_TOPIC,
            partition=label,
            first_offset=0,
            digest=hashlib.blake2b(body, digest_size=8).hexdigest(),
        )
        # a consequential copy keeps the lock its decisions had (S3 Object Lock, where the store has it on)
        until = max(s.decision.expires_at for s, _ in frames) if cls == "consequential" else None
        written = store.put(key, body, retain_until=until)
        if index is not None:
            record_versions(index, [(key, written)])
        keys.append(key)
        offset = 0
        for s, frame in frames:
            placed[s.decision_id] = (key, offset, len(frame))
            offset += len(frame)
    return placed, keys


def _check_frame(frame: bytes, step: Step, key: str) -> None:
    c = step.candidate
    if len(frame) != c.segment_length:
        raise CopyVerificationFailed(
            f"{c.decision_id}: range [{c.segment_offset}, +{c.segment_length}) returned {len(frame)} bytes"
        )
    data = decompress_frame(frame, key=key, offset=c.segment_offset)
    if c.content_sha256:
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != c.content_sha256:
            raise CopyVerificationFailed(
                f"{c.decision_id}: frame bytes hash to {actual}, the index says {c.content_sha256}"
            )


# --- row changes (columns of the new ``decisions`` version) ---------------------------------------------
def copy_change(s: Step, where: Placement) -> dict[str, Any]:
    """A copied decision: new location; a promotion also makes the row consequential."""
    c, d = s.candidate, s.decision
    consequential = (
        c.consequential_column or c.consequential or (s.promoted and s.target_class == "consequential")
    )
    reason = c.consequential_reason
    if consequential and not reason:
        reason = c.flag_reason or ("quarantined" if c.trust == "quarantined" else "")
    return {
        "segment_key": where[0],
        "segment_offset": where[1],
        "segment_length": where[2],
        "retention_class": s.target_class,
        "consequential": consequential,
        "consequential_reason": reason,
        "retention_days": d.retention_days,
        "expires_at": d.expires_at,
    }


def compact_change(s: Step) -> dict[str, Any]:
    """Metadata-only: location cleared; ``manifest_json`` (signature included) and every hash kept."""
    d = s.decision
    return {
        "content_state": "metadata-only",
        "segment_key": "",
        "segment_offset": 0,
        "segment_length": 0,
        "retention_class": d.retention_class,
        "retention_days": d.retention_days,
        "expires_at": d.expires_at,
    }


def expire_change(s: Step) -> dict[str, Any]:
    """Expired: a tombstone row (the TTL backstop removes it); the manifest goes too."""
    d = s.decision
    return {
        "content_state": "expired",
        "segment_key": "",
        "segment_offset": 0,
        "segment_length": 0,
        "manifest_json": "",
        "retention_class": d.retention_class,
        "retention_days": d.retention_days,
        "expires_at": d.expires_at,
    }
