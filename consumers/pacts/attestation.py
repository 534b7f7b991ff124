"""An agent's behavioural record as a signed document a counterparty can relay and anyone can check
(``GET /v1/agents/{agent_id}/record``; ``blackbox verify --record FILE --log-key VKEY``).

The document is a DSSE envelope (payload type :data:`RECORD_PAYLOAD_TYPE`) over the RFC 8785 bytes of
the record (:meth:`consumers.pacts.record.AgentRecord.to_json`) plus ``issuedAt`` and ``issuer`` (the
log's origin). It is signed by the service's own key, the transparency log's: the key whose verifier
key (``blackbox log key``) a counterparty already pins to check evidence bundles. The envelope's
``keyid`` is that verifier key, a hint; the verifier uses the key it pinned.

The one key signing two kinds of message stays unambiguous: a checkpoint note's first line is the
origin (no spaces), while every DSSE pre-authentication encoding starts ``DSSEv1 <n> <type>`` (spaces
before any newline), so no signature over one can be presented as a signature over the other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from consumers.tlog.checkpoints import LogSigner
from producers.evidence.canonical import canonical_json
from producers.evidence.dsse import make_envelope, open_envelope, pae
from producers.evidence.tlog import LogKey, log_key
from producers.evidence.trust import format_time
from schemas.errors import BlackboxError, ProofInvalid, VerificationError

__all__ = ["RECORD_PAYLOAD_TYPE", "RecordInvalid", "sign_agent_record", "verify_agent_record"]

RECORD_PAYLOAD_TYPE = "application/vnd.blackbox.agent-record+json;version=v1"


class RecordInvalid(VerificationError):
    """A signed agent record does not verify; ``part`` names what failed."""


def sign_agent_record(record: Mapping[str, Any], signer: LogSigner, *, issued_at: datetime) -> dict[str, Any]:
    """The DSSE envelope of ``record`` issued now by the service (module docstring)."""
    statement = {**record, "issuedAt": format_time(issued_at), "issuer": signer.origin}
    payload = canonical_json(statement, path="record")
    signature = signer.private_key.sign(pae(RECORD_PAYLOAD_TYPE, payload))
    return make_envelope(payload, RECORD_PAYLOAD_TYPE, signature, signer.vkey)


def verify_agent_record(envelope: Mapping[str, Any], key: str | Ed25519PublicKey | LogKey) -> dict[str, Any]:
    """The record inside ``envelope`` if the service's key (a verifier key, or the public key) signed
    it; :class:`RecordInvalid` naming the part otherwise."""
    try:
        payload, payload_type, signatures = open_envelope(envelope)
    except BlackboxError as exc:
        raise RecordInvalid(f"not a signed envelope: {exc}", part="envelope") from exc
    if payload_type != RECORD_PAYLOAD_TYPE:
        raise RecordInvalid(
            f"payloadType {payload_type!r} is not {RECORD_PAYLOAD_TYPE!r}", part="payloadType"
        )
    try:
        public = log_key(key, name="blackbox").public_key if not isinstance(key, Ed25519PublicKey) else key
    except ProofInvalid as exc:
        raise RecordInvalid(f"the verifier key is unusable: {exc}", part="key") from exc
    message = pae(RECORD_PAYLOAD_TYPE, payload)
    for _, signature in signatures:
        try:
            public.verify(signature, message)
        except InvalidSignature:
            continue
        break
    else:
        raise RecordInvalid(
            "no signature verifies with the service's key (altered, or another key)", part="signature"
        )
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise RecordInvalid(f"the payload is not JSON: {exc}", part="payload") from exc
    if not isinstance(value, dict) or not isinstance(value.get("agent"), str):
        raise RecordInvalid("the payload is not an agent record", part="payload")
    return value
