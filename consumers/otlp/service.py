"""The receiver as one thing to open and close: recorders, span decisions and the HTTP server.

Close order: stop serving, record every trace still held, then close the recorders (each flushes
what it queued to the transport and reports what could not be delivered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from consumers.otlp.listen import ListenAddress
from consumers.otlp.recorders import RecorderPool
from consumers.otlp.server import DEFAULT_MAX_BODY_BYTES, OtlpReceiver
from producers.integrations.genai_spans import SpanDecisions

if TYPE_CHECKING:
    from collections.abc import Callable

    from producers.evidence import Signer
    from producers.recorder import CaptureFailure
    from producers.settings import BlackboxSettings

__all__ = ["OtlpService", "ReceiverOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverOptions:
    listen: ListenAddress
    agent_id: str | None = None
    consequential: bool = False
    hold_seconds: float = 30.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


class OtlpService:
    """Recorders from ``settings`` signing with ``signer``, behind an :class:`OtlpReceiver`."""

    def __init__(
        self,
        settings: BlackboxSettings,
        *,
        signer: Signer,
        options: ReceiverOptions,
        on_error: Callable[[CaptureFailure], None] | None = None,
    ) -> None:
        self.recorders = RecorderPool(settings, signer=signer, agent_id=options.agent_id, on_error=on_error)
        self.decisions = SpanDecisions(
            self.recorders, consequential=options.consequential, hold_seconds=options.hold_seconds
        )
        self.receiver = OtlpReceiver(
            self.decisions,
            host=options.listen.host,
            port=options.listen.port,
            max_body_bytes=options.max_body_bytes,
        )

    def close(self, timeout: float = 30.0) -> bool:
        """Stop, record what is held, close the recorders; True if every capture was delivered."""
        self.receiver.shutdown()
        return self.recorders.close(timeout)

    def __enter__(self) -> OtlpService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
