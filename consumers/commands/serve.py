"""``blackbox serve``: the one HTTP application (DESIGN decision 21) over this data directory.

Surfaces (settings ``BLACKBOX_SERVE_*``; flags win): the audit API (on by default), the OTLP/HTTP
receiver ``POST /v1/traces`` (``auto``: when a signing key is configured; ``--otlp-listen`` puts it
on an address of its own), and always ``/metrics``, ``/healthz`` and ``/readyz``. On embedded
defaults (spool transport and chdb) ingest runs in the same process, so one command is the whole
system and holds the one chdb handle; with Kafka or a ClickHouse server ingest is a separate
deployment unless ``--ingest``.

Outsiders authenticate with tokens from ``blackbox access token create`` (or OIDC JWTs); every audit
request is logged in ``access_log``. Plain HTTP: on anything but loopback, put it behind a
TLS-terminating proxy (and ``--allow-remote`` is needed to listen there).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from consumers.app.runtime import open_runtime
from consumers.app.settings import ServiceSettings, load_service_settings
from schemas.errors import BlackboxError

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.ingest.service import IngestService
    from consumers.otlp import OtlpService

__all__ = ["register", "serve_command"]

log = logging.getLogger(__name__)


class ServeRefused(BlackboxError):
    """``blackbox serve`` cannot run as configured (a surface without what it needs)."""


def _otlp_on(settings: ServiceSettings, flag: bool | None) -> bool:
    if flag is not None:
        return flag
    if settings.serve_otlp != "auto":
        return settings.serve_otlp == "on"
    return settings.signing_key is not None or settings.signing_key_b64 is not None


def _ingest_on(settings: ServiceSettings, flag: bool | None) -> bool:
    if flag is not None:
        return flag
    if settings.serve_ingest != "auto":
        return settings.serve_ingest == "on"
    return settings.transport == "spool" and settings.index_engine == "chdb"


def serve_command(
    listen: Annotated[
        str | None,
        typer.Option("--listen", metavar="HOST:PORT", help="Where to listen (default 127.0.0.1:8700)."),
    ] = None,
    otlp_listen: Annotated[
        str | None,
        typer.Option("--otlp-listen", metavar="HOST:PORT", help="Serve POST /v1/traces on its own address."),
    ] = None,
    audit: Annotated[bool, typer.Option("--audit/--no-audit", help="Serve the audit API.")] = True,
    otlp: Annotated[
        bool | None,
        typer.Option("--otlp/--no-otlp", help="Serve POST /v1/traces (default: when a signing key is set)."),
    ] = None,
    ingest: Annotated[
        bool | None,
        typer.Option("--ingest/--no-ingest", help="Run ingest here (default: on embedded defaults)."),
    ] = None,
    agent_id: Annotated[
        str | None, typer.Option("--agent-id", help="OTLP: record every decision under this agent.")
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote", help="Listen on a non-loopback address (OTLP senders then need tokens)."
        ),
    ] = False,
) -> None:
    """Serve the audit API, the OTLP receiver, metrics and health; on embedded defaults, ingest too."""
    from consumers.ingest.signals import stop_on_signals
    from consumers.otlp.listen import parse_listen as parse_otlp_listen
    from consumers.web.server import Listen, Served, serve_forever

    settings = load_service_settings()
    main = parse_otlp_listen(listen or settings.serve_listen, allow_remote=allow_remote)
    separate = otlp_listen or settings.serve_otlp_listen
    otlp_address = parse_otlp_listen(separate, allow_remote=allow_remote) if separate else None
    run_audit = audit and settings.serve_audit
    run_otlp = _otlp_on(settings, otlp if otlp is not None else (True if otlp_address else None))
    run_ingest = _ingest_on(settings, ingest)
    stopped = threading.Event()
    with (
        open_runtime(settings, existing_index=run_audit and not run_ingest) as rt,
        _receiver(rt, run_otlp, agent_id=agent_id, allow_remote=allow_remote) as receiver,
        _ingest(rt, run_ingest) as ingesting,
    ):
        from consumers.app.http import Surfaces, http_app
        from consumers.app.serving import ServingNote

        health = (lambda: ingesting.telemetry.health) if ingesting and ingesting.telemetry else (lambda: None)
        served = [
            Served(
                Listen(main.host, main.port),
                http_app(
                    rt,
                    Surfaces(audit=run_audit, console=run_audit, otlp=run_otlp and otlp_address is None),
                    otlp=receiver,
                    health=health,
                ),
            )
        ]
        if otlp_address is not None and receiver is not None:
            app = http_app(rt, Surfaces(otlp=True, observability=False), otlp=receiver)
            served.append(Served(Listen(otlp_address.host, otlp_address.port), app))
        if not main.loopback:
            typer.echo(
                f"warning: serving plain HTTP on {main}; put a TLS-terminating proxy in front", err=True
            )

        note = ServingNote(rt.settings.data_dir)

        def started(urls: list[str]) -> None:
            what = [s for s, on in (("audit", run_audit), ("otlp", run_otlp), ("ingest", run_ingest)) if on]
            typer.echo(f"serving on {' and '.join(urls)} ({', '.join([*what, 'metrics'])})", err=True)
            if run_audit:
                typer.echo(f"console on {urls[0]}/console", err=True)
            note.write(urls)

        try:
            with stop_on_signals(stopped.set):
                serve_forever(served, stopped=stopped, started=started)
        finally:
            note.remove()


@contextmanager
def _receiver(
    rt: Runtime, on: bool, *, agent_id: str | None, allow_remote: bool
) -> Iterator[OtlpService | None]:
    if not on:
        yield None
        return
    from consumers.commands.otlp import receiver_options
    from consumers.otlp import OtlpService
    from consumers.otlp.listen import parse_listen

    options = receiver_options(parse_listen("127.0.0.1:0"), agent_id=agent_id)
    service = OtlpService(rt.settings, signer=rt.signer, options=options, tokens=rt.tokens)
    try:
        yield service
    finally:
        delivered = service.close()
        stats = service.receiver.stats
        typer.echo(
            f"otlp: requests={stats.requests} rejected={stats.rejected} spans={stats.spans} "
            f"decisions={stats.decisions} delivered={'all' if delivered else 'NOT ALL'}",
            err=True,
        )


@contextmanager
def _ingest(rt: Runtime, on: bool) -> Iterator[IngestService | None]:
    """Ingest in this process, on a thread of its own: the same loop and guarantees as ``consume``."""
    if not on:
        yield None
        return
    with rt.ingest() as service:
        failure: list[BaseException] = []

        def run() -> None:
            try:
                service.run(drain=False)
            except BaseException as exc:  # reported below and on /healthz; the server keeps answering
                failure.append(exc)
                log.error("in-process ingest stopped: %s: %s", type(exc).__name__, exc)

        thread = threading.Thread(target=run, name="serve-ingest", daemon=True)
        thread.start()
        try:
            yield service
        finally:
            service.stop()
            thread.join(60)
    if failure:
        typer.echo(f"ingest stopped with an error: {type(failure[0]).__name__}: {failure[0]}", err=True)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
