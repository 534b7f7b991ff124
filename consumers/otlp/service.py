"""The receiver as one thing to open and close: recorders, span decisions, the receiver and its route.

``blackbox serve`` and ``blackbox otlp`` include :meth:`OtlpService.router` in the one application
(:mod:`consumers.app.http`); :meth:`OtlpService.start` serves it alone on ``options.listen`` from a
thread (tests, the benchmark). Close order: stop serving, record every trace still held, then
close the recorders (each flushes what it queued to the transport and reports what it could not
deliver).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from consumers.otlp.listen import ListenAddress
from consumers.otlp.receiver import DEFAULT_MAX_BODY_BYTES, TRACES_PATH, OtlpReceiver
from consumers.otlp.recorders import RecorderPool
from consumers.otlp.routes import otlp_router
from consumers.otlp.senders import SenderAuth
from producers.integrations.genai_spans import SpanDecisions

if TYPE_CHECKING:
    from collections.abc import Callable

    from fastapi import APIRouter

    from consumers.access.tokens import TokenStore
    from consumers.web.server import WebServer
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
    max_held_bytes: int = 64 * 1024 * 1024  # spans waiting for their trace's root
    max_recorders: int = 32
    idle_seconds: float = 60.0
    max_receiving_bytes: int = 4 * DEFAULT_MAX_BODY_BYTES  # bodies held at once, all requests together
    max_decoding: int = 2  # worker threads decoding and recording
    max_backlog: int = 5_000  # captures waiting for delivery before senders are told to retry (429)
    read_idle_seconds: float = 10.0  # a body that sends nothing for this long is refused (408)


class OtlpService:
    """Recorders from ``settings`` signing with ``signer``, behind an :class:`OtlpReceiver`;
    ``tokens``: where sender tokens are looked up (None: loopback senders only)."""

    def __init__(
        self,
        settings: BlackboxSettings,
        *,
        signer: Signer,
        options: ReceiverOptions,
        tokens: TokenStore | None = None,
        on_error: Callable[[CaptureFailure], None] | None = None,
    ) -> None:
        self.options = options
        self.recorders = RecorderPool(
            settings,
            signer=signer,
            agent_id=options.agent_id,
            on_error=on_error,
            max_recorders=options.max_recorders,
            idle_seconds=options.idle_seconds,
        )
        self.decisions = SpanDecisions(
            self.recorders,
            consequential=options.consequential,
            hold_seconds=options.hold_seconds,
            max_bytes=options.max_held_bytes,
        )
        self.receiver = OtlpReceiver(
            self.decisions,
            self.recorders,
            max_body_bytes=options.max_body_bytes,
            max_receiving_bytes=options.max_receiving_bytes,
            max_decoding=options.max_decoding,
            max_backlog=options.max_backlog,
            read_idle_seconds=options.read_idle_seconds,
        ).start()
        self.senders = SenderAuth(tokens)
        self._server: WebServer | None = None
        self.url = ""

    def router(self) -> APIRouter:
        return otlp_router(self.receiver, senders=self.senders)

    def start(self) -> OtlpService:
        """Serve the route alone on ``options.listen`` from a thread; :attr:`url` is its traces URL."""
        from consumers.web.app import build_app
        from consumers.web.server import Listen, WebServer

        listen = Listen(self.options.listen.host, self.options.listen.port)
        self._server = WebServer(build_app(routers=[self.router()]), listen).start()
        self.url = self._server.url + TRACES_PATH
        return self

    def close(self, timeout: float = 30.0) -> bool:
        """Stop, record what is held, close the recorders; True if every capture was delivered."""
        if self._server is not None:
            self._server.stop()
        self.receiver.shutdown()
        return self.recorders.close(timeout)

    def __enter__(self) -> OtlpService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
