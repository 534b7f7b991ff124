"""Pact versions: a pact set stored as signed, content-addressed evidence in the shared blob store
(DESIGN decision 26).

A version is the pact file's text plus who proposed it, why, when and on top of which version::

    pacts/versions/<version>.json   DSSE envelope (PAYLOAD_TYPE) over the RFC 8785 record, signed by
                                    an operator key from the trust store
    pacts/applied.json              the applied version: every ingest host reads this one pointer
    pacts/applied-log/<at>-<v>.json one object per apply (who, why, forced, the gate's verdict)

The document, its id and its verification are :mod:`producers.pacts.signed` (an agent's runtime reads
the same document); two versions with the same rules share a content hash. Reading a version verifies
the signature against the trust store and recomputes both hashes: a tampered object is refused by name.

The blob store has no compare-and-swap on this branch, so the pointer is a plain put: two operators
applying at the same moment both succeed and the later put wins; the applied-log keeps both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from producers.blobstore import BlobNotFound, BlobStore
from producers.evidence import TrustStore
from producers.evidence.keys import Signer
from producers.evidence.trust import format_time, parse_time
from producers.pacts.signed import (
    PAYLOAD_TYPE,
    PactVersion,
    PactVersionError,
    open_version,
    sign_version,
    version_id,
)

__all__ = [
    "APPLIED_KEY",
    "PAYLOAD_TYPE",
    "AppliedPointer",
    "PactVersion",
    "PactVersionError",
    "applied_pointer",
    "list_versions",
    "load_version",
    "parse_pointer",
    "propose_version",
    "signed_envelope",
    "verify_record",
    "version_id",
    "version_key",
    "write_applied",
]

VERSIONS_PREFIX = "pacts/versions/"
APPLIED_KEY = "pacts/applied.json"
APPLIED_LOG_PREFIX = "pacts/applied-log/"


@dataclass(frozen=True, slots=True)
class AppliedPointer:
    """The applied version as the shared pointer says: who applied it, when, why, forced or gated."""

    version: str
    applied_at: datetime
    applied_by: str
    reason: str
    forced: bool
    gate: str

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "appliedAt": format_time(self.applied_at),
            "appliedBy": self.applied_by,
            "reason": self.reason,
            "forced": self.forced,
            "gate": self.gate,
        }


def version_key(version: str) -> str:
    if not version.startswith("pv_") or not version[3:].isalnum():
        raise PactVersionError(f"{version!r} is not a pact version id (pv_ and 24 hex digits)")
    return f"{VERSIONS_PREFIX}{version}.json"


def propose_version(
    store: BlobStore,
    *,
    document: str,
    author: str,
    reason: str,
    signer: Signer,
    now: datetime,
    parent: str | None = None,
    source: str = "<pact>",
) -> PactVersion:
    """Check the document (every rule compiles), sign it and store it as a new version. The parent is
    the applied version unless ``parent`` is given; nothing is applied."""
    if not reason.strip():
        raise PactVersionError("a pact version needs a reason (--reason)")
    if not author.strip():
        raise PactVersionError("a pact version needs an author")
    if parent is None:
        pointer = applied_pointer(store)
        parent = pointer.version if pointer else ""
    elif parent:
        version_key(parent)
    version, envelope = sign_version(
        document=document,
        parent=parent,
        author=author.strip(),
        reason=reason.strip(),
        created_at=now,
        signer=signer,
        source=source,
    )
    store.put(version_key(version.version), envelope)
    return version


def signed_envelope(store: BlobStore, version: str) -> dict[str, Any]:
    """The stored DSSE envelope of ``version``, as stored (not verified: :func:`load_version` does)."""
    try:
        raw = store.get(version_key(version))
    except BlobNotFound:
        raise PactVersionError(f"no pact version {version} (see `blackbox pact history`)") from None
    try:
        envelope = json.loads(raw)
    except ValueError as exc:
        raise PactVersionError(f"pact version {version}: not a signed envelope: {exc}") from exc
    if not isinstance(envelope, dict):
        raise PactVersionError(f"pact version {version}: not a signed envelope")
    return envelope


def load_version(store: BlobStore, version: str, trust: TrustStore) -> PactVersion:
    """The stored version, its signature verified and its hashes recomputed (:class:`PactVersionError`)."""
    return verify_record(signed_envelope(store, version), version, trust)


def verify_record(envelope: Mapping[str, Any], version: str, trust: TrustStore) -> PactVersion:
    """The version inside ``envelope``, verified against ``trust`` (:class:`PactVersionError` naming what
    failed). A stored version and one a pact bundle carries are checked alike."""
    raw = json.dumps(dict(envelope)).encode("utf-8")
    return open_version(raw, trust, where=f"pact version {version}", expect=version)


def list_versions(store: BlobStore, trust: TrustStore) -> list[PactVersion]:
    """Every stored version, verified, oldest first (a version that fails verification raises)."""
    versions = [
        load_version(store, key.removeprefix(VERSIONS_PREFIX).removesuffix(".json"), trust)
        for key in store.list(VERSIONS_PREFIX)
        if key.endswith(".json")
    ]
    return sorted(versions, key=lambda v: (v.created_at, v.version))


def applied_pointer(store: BlobStore) -> AppliedPointer | None:
    """The applied version's pointer, or None when no version was ever applied."""
    try:
        raw = store.get(APPLIED_KEY)
    except BlobNotFound:
        return None
    return parse_pointer(raw)


def parse_pointer(raw: bytes) -> AppliedPointer:
    """The pointer object's JSON (:class:`PactVersionError` when malformed)."""
    try:
        value = json.loads(raw)
        return AppliedPointer(
            version=str(value["version"]),
            applied_at=parse_time(value["appliedAt"]),
            applied_by=str(value.get("appliedBy", "")),
            reason=str(value.get("reason", "")),
            forced=bool(value.get("forced", False)),
            gate=str(value.get("gate", "")),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise PactVersionError(f"{APPLIED_KEY} is malformed: {exc}") from exc


def applied_history(store: BlobStore) -> list[AppliedPointer]:
    """Every apply, oldest first (the applied-log)."""
    return [parse_pointer(store.get(key)) for key in sorted(store.list(APPLIED_LOG_PREFIX))]


def write_applied(store: BlobStore, pointer: AppliedPointer) -> None:
    """Log the apply, then move the shared pointer (a plain put: no compare-and-swap on this store)."""
    body = json.dumps(pointer.to_json(), sort_keys=True).encode("utf-8")
    stamp = pointer.applied_at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    store.put(f"{APPLIED_LOG_PREFIX}{stamp}-{pointer.version}.json", body)
    store.put(APPLIED_KEY, body)
