"""``blackbox flag``: an operator's flag_consequential, sent like the Recorder's.

The flag event (``{"decisionId","agentId","reason","flaggedAt","failure"}``, signed with the configured
key the way the Recorder signs its flags) goes through the configured transport, keyed
by the agent id so it follows the agent's captures in order. The signature is the inline block ingest
checks (:meth:`consumers.ingest.batch.BatchProcessor._verify_flag`). Ingest verifies it, stores it in
``flags`` and upgrades the decision; compaction then promotes the decision's content if the flag came
before its content window ended (:meth:`RetentionPolicy.promotes`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumers.retention.clock import Clock, SystemClock
from schemas.errors import CaptureNotFound, TransportError

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.evidence import Signer
    from producers.settings import BlackboxSettings
    from producers.transport import DeliveryFailed, Transport

__all__ = ["FlagSent", "agent_of", "flag_event", "send_flag", "sign_flag", "signer_for"]


@dataclass(frozen=True, slots=True)
class FlagSent:
    """The event that was delivered to the transport."""

    value: dict[str, Any]
    signed: bool


def flag_event(
    decision_id: str,
    *,
    agent_id: str,
    reason: str,
    failure: bool,
    clock: Clock | None = None,
    signer: Signer | None = None,
) -> dict[str, Any]:
    """The flag event value, signed when ``signer`` is given."""
    from producers.decision import format_timestamp

    value: dict[str, Any] = {
        "decisionId": decision_id,
        "agentId": agent_id,
        "reason": reason,
        "flaggedAt": format_timestamp((clock or SystemClock()).now()),
        "failure": failure,
    }
    return sign_flag(value, signer) if signer is not None else value


def sign_flag(value: dict[str, Any], signer: Signer) -> dict[str, Any]:
    """The flag with its inline ``signature`` block, as ingest verifies it: ed25519 over the DSSE PAE
    (payload type ``FLAG_PAYLOAD_TYPE``) of the RFC 8785 bytes of the event without ``signature``."""
    from producers.evidence import FLAG_PAYLOAD_TYPE, canonical_json, pae
    from producers.evidence.dsse import b64encode

    unsigned = {key: item for key, item in value.items() if key != "signature"}
    payload = canonical_json(unsigned, path="flag")
    return {
        **unsigned,
        "signature": {
            "algorithm": "ed25519",
            "publicKeyRef": signer.public_key_ref,
            "signatureBytes": "base64:" + b64encode(signer.sign(pae(FLAG_PAYLOAD_TYPE, payload))),
        },
    }


def send_flag(
    transport: Transport,
    decision_id: str,
    *,
    agent_id: str,
    reason: str,
    failure: bool = False,
    clock: Clock | None = None,
    signer: Signer | None = None,
    timeout: float = 30.0,
) -> FlagSent:
    """Encode and send one flag event; returns once the transport confirmed delivery (raises otherwise)."""
    from schemas.codec import encode_event

    value = flag_event(
        decision_id, agent_id=agent_id, reason=reason, failure=failure, clock=clock, signer=signer
    )
    data = encode_event("flag", value)
    done = threading.Event()
    outcome: list[DeliveryFailed | None] = []

    def on_delivery(error: DeliveryFailed | None) -> None:
        outcome.append(error)
        done.set()

    transport.send(agent_id.encode(), data, on_delivery)
    transport.flush(timeout)
    if not done.is_set():
        transport.poll(timeout)
    if not outcome:
        raise TransportError(f"flag for {decision_id} not confirmed by the transport within {timeout:.0f}s")
    if outcome[0] is not None:
        raise TransportError(f"flag for {decision_id} was not delivered: {outcome[0]}") from outcome[0]
    return FlagSent(value=value, signed=signer is not None)


def agent_of(index: Index, decision_id: str) -> str:
    """The agent id of an indexed decision (the flag's message key)."""
    rows = index.query(
        "SELECT agent_id FROM decisions FINAL WHERE decision_id = {id:String} LIMIT 1", {"id": decision_id}
    )
    if not rows:
        raise CaptureNotFound(f"no decision {decision_id} in the index; pass --agent to flag it anyway")
    return str(rows[0]["agent_id"])


def signer_for(settings: BlackboxSettings) -> Signer | None:
    """The configured signing key, or None when none is configured."""
    if settings.signing_key is None and settings.signing_key_b64 is None:
        return None
    from producers.evidence import load_signer

    return load_signer(settings.signing_key, settings.signing_key_b64)
