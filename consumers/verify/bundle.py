"""Exporting an evidence bundle (:mod:`producers.evidence.bundle` defines and verifies the format).

:func:`export_bundle` reads the stored capture through the access gate (action ``export``, logged),
refuses one that is not evidence (a segment that does not hold the recorded bytes, an expired or
quarantined decision, a key the trust store does not hold), and adds the signer's trust record and the
transparency log's inclusion proof. ``blackbox export`` and ``GET /v1/decisions/{id}/bundle`` both
call it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from producers.evidence.bundle import build_bundle
from producers.evidence.keys import key_id_from_ref
from schemas.errors import BlackboxError, CaptureNotFound, KeyNotTrusted

if TYPE_CHECKING:
    from consumers.access import AccessGate, Caller
    from consumers.index import Index
    from consumers.privacy.ids import IndexIds
    from producers.blobstore import BlobStore
    from producers.evidence import TrustStore

__all__ = ["Prover", "export_bundle", "transparency_section"]

# (decision id) -> {"logKey", "proof"} (the proof of :func:`producers.evidence.tlog.verify_inclusion`);
# raises a BlackboxError saying why there is none (not in the log, no checkpoint covers it yet)
Prover = Callable[[str], dict[str, Any]]


def export_bundle(
    decision_id: str,
    *,
    index: Index,
    store: BlobStore,
    trust: TrustStore,
    gate: AccessGate,
    caller: Caller,
    prover: Prover | None,
    now: datetime,
    ids: IndexIds | None = None,
) -> dict[str, Any]:
    """The evidence bundle of ``decision_id``, read as ``caller`` (logged)."""
    from consumers.storage.reader import load_capture

    shown = load_capture(
        decision_id, index=index, store=store, gate=gate, caller=caller, action="export", ids=ids
    )
    if shown.content_state in ("expired", "quarantined", "quarantine-expired") or not shown.capture:
        raise CaptureNotFound(
            f"{decision_id} is {shown.content_state}: there is no trusted capture to export"
        )
    key_id = key_id_from_ref((shown.capture.get("signature") or {}).get("publicKeyRef"))
    trusted = trust.get(key_id) if key_id else None
    if trusted is None:
        raise KeyNotTrusted(
            f"the trust store does not hold the signing key {key_id} of {decision_id}", part="key"
        )
    transparency: dict[str, Any] | None = None
    missing = "the transparency log is off (BLACKBOX_TLOG=false)"
    if prover is not None:
        try:
            transparency = prover(decision_id)
        except BlackboxError as exc:  # the bundle says why; every verifier reports it as incomplete
            missing = str(exc)
    bundle = build_bundle(shown.capture, trusted=trusted, transparency=transparency, exported_at=now)
    if transparency is None:
        bundle["transparencyNote"] = missing
    return bundle


def transparency_section(prove: Callable[[str], dict[str, Any]], log_key: str | None) -> Prover:
    """A :data:`Prover` over the log's ``prove``: the proof and the log's verifier key (a hint; the
    verifier pins its own). Raises :class:`~schemas.errors.BlackboxError` when there is no proof."""

    def section(decision_id: str) -> dict[str, Any]:
        return {"logKey": log_key, "proof": prove(decision_id)}

    return section
