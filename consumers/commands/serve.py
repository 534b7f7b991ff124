"""``blackbox serve [--listen 127.0.0.1:8700]``: the audit endpoint (consumers.audit) over this data dir.

Outsiders authenticate with tokens from ``blackbox access token create`` (or OIDC JWTs); every request
is logged in ``access_log``. Plain HTTP: on anything but loopback, put it behind a TLS-terminating proxy.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from consumers.app.runtime import open_runtime

__all__ = ["register", "serve_command"]


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve_command(
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT to listen on (loopback by default).")
    ] = "127.0.0.1:8700",
) -> None:
    """Serve the audit endpoint: authenticated, rate-limited, every request logged (OpenAPI at /openapi.json)."""
    from consumers.audit import create_app, serve
    from consumers.audit.server import parse_listen

    host, port = parse_listen(listen)
    with open_runtime(existing_index=True) as rt:
        app = create_app(rt)
        rt.index  # noqa: B018 - open the index now, so a busy or missing one fails before we listen
        if not _loopback(host):
            typer.echo(
                f"warning: serving plain HTTP on {host}; put a TLS-terminating proxy in front", err=True
            )
        typer.echo(f"audit endpoint on http://{listen} (OpenAPI: /openapi.json)", err=True)
        typer.echo(f"console on http://{listen}/console", err=True)
        serve(app, host=host, port=port)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
