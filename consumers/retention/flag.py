"""``blackbox flag``: an operator's flag_consequential, sent like the Recorder's.

The flag event is the Recorder's: built by :func:`producers.evidence.flag_event`, signed with the
configured key by :func:`producers.evidence.sign_flag`, and sent through the configured transport,
keyed by the agent id so it follows the agent's captures in order. Ingest verifies it
(:func:`producers.evidence.verify_flag`), stores it in ``flags`` and upgrades the decision;
compaction then promotes the decision's content if the flag came before its content window ended
(:meth:`RetentionPolicy.promotes`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumers.retention.clock import Clock, SystemClock
from consumers.retention.store import decision_agent
from producers.evidence.events import flag_event, sign_flag
from schemas.errors import CaptureNotFound, TransportError

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.evidence import Signer
    from producers.settings import BlackboxSettings
    from producers.transports import DeliveryFailed, Transport

__all__ = ["FlagSent", "agent_of", "send_flag", "signer_for"]


@dataclass(frozen=True, slots=True)
class FlagSent:
    """The event that was delivered to the transport."""

    value: dict[str, Any]
    signed: bool


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
        decision_id,
        agent_id=agent_id,
        reason=reason,
        flagged_at=(clock or SystemClock()).now(),
        failure=failure,
    )
    if signer is not None:
        value = sign_flag(value, signer)
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
    agent = decision_agent(index, decision_id)
    if agent is None:
        raise CaptureNotFound(f"no decision {decision_id} in the index; pass --agent to flag it anyway")
    return agent


def signer_for(settings: BlackboxSettings) -> Signer | None:
    """The configured signing key, or None when none is configured."""
    from producers.evidence.keys import configured_signer

    return configured_signer(settings.signing_key, settings.signing_key_b64)
