"""``blackbox otlp``: receive OpenTelemetry traces over OTLP/HTTP and record their GenAI decisions.

``blackbox otlp [--listen 127.0.0.1:4318] [--agent-id ID] [--consequential] [--hold-seconds S]
[--max-body-bytes N] [--allow-remote]`` serves ``POST /v1/traces`` (protobuf or JSON), with
``/metrics``, ``/healthz`` and ``/readyz``, until SIGINT or SIGTERM, then records every trace still
held and flushes: the one HTTP application (:mod:`consumers.app.http`) with its OTLP surface.
``blackbox serve`` serves the same route beside the audit API. Captures are signed with the service's
key (``BLACKBOX_SIGNING_KEY`` / ``BLACKBOX_SIGNING_KEY_B64``) and go through the configured
transport (``BLACKBOX_TRANSPORT``: spool or Kafka), like a runtime's. Needs the otel extra
(``pip install 'agent-blackbox[server,otel]'``). See :mod:`consumers.otlp`.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from consumers.app.runtime import open_runtime
from schemas.errors import BlackboxError

if TYPE_CHECKING:
    from consumers.otlp import ReceiverOptions
    from consumers.otlp.listen import ListenAddress

__all__ = ["otlp_command", "receiver_options", "register"]

logger = logging.getLogger(__name__)

OTEL_EXTRA_HINT = "blackbox otlp needs the otel extra: pip install 'agent-blackbox[server,otel]'"


class OtelExtraMissing(BlackboxError):
    """The OTLP receiver's packages are not installed."""


def receiver_options(
    listen: ListenAddress,
    *,
    agent_id: str | None = None,
    consequential: bool = False,
    hold_seconds: float = 30.0,
    max_body_bytes: int = 16 * 1024 * 1024,
) -> ReceiverOptions:
    from consumers.otlp import ReceiverOptions

    return ReceiverOptions(
        listen=listen,
        agent_id=agent_id,
        consequential=consequential,
        hold_seconds=hold_seconds,
        max_body_bytes=max_body_bytes,
    )


def otlp_command(
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="Where to serve POST /v1/traces.")
    ] = "127.0.0.1:4318",
    agent_id: Annotated[
        str | None,
        typer.Option("--agent-id", help="Record every decision under this agent (default: service.name)."),
    ] = None,
    consequential: Annotated[
        bool, typer.Option("--consequential", help="Mark every decision consequential (full capture).")
    ] = False,
    hold_seconds: Annotated[
        float,
        typer.Option("--hold-seconds", min=0.0, help="How long a trace waits for its root span."),
    ] = 30.0,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", min=1, help="Largest request body (also once inflated).")
    ] = 16 * 1024 * 1024,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Listen on a non-loopback address; senders not on loopback then need a sender token.",
        ),
    ] = False,
) -> None:
    """Receive OTLP traces; record the GenAI decisions they describe (fidelity semantic)."""
    try:
        from consumers.otlp import OtlpService, parse_listen
    except ImportError as exc:
        raise OtelExtraMissing(f"{OTEL_EXTRA_HINT} (missing module: {exc.name})") from exc
    from consumers.app.http import Surfaces, http_app
    from consumers.ingest.signals import stop_on_signals
    from consumers.otlp.receiver import TRACES_PATH
    from consumers.web.server import Listen, Served, serve_forever

    address = parse_listen(listen, allow_remote=allow_remote)
    options = receiver_options(
        address,
        agent_id=agent_id,
        consequential=consequential,
        hold_seconds=hold_seconds,
        max_body_bytes=max_body_bytes,
    )
    stopped = threading.Event()
    with open_runtime() as rt:
        service = OtlpService(rt.settings, signer=rt.signer, options=options, tokens=rt.tokens)
        try:
            app = http_app(rt, Surfaces(otlp=True, index=False), otlp=service)

            def started(urls: list[str]) -> None:
                typer.echo(f"receiving OTLP traces on {urls[0]}{TRACES_PATH}", err=True)

            with stop_on_signals(stopped.set):
                serve_forever(
                    [Served(Listen(address.host, address.port), app)], stopped=stopped, started=started
                )
        finally:
            delivered = service.close()
    stats = service.receiver.stats
    typer.echo(
        f"requests={stats.requests} rejected={stats.rejected} spans={stats.spans} "
        f"decisions={stats.decisions} agents={','.join(service.recorders.agents) or '-'} "
        f"delivered={'all' if delivered else 'NOT ALL'}"
    )
    if not delivered:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("otlp")(otlp_command)
