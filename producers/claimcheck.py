"""Claim check: a capture too large for the broker travels as a reference to a blob.

The producer puts the encoded capture (the exact Avro single-object bytes that would have been
the message value) in the blob store under a deterministic key, and only then sends a
``claim_check`` event naming the key, the sha256 and the size. A consumer fetches the blob with
:func:`resolve_claim_check`, which refuses bytes whose size or hash disagree. Nothing is
truncated or dropped: if the blob cannot be written, the capture fails loudly.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from producers.blobstore import BlobStore
from schemas.errors import BlobNotFound, ContentHashMismatch

__all__ = ["ClaimChecker", "claim_key", "resolve_claim_check"]

logger = logging.getLogger(__name__)


def claim_key(*, agent_id: str, decision_id: str, sha256_hex: str) -> str:
    """``claims/<agentId>/<decisionId>/<sha256 hex>.avro``: a redelivery rewrites the same blob."""
    return f"claims/{_segment(agent_id)}/{_segment(decision_id)}/{sha256_hex}.avro"


def _segment(value: str) -> str:
    # Ids are opaque strings; keep keys valid on every blob store.
    safe = "".join(c if c.isalnum() or c in "-_.:" else "_" for c in value)
    return safe if safe not in ("", ".", "..") else "_"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimChecker:
    """Swaps an oversized encoded capture for a claim-check event after storing it as a blob."""

    store: BlobStore
    max_message_bytes: int

    def needed(self, encoded: bytes) -> bool:
        return len(encoded) > self.max_message_bytes

    def check_in(self, encoded: bytes, *, capture: dict[str, Any]) -> dict[str, Any]:
        """Store ``encoded`` (the capture's Avro bytes) and return the claim-check event value.

        Raises :class:`BlobStoreError` if the blob cannot be written; the caller reports it.
        """
        digest = hashlib.sha256(encoded).hexdigest()
        agent_id, decision_id = capture["agentId"], capture["decisionId"]
        key = claim_key(agent_id=agent_id, decision_id=decision_id, sha256_hex=digest)
        self.store.put(key, encoded)
        return {
            "decisionId": decision_id,
            "agentId": agent_id,
            "blobKey": key,
            "sha256": f"sha256:{digest}",
            "size": len(encoded),
            "captureLevel": capture.get("captureLevel") or "full",
            "consequential": bool((capture.get("consequential") or {}).get("flagged")),
        }


def resolve_claim_check(store: BlobStore, claim: dict[str, Any]) -> bytes:
    """The encoded capture a claim-check event refers to, after checking its size and sha256.

    Raises :class:`BlobNotFound` when the blob is gone and :class:`ContentHashMismatch` (part
    ``blobKey``) when the bytes are not the ones the producer announced. On a versioned store (S3
    Object Lock) the version the producer wrote is still read when a delete marker or other bytes lie
    over it - it is the one whose bytes hash to what the claim check announced - and what lies over it
    is logged as tampering with the blob, by name.
    """
    key = claim["blobKey"]
    try:
        return _checked(store.get(key), claim)
    except (BlobNotFound, ContentHashMismatch):
        if not store.versioned:
            raise
        sealed = _announced_version(store, claim)
        if sealed is None:
            raise
    version_id, data = sealed
    what = store.covering(key, version_id) or f"the current version is not {version_id}"
    logger.warning("TAMPERING with %s: %s; read the version whose bytes the claim check announced", key, what)
    return data


def _checked(data: bytes, claim: dict[str, Any]) -> bytes:
    if len(data) != claim["size"]:
        raise ContentHashMismatch(
            f"blob {claim['blobKey']} has {len(data)} bytes, the claim check says {claim['size']}",
            part="blobKey",
        )
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != claim["sha256"]:
        raise ContentHashMismatch(
            f"blob {claim['blobKey']} hashes to {actual}, the claim check says {claim['sha256']}",
            part="blobKey",
        )
    return data


def _announced_version(store: BlobStore, claim: dict[str, Any]) -> tuple[str, bytes] | None:
    """The newest stored version of the claim's blob whose bytes are the announced ones, or None."""
    key = claim["blobKey"]
    for version_id in store.versions(key):
        try:
            return version_id, _checked(store.get(key, version_id=version_id), claim)
        except (BlobNotFound, ContentHashMismatch):
            continue
    return None
