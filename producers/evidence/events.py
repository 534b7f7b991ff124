"""Flag events: the one builder, and their signatures (the same DSSE signing as captures).

A flag event (``{"decisionId", "agentId", "reason", "flaggedAt", "failure"}``, schema ``flag/v1``)
upgrades a decision to consequential after the fact, so it is evidence too. The Recorder's
``flag_consequential`` and ``blackbox flag`` both build it with :func:`flag_event`.

Two forms carry the same signature, ed25519 over the DSSE PAE (payload type
:data:`FLAG_PAYLOAD_TYPE`) of the RFC 8785 bytes of the event without its signature:

- inline, as the event travels on the transport: :func:`sign_flag` adds the ``signature`` block,
  :func:`verify_flag` checks it (ingest);
- the standard DSSE envelope: :func:`sign_event` / :func:`verify_event`, which :func:`verify_flag`
  builds on.

The key's window is checked at ``flaggedAt`` (the event's signing time) and revocation at ``at``
(default now), as for captures; a key bound to agents must allow the event's ``agentId`` (an event
without one is refused by a bound key).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature

from producers.clock import format_timestamp
from producers.evidence.canonical import canonical_json
from producers.evidence.dsse import b64decode, b64encode, make_envelope, open_envelope, pae
from producers.evidence.keys import Signer, key_id_from_ref
from producers.evidence.trust import TrustStore, parse_time
from schemas.errors import ContractError, KeyNotTrusted, SignatureInvalid

__all__ = ["FLAG_PAYLOAD_TYPE", "flag_event", "sign_event", "sign_flag", "verify_event", "verify_flag"]

FLAG_PAYLOAD_TYPE = "application/vnd.blackbox.flag+json;version=v1"


def flag_event(
    decision_id: str, *, agent_id: str, reason: str, flagged_at: datetime, failure: bool
) -> dict[str, Any]:
    """The unsigned flag event; ``ValueError`` if ``flagged_at`` is naive."""
    return {
        "decisionId": decision_id,
        "agentId": agent_id,
        "reason": reason,
        "flaggedAt": format_timestamp(flagged_at),
        "failure": bool(failure),
    }


def sign_flag(value: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    """The flag event with its inline ``signature`` block (replacing any it had)."""
    unsigned = _unsigned(value)
    signature = signer.sign(pae(FLAG_PAYLOAD_TYPE, canonical_json(unsigned, path="flag")))
    return {
        **unsigned,
        "signature": {
            "algorithm": "ed25519",
            "publicKeyRef": signer.public_key_ref,
            "signatureBytes": "base64:" + b64encode(signature),
        },
    }


def verify_flag(value: Mapping[str, Any], trust: TrustStore, *, at: datetime | None = None) -> dict[str, Any]:
    """The flag event without its signature if a trusted key made its inline ``signature``.

    Raises as :func:`verify_event` does, and :class:`SignatureInvalid` for an unsigned event or a
    malformed signature block. The envelope rebuilt here names ``publicKeyRef`` as its key hint.
    """
    signature = value.get("signature")
    if signature is None:
        raise SignatureInvalid("the flag event is not signed", part="signature")
    unsigned = _unsigned(value)
    encoded = str(signature.get("signatureBytes") or "")
    try:
        raw = b64decode(encoded.removeprefix("base64:"))
        payload = canonical_json(unsigned, path="flag")
    except (ValueError, ContractError) as exc:
        raise SignatureInvalid(f"malformed flag signature: {exc}", part="signature") from exc
    envelope = make_envelope(payload, FLAG_PAYLOAD_TYPE, raw, str(signature.get("publicKeyRef") or ""))
    return verify_event(envelope, trust, at=at)


def _unsigned(value: Mapping[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if key != "signature"}


def sign_event(
    value: Mapping[str, Any], signer: Signer, *, payload_type: str = FLAG_PAYLOAD_TYPE
) -> dict[str, Any]:
    """A DSSE envelope over the RFC 8785 bytes of ``value``, ``keyid`` = the signer's key id."""
    payload = canonical_json(dict(value), path="event")
    return make_envelope(payload, payload_type, signer.sign(pae(payload_type, payload)), signer.key_id)


def verify_event(
    envelope: Mapping[str, Any],
    trust: TrustStore,
    *,
    at: datetime | None = None,
    payload_type: str = FLAG_PAYLOAD_TYPE,
) -> dict[str, Any]:
    """The event inside ``envelope`` if a trusted key signed it; raises the reason otherwise.

    :class:`SignatureInvalid` (malformed envelope, wrong payload type, no signature verifies),
    :class:`KeyNotTrusted` (no signature names a key the trust store accepts), or its subclass
    :class:`KeyNotAuthorizedForAgent` (a key signed it that may not sign for its ``agentId``).
    """
    payload, found_type, signatures = open_envelope(envelope)
    if found_type != payload_type:
        raise SignatureInvalid(f"payloadType {found_type!r} is not {payload_type!r}", part="payloadType")
    try:
        value = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SignatureInvalid(f"the payload is not JSON: {exc}", part="payload") from exc
    if not isinstance(value, dict):
        raise SignatureInvalid("the payload is not a JSON object", part="payload")
    flagged_at = value.get("flaggedAt")
    try:
        signed_at = (
            parse_time(flagged_at)
            if flagged_at is not None
            else parse_time(at or datetime.now().astimezone())
        )
    except ValueError as exc:
        raise KeyNotTrusted(f"flaggedAt {flagged_at!r} is not an ISO-8601 time", part="key") from exc
    agent_id = value.get("agentId")
    message = pae(found_type, payload)
    refusal: Exception | None = None
    for hint, signature in signatures:
        key_id = key_id_from_ref(hint)
        if key_id is None:
            continue
        try:
            public_key = trust.check(key_id, signed_at, now=at)
            public_key.verify(signature, message)
            trust.check_agent(key_id, agent_id if isinstance(agent_id, str) else "")
        except KeyNotTrusted as exc:
            refusal = exc
            continue
        except InvalidSignature:
            refusal = SignatureInvalid(f"the signature by {key_id} does not verify", part="signature")
            continue
        return value
    if refusal is None:
        refusal = KeyNotTrusted("no signature names a sha256 key id", part="key")
    raise refusal
