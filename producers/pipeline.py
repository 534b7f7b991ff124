"""From a capture (or flag) in JSON form to the bytes a transport sends: the recorder's worker step.

Per capture, in this order (DESIGN decisions 1, 5, 6):

1. the capture policy picks the level, unless the capture already names one;
   then, when redaction is on, personal data is replaced by placeholders and the original sealed
   (:mod:`producers.privacy`; DESIGN decision 16), so what follows never sees it;
2. :func:`producers.evidence.seal` fills every hash, the working-set root and the signature —
   over the *full* content, so a structured-only capture keeps every hash;
3. structured-only: the content parts are dropped (the signature still verifies);
4. :func:`producers.avro.encode_capture` (the native core's writer, else :mod:`schemas.codec`; same bytes);
5. above ``max_message_bytes``: the bytes go to the blob store and a claim-check event replaces them.

A failure raises :class:`StageFailed` naming the stage, so the recorder can report where a capture
was lost. Nothing here touches threads, queues or the transport; between stages it calls the
``pause`` it is given, where the recorder's worker lets the runtime's threads have the GIL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from producers.avro import encode_capture
from producers.claimcheck import ClaimChecker
from producers.policy import CapturePolicy
from schemas.codec import encode_event
from schemas.errors import BlackboxError, ContractError, TransportError

if TYPE_CHECKING:
    from producers.evidence import Signer
    from producers.privacy.protect import Redactor

__all__ = ["Prepared", "Stage", "StageFailed", "prepare_capture", "prepare_flag"]

# "record": values the runtime gave could not be recorded as given (producers/unrecordable.py);
# the capture was still made, with markers in their place. "flight": the flight recorder
# (producers/flight.py) no longer held a flagged decision's content, or failure_when raised. "pact":
# the pact version given was refused, or a consequential_when rule failed on one decision.
Stage = Literal[
    "record", "queue", "build", "seal", "encode", "claim_check", "send", "delivery", "close", "flight", "pact"
]


class StageFailed(Exception):
    """Internal: ``error`` (a :class:`BlackboxError`) happened at ``stage``."""

    def __init__(self, stage: Stage, error: BlackboxError) -> None:
        self.stage = stage
        self.error = error
        super().__init__(f"{stage}: {error}")


@dataclass(frozen=True, slots=True)
class Prepared:
    """The message value to send, and whether it is a claim check standing in for the capture.

    ``held``: with ``hold=True``, the sealed capture *with* its content when what is sent is
    structured-only (for the flight recorder); else None.
    """

    data: bytes
    claim_checked: bool = False
    held: dict[str, Any] | None = None


def prepare_capture(
    capture: dict[str, Any],
    *,
    signer: Signer,
    policy: CapturePolicy,
    claims: ClaimChecker | None,
    max_message_bytes: int,
    owned: bool = False,
    hold: bool = False,
    redactor: Redactor | None = None,
    pause: Callable[[], None] | None = None,
) -> Prepared:
    """Seal, strip (structured-only), encode and claim-check one capture.

    ``owned=True`` lets sealing fill ``capture`` in place (the caller built it and drops it) and
    reuse the hashes the SDK pinned on its own configuration snapshots. ``hold=True`` returns the
    sealed full capture beside a structured-only one (:attr:`Prepared.held`). ``redactor``: personal
    data is redacted and the original sealed first (:mod:`producers.privacy`), failures at ``seal``.
    ``pause``: called after redaction and after sealing (it must not raise).
    """
    from producers.evidence import seal

    stage: Stage = "build"
    try:
        if capture.get("captureLevel") is None:
            if not owned:
                capture = dict(capture)
            capture["captureLevel"] = policy.level(
                decision_id=capture["decisionId"], consequential=bool(capture["consequential"]["flagged"])
            )
        stage = "seal"
        if redactor is not None:  # personal data out before anything is signed or sent
            capture = redactor.protect(capture, owned=owned)
            if pause is not None:
                pause()
        full = seal(capture, signer, copy=not owned, pinned=owned)
        if pause is not None:
            pause()
        sealed = policy.apply(full)
        held = full if hold and sealed is not full else None
        stage = "encode"
        data = encode_capture(sealed)
        if len(data) <= max_message_bytes:
            return Prepared(data, held=held)
        stage = "claim_check"
        if claims is None:
            raise TransportError(
                f"capture is {len(data)} bytes, above max_message_bytes={max_message_bytes}, "
                "and no blob store is configured for a claim check"
            )
        return Prepared(
            encode_event("claim_check", claims.check_in(data, capture=sealed)), claim_checked=True, held=held
        )
    except Exception as exc:
        raise StageFailed(stage, as_blackbox(exc)) from exc


def prepare_flag(value: dict[str, Any], *, signer: Signer | None) -> Prepared:
    """Sign (when a signer is given, :func:`producers.evidence.sign_flag`) and encode one flag event."""
    from producers.evidence import sign_flag

    stage: Stage = "seal"
    try:
        if signer is not None:
            value = sign_flag(value, signer)
        stage = "encode"
        return Prepared(encode_event("flag", value))
    except Exception as exc:
        raise StageFailed(stage, as_blackbox(exc)) from exc


def as_blackbox(exc: BaseException) -> BlackboxError:
    """``exc`` itself if it is a blackbox error, else wrapped (cause kept)."""
    if isinstance(exc, BlackboxError):
        return exc
    message = f"{type(exc).__name__}: {exc}"
    wrapped = (
        ContractError(message)
        if isinstance(exc, (TypeError, ValueError, KeyError))
        else BlackboxError(message)
    )
    wrapped.__cause__ = exc
    return wrapped
