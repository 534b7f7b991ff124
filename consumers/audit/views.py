"""What the audit endpoint shows, per scope.

- ``operator``: the capture, the read-time verification, where it is stored and how it is kept, and
  any quarantine rows (what ``blackbox show --json`` prints).
- ``regulator``: the capture, the verification, and how it is kept (retention class, expiry, legal
  hold, consequential) — not where the bytes live.
- ``counterparty``: the capture and the verification only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from consumers.privacy.manifest import gate_manifest
from consumers.storage.store import current_row
from schemas.errors import CaptureNotFound

if TYPE_CHECKING:
    from consumers.index import Index
    from consumers.privacy.ids import IndexIds
    from consumers.storage.reader import StoredCapture

KEEPING = ("retention_class", "retention_days", "expires_at", "legal_hold", "consequential", "content_state")


STORAGE_PARTS = frozenset({"segment", "claim"})


def verification_view(verification: dict[str, Any], scope: str) -> dict[str, Any]:
    """The verdict as ``scope`` sees it: where the bytes live (segment keys, offsets, the storage
    error's own words) is the operator's; others learn that the stored copy failed, and which check."""
    if scope == "operator" or verification.get("part") not in STORAGE_PARTS:
        return verification
    return {**verification, "reason": "the stored copy of the capture is missing or damaged"}


def capture_view(shown: StoredCapture, verification: dict[str, Any], scope: str) -> dict[str, Any]:
    view = shown.to_json(verification=verification_view(verification, scope))
    if scope == "operator":
        return view
    trimmed = {k: view[k] for k in ("decisionId", "contentState", "note", "kind", "verification", "capture")}
    if scope == "regulator":
        trimmed["retention"] = {k: v for k, v in (view.get("stored") or {}).items() if k in KEEPING}
    return trimmed


def subject(index: Index, decision_id: str, *, ids: IndexIds | None = None) -> dict[str, Any]:
    """What the gate judges a decision by without reading content: its signed manifest (or ids);
    ``ids`` unseals the origin ids of the index's copy (:mod:`consumers.privacy.manifest`)."""
    row = current_row(index, decision_id)
    if row is None:
        raise CaptureNotFound(f"no decision {decision_id} in the index")
    if row.get("manifest_json"):
        manifest = gate_manifest(row["manifest_json"], ids)
        if manifest:
            return manifest
    return {"decisionId": decision_id, "agentId": row.get("agent_id", "")}
