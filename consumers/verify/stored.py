"""Verify a stored capture end to end, and the index row that points at it.

1. **segment**: one range GET; the segment must be there, the bytes must decompress (zstd checksum)
   and hash to the row's ``content_sha256`` - otherwise a
   :class:`~consumers.storage.reader.StoredCaptureMismatch` (``SegmentMissing``, ``SegmentTruncated``,
   ``FrameUnreadable``), part ``segment``. Missing or corrupt evidence is a verdict, not an error.
2. **capture**: :func:`producers.evidence.verify_capture` - signature, key, every content hash, the
   working-set root; the failing part is named (``executionTrace.finalOutputText``, ``signature``...).
   A compacted decision is verified from ``manifest_json`` (content absent, hashes kept).
3. **index row**: every column of ``decisions``, ``tool_calls`` and ``memory_entries`` that is derived
   from the capture is recomputed from the verified capture and compared. A row edited after ingest
   (a hash, a prompt version, an outcome) fails with :class:`IndexRowMismatch`, part
   ``index.<table>.<column>``. Columns that legitimately change after ingest (retention, legal
   hold, compaction state, consequential upgrades by flag events) are not compared, except that a
   row may only ever be *more* consequential than its capture.

:func:`verify_stored` raises the first failure; :func:`stored_verdict` (``blackbox verify``) and
:func:`judge_shown` (``blackbox show``, over the bytes it already read) turn the same checks into a
:class:`~consumers.verify.verdict.Verdict`, computed at read time against the trust store as it is now.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from consumers.index import decision_rows
from consumers.privacy.ids import HMAC_PREFIX, IndexIdKeyError, IndexIds
from consumers.privacy.manifest import signed_manifest
from consumers.storage.reader import CONTENT_NOTES, StoredCapture, read_stored
from consumers.storage.store import CHILD_TABLES, child_rows, current_row, quarantine_rows
from consumers.storage.versions import Tampering, tampering_lines
from producers.evidence import VerificationReport, verify_capture
from producers.privacy.identifiers import is_commitment
from schemas.codec import decode
from schemas.errors import CaptureNotFound, RetentionError, SignatureInvalid, VerificationError

from .verdict import Verdict

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore
    from producers.evidence import TrustStore

# Columns that change after ingest by design (retention, hold, compaction, flags) or describe storage.
_STATEFUL = frozenset(
    {
        "trust",
        "quarantine_reason",
        "consequential",
        "consequential_reason",
        "content_state",
        "retention_class",
        "retention_days",
        "expires_at",
        "legal_hold",
        "hold_reason",
        "segment_key",
        "segment_offset",
        "segment_length",
        "capture_bytes",
        "content_sha256",
        "manifest_json",
        "source",
        "ingested_at",
        "version",
        "working_set_bytes",  # NULL once content is compacted
    }
)
_CHILD_STATEFUL = frozenset({"content_bytes"})
_ORIGIN_IDS = frozenset({"origin_user_id", "origin_session_id"})


class IndexRowMismatch(VerificationError):
    """An index row disagrees with the verified capture it describes (edited after ingest)."""


class Unsigned(SignatureInvalid):
    """The capture carries no signature: nothing about it can be verified."""


class Quarantined(VerificationError):
    """The decision is only in quarantine: kept and shown, never evidence."""


class EvidenceExpired(RetentionError):
    """The retention policy deleted the capture, manifest and hashes: nothing is left to verify."""


@dataclass(frozen=True, slots=True)
class StoredVerification:
    decision_id: str
    key_id: str
    content_state: str
    checked_parts: int
    absent_parts: tuple[str, ...]
    segment_key: str
    tampering: tuple[str, ...] = ()


def verify_stored(
    decision_id: str,
    *,
    index: Index,
    store: BlobStore,
    trust: TrustStore,
    at: datetime | None = None,
    ids: IndexIds | None = None,
) -> StoredVerification:
    """Verify the stored capture of ``decision_id`` and its index rows; raises naming the failing part.

    Raises :class:`VerificationError` (a verdict: tampered, missing, untrusted), :class:`EvidenceExpired`,
    :class:`CaptureNotFound`, or an operational error (index or blob store unreachable). ``ids``
    checks the row's keyed-hash origin ids (:func:`check_rows`).
    """
    row = current_row(index, decision_id)
    if row is None:
        if quarantine_rows(index, decision_id):
            raise Quarantined(f"{decision_id} is quarantined, not indexed as evidence", part="quarantine")
        raise CaptureNotFound(f"no decision {decision_id} in the index")
    state = str(row.get("content_state") or "full")
    if state == "expired":
        raise EvidenceExpired(
            f"{decision_id} expired under the retention policy: nothing is left to verify "
            "(the deletion is in the deletions log)"
        )
    found: list[Tampering] = []
    if state == "metadata-only" or not row.get("segment_key"):
        capture = _manifest(row, ids)
        state = "metadata-only"
    else:
        capture = decode(read_stored(store, row, index=index, tampering=found)).value
    report = _check(index, row, capture, trust=trust, at=at, ids=ids)
    return StoredVerification(
        decision_id=decision_id,
        key_id=report.key_id,
        content_state=state,
        checked_parts=report.checked_parts,
        absent_parts=report.absent_parts,
        segment_key=str(row.get("segment_key") or ""),
        tampering=tuple(tampering_lines(found)),
    )


def stored_verdict(
    decision_id: str,
    *,
    index: Index,
    store: BlobStore,
    trust: TrustStore,
    at: datetime | None = None,
    ids: IndexIds | None = None,
) -> Verdict:
    """:func:`verify_stored` as a verdict; operational errors and an unknown decision still raise."""
    moment = _moment(at)
    try:
        result = verify_stored(decision_id, index=index, store=store, trust=trust, at=moment, ids=ids)
    except EvidenceExpired as exc:
        return Verdict(decision_id, "expired", moment, content_state="expired", reason=str(exc))
    except VerificationError as exc:
        return Verdict.failed(decision_id, exc, checked_at=moment)
    return Verdict(
        decision_id,
        "verified",
        moment,
        content_state=result.content_state,
        key_id=result.key_id,
        checked_parts=result.checked_parts,
        absent_parts=result.absent_parts,
        tampering=result.tampering,
    )


def judge_shown(
    shown: StoredCapture,
    *,
    index: Index,
    trust: TrustStore,
    at: datetime | None = None,
    ids: IndexIds | None = None,
) -> Verdict:
    """The verdict on what ``show`` loaded, over the very capture it prints (no second read).

    The same checks as :func:`verify_stored`; a quarantined capture is never verified, whatever its
    signature says, and the verdict names why it was quarantined.
    """
    moment = _moment(at)
    did, state = shown.decision_id, shown.content_state
    if state == "expired":
        return Verdict(did, "expired", moment, content_state=state, reason=CONTENT_NOTES["expired"])
    if shown.quarantined or state == "quarantine-expired":
        return _quarantined(shown, trust=trust, at=moment)
    try:
        capture = _manifest(shown.row, ids) if state == "metadata-only" else shown.capture
        report = _check(index, shown.row, capture, trust=trust, at=moment, ids=ids)
    except VerificationError as exc:
        return Verdict.failed(did, exc, checked_at=moment, content_state=state)
    return Verdict(
        did,
        "verified",
        moment,
        content_state=state,
        key_id=report.key_id,
        checked_parts=report.checked_parts,
        absent_parts=report.absent_parts,
        tampering=tuple(tampering_lines(shown.tampering)),
    )


def _check(
    index: Index,
    row: Mapping[str, Any],
    capture: Mapping[str, Any],
    *,
    trust: TrustStore,
    at: datetime | None,
    ids: IndexIds | None = None,
) -> VerificationReport:
    """The one verification of a stored capture: the evidence itself, then the index rows beside it."""
    _require_signature(capture)
    report = verify_capture(capture, trust, at=at)
    check_rows(index, row, capture, ids=ids)
    return report


def _quarantined(shown: StoredCapture, *, trust: TrustStore, at: datetime) -> Verdict:
    """Why a quarantined capture is not evidence: its own verification failure, else the quarantine
    reason (a conflicting duplicate can carry a good signature and still is not the indexed evidence)."""
    first = shown.quarantine[0] if shown.quarantine else {}
    reason = first.get("reason") or "no reason recorded"
    if not shown.capture:  # quarantine retention deleted the bytes; the rows say what happened
        gone = Quarantined(
            f"quarantined at ingest ({reason}); its bytes were deleted under the quarantine retention",
            part=str(first.get("part") or "quarantine"),
        )
        return Verdict.failed(shown.decision_id, gone, checked_at=at, content_state=shown.content_state)
    try:
        _require_signature(shown.capture)
        verify_capture(shown.capture, trust, at=at)
    except VerificationError as exc:
        failed = Verdict.failed(shown.decision_id, exc, checked_at=at, content_state=shown.content_state)
        return replace(failed, reason=f"quarantined at ingest; {failed.reason}")
    return Verdict.failed(
        shown.decision_id,
        Quarantined(
            f"quarantined at ingest ({reason}): the signature verifies, but this capture is not the "
            "indexed evidence",
            part=str(first.get("part") or "quarantine"),
        ),
        checked_at=at,
        content_state=shown.content_state,
    )


def _require_signature(capture: Mapping[str, Any]) -> None:
    signature = capture.get("signature")
    if not isinstance(signature, Mapping) or not signature.get("signatureBytes"):
        raise Unsigned(
            "unsigned: the capture carries no signature, so nothing in it is verified", part="signature"
        )


def _manifest(row: Mapping[str, Any], ids: IndexIds | None) -> dict[str, Any]:
    """The signed manifest a compacted row keeps (content gone, hashes kept), its origin ids unsealed
    (:mod:`consumers.privacy.manifest`; without the index id key that is an error, not a verdict)."""
    try:
        manifest: Any = signed_manifest(str(row.get("manifest_json") or ""), ids)
    except ValueError:
        manifest = None
    except IndexIdKeyError as exc:
        if ids is None or ids.key is None:
            raise
        raise IndexRowMismatch(str(exc), part="index.decisions.manifest_json") from exc
    if not isinstance(manifest, dict) or not manifest:
        raise IndexRowMismatch(
            "the decision is compacted and its row keeps no readable manifest",
            part="index.decisions.manifest_json",
        )
    return manifest


def _moment(at: datetime | None) -> datetime:
    return datetime.now(UTC) if at is None else at


def check_rows(
    index: Index, row: Mapping[str, Any], capture: Mapping[str, Any], *, ids: IndexIds | None = None
) -> None:
    """Compare the decision row and its child rows with what the capture says (module docstring).

    Origin ids the index holds as keyed hashes (:mod:`consumers.privacy.ids`) are compared under
    ``ids``' key; without the key they cannot be checked and are skipped, and so are ids the capture
    signs only as commitments (:mod:`producers.privacy.identifiers`).
    """
    hashed = any(str(row.get(c) or "").startswith(HMAC_PREFIX) for c in _ORIGIN_IDS)
    hash_id = ids.of if hashed and ids is not None and ids.key is not None else None
    expected = decision_rows(capture, key_id=row.get("key_id"), hash_id=hash_id)
    unchecked = _ORIGIN_IDS if hashed and hash_id is None else frozenset()
    # a committed id: the row holds the keyed hash of a raw id only the vault opens (erasure ends that)
    unchecked |= {c for c in _ORIGIN_IDS if is_commitment(expected.decision.get(c))}
    _compare("decisions", row, expected.decision, skip=_STATEFUL | unchecked)
    if bool(capture.get("consequential", {}).get("flagged")) and not row.get("consequential"):
        raise IndexRowMismatch(
            "the capture is flagged consequential, the index row is not", part="index.decisions.consequential"
        )
    if not row.get("manifest_json") or json.loads(row["manifest_json"]).get("signature") != capture.get(
        "signature"
    ):
        raise IndexRowMismatch(
            "manifest_json does not carry the capture's signature", part="index.decisions.manifest_json"
        )
    did = str(row["decision_id"])
    for table, wanted in (("tool_calls", expected.tool_calls), ("memory_entries", expected.memory_entries)):
        keys = CHILD_TABLES[table]
        found = child_rows(index, table, did)
        if len(found) != len(wanted):
            raise IndexRowMismatch(
                f"{len(found)} rows in the index, the capture has {len(wanted)}", part=f"index.{table}"
            )
        for got, want in zip(found, sorted(wanted, key=lambda r: tuple(r[k] for k in keys)), strict=True):
            _compare(table, got, want, skip=_CHILD_STATEFUL)


def _compare(table: str, got: Mapping[str, Any], want: Mapping[str, Any], *, skip: frozenset[str]) -> None:
    for column, value in want.items():
        if column in skip or column not in got:
            continue
        if not _same(got[column], value):
            raise IndexRowMismatch(
                f"{table}.{column} is {got[column]!r} in the index, the verified capture says {value!r}",
                part=f"index.{table}.{column}",
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):
        return abs((a - b).total_seconds()) < 0.001  # DateTime64(3): milliseconds are stored
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    if isinstance(a, float | int) and isinstance(b, float | int):
        return float(a) == float(b)
    if (
        isinstance(a, Sequence)
        and not isinstance(a, str)
        and isinstance(b, Sequence)
        and not isinstance(b, str)
    ):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
