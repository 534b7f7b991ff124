"""Signed flag events: the same DSSE signing as captures, in the standard JSON envelope.

A flag event (``{"decisionId", "agentId", "reason", "flaggedAt", "failure"}``) upgrades a decision
to consequential after the fact, so it is evidence too. :func:`sign_event` returns a DSSE envelope
whose payload is the RFC 8785 bytes of the event; :func:`verify_event` checks it against the trust
store and returns the event. The key's window is checked at ``flaggedAt`` (the event's signing
time) and revocation at ``at`` (default now), as for captures; a key bound to agents must allow the
event's ``agentId`` (an event without one is refused by a bound key).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature

from producers.evidence.canonical import canonical_json
from producers.evidence.dsse import make_envelope, open_envelope, pae
from producers.evidence.keys import Signer, key_id_from_ref
from producers.evidence.trust import TrustStore, parse_time
from schemas.errors import KeyNotTrusted, SignatureInvalid

FLAG_PAYLOAD_TYPE = "application/vnd.blackbox.flag+json;version=v1"


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
