"""Pact bundles: one applied pact version as a JSON file an outsider verifies offline, like a capture's
evidence bundle (:mod:`producers.evidence.bundle`).

``blackbox pact bundle VERSION -o FILE`` writes::

    {
      "bundleFormat": "blackbox.pact-bundle/v1",
      "version": "pv_...",
      "exportedAt": "...",
      "envelope": { DSSE envelope of the version, as stored, signed by the operator's pact key },
      "applied": { the apply record: version, appliedAt, appliedBy, reason, forced, gate },
      "transparency": {"logKey": "<the log's verifier key, a hint>",
                       "proof": {"leafIndex", "treeSize", "hashes", "checkpoint", "leaf"}}
    }

:func:`verify_pact_bundle` checks, each failure naming its part: ``bundle`` (format, sections);
``envelope`` (a signature by a key the verifier trusts - a trust-store TOML or one public key - over
the record, whose hashes give its version id and content hash); ``applied`` (the apply record is for
this version); ``transparency`` (the pact leaf recomputed from the envelope and the apply record,
:mod:`consumers.tlog.entries`, is at ``leafIndex`` under the checkpoint signed by the pinned log key).
Without a pinned ``--log-key`` or without a proof the bundle is *incomplete*, never verified.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from consumers.pacts.versions import PactVersion, PactVersionError, verify_record
from consumers.tlog.entries import pact_leaf
from producers.evidence import TrustStore
from producers.evidence.dsse import open_envelope
from producers.evidence.keys import key_id, public_raw
from producers.evidence.tlog import envelope_hash, verify_inclusion
from producers.evidence.trust import TrustedKey, format_time
from schemas.errors import BlackboxError, ProofInvalid, VerificationError

__all__ = [
    "PACT_BUNDLE_FORMAT",
    "PactBundleInvalid",
    "PactBundleReport",
    "build_pact_bundle",
    "logged_leaf",
    "verify_pact_bundle",
]

PACT_BUNDLE_FORMAT = "blackbox.pact-bundle/v1"
_SECTIONS = ("version", "envelope", "applied", "transparency")


class PactBundleInvalid(VerificationError):
    """A pact bundle does not verify; ``part`` names what failed."""


@dataclass(frozen=True, slots=True)
class PactBundleReport:
    version: PactVersion
    applied: dict[str, Any]
    leaf_index: int | None
    tree_size: int | None
    origin: str | None
    incomplete: str | None  # why the log part is unproven (no proof, no pinned key), None when proven

    @property
    def complete(self) -> bool:
        return self.incomplete is None

    def lines(self) -> list[str]:
        v, a = self.version, self.applied
        out = [
            f"verified: pact version {v.version} signed by {v.key_id} ({len(v.book)} rule(s), agents "
            f"{','.join(v.book.agents)}); applied {a.get('appliedAt')} by {a.get('appliedBy')}"
            f"{' (FORCED)' if a.get('forced') else ''}: {a.get('reason')}"
        ]
        if self.incomplete is None:
            out.append(f"logged: leaf {self.leaf_index} of {self.tree_size} in {self.origin}")
        else:
            out.append(f"INCOMPLETE: {self.incomplete}")
        return out


def logged_leaf(envelope: Mapping[str, Any], applied: Mapping[str, Any]) -> bytes:
    """The log leaf of one apply: the version's envelope hash and the apply record (:mod:`consumers.tlog.entries`)."""
    payload, payload_type, _ = open_envelope(envelope)
    return pact_leaf(
        version=str(applied.get("version", "")),
        envelope_hash=envelope_hash(payload, payload_type),
        applied=applied,
    )


def build_pact_bundle(
    *,
    version: str,
    envelope: Mapping[str, Any],
    applied: Mapping[str, Any],
    transparency: Mapping[str, Any] | None,
    exported_at: datetime,
) -> dict[str, Any]:
    return {
        "bundleFormat": PACT_BUNDLE_FORMAT,
        "version": version,
        "exportedAt": format_time(exported_at),
        "envelope": dict(envelope),
        "applied": dict(applied),
        "transparency": dict(transparency) if transparency is not None else None,
    }


def verify_pact_bundle(
    bundle: Mapping[str, Any], trust: TrustStore | Ed25519PublicKey, *, log_key: str | None
) -> PactBundleReport:
    """Verify every part of a pact bundle (module docstring); :class:`PactBundleInvalid` names the first
    that fails."""
    if not isinstance(bundle, Mapping) or bundle.get("bundleFormat") != PACT_BUNDLE_FORMAT:
        raise PactBundleInvalid(f"not a {PACT_BUNDLE_FORMAT} bundle", part="bundle")
    missing = [s for s in _SECTIONS if s not in bundle]
    if missing:
        raise PactBundleInvalid(f"the bundle lacks {', '.join(missing)}", part="bundle")
    name, envelope, applied = bundle["version"], bundle["envelope"], bundle["applied"]
    if not isinstance(name, str) or not isinstance(envelope, Mapping) or not isinstance(applied, Mapping):
        raise PactBundleInvalid("version is a string, envelope and applied are objects", part="bundle")
    store = trust if isinstance(trust, TrustStore) else _one_key(trust)
    try:
        version = verify_record(envelope, name, store)
    except (PactVersionError, BlackboxError) as exc:
        raise PactBundleInvalid(str(exc), part="envelope") from exc
    if applied.get("version") != name:
        raise PactBundleInvalid(
            f"the apply record is for {applied.get('version')!r}, not {name}", part="applied"
        )
    section = bundle["transparency"]
    if not isinstance(section, Mapping) or not isinstance(section.get("proof"), Mapping):
        return PactBundleReport(version, dict(applied), None, None, None, "the bundle has no inclusion proof")
    proof = section["proof"]
    leaf = logged_leaf(envelope, applied)
    try:
        if _b64(proof.get("leaf")) != leaf:
            raise PactBundleInvalid(
                "the logged leaf is not this version's apply (the envelope or the apply record was changed)",
                part="transparency",
            )
    except (binascii.Error, ValueError, TypeError) as exc:
        raise PactBundleInvalid(f"the proof's leaf is not base64: {exc}", part="transparency") from exc
    if log_key is None:
        return PactBundleReport(
            version,
            dict(applied),
            proof.get("leafIndex"),
            proof.get("treeSize"),
            None,
            "the log's key is not pinned (--log-key): the inclusion proof was not checked",
        )
    try:
        checkpoint = verify_inclusion(leaf, proof, log_key)
    except ProofInvalid as exc:
        raise PactBundleInvalid(str(exc), part="transparency") from exc
    return PactBundleReport(
        version, dict(applied), int(proof["leafIndex"]), checkpoint.size, checkpoint.origin, None
    )


def _one_key(public: Ed25519PublicKey) -> TrustStore:
    raw = public_raw(public)
    return TrustStore([TrustedKey(key_id(raw), raw, not_before=datetime(1970, 1, 1, tzinfo=UTC))])


def _b64(value: object) -> bytes:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return base64.b64decode(value, validate=True)
