"""The ``blackbox`` command line: one typer app; each area registers its own commands.

Command modules live in ``consumers/commands/`` and expose ``register(app: typer.Typer)``; they are
listed here, so a module that fails to import is an error, not a command that silently disappears.
"""

from __future__ import annotations

import typer

from consumers.commands import (
    access,
    capture,
    demo,
    export,
    finding,
    index,
    ingest,
    keys,
    log,
    otlp,
    pact,
    privacy,
    replay,
    retention,
    serve,
    verify,
)
from schemas.errors import BlackboxError

app = typer.Typer(
    name="blackbox",
    help="Forensic capture and replay for AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

# Every command module, listed: one that fails to import fails the CLI loudly, never a silent skip.
for _module in (
    keys,  # keys generate / list / trust / revoke
    capture,  # capture FILE.json
    verify,  # verify --file / verify DECISION_ID
    ingest,  # consume, show
    index,  # trends, query
    retention,  # compact, hold, release, flag
    privacy,  # erase (crypto-shredding of personal data)
    replay,  # replay, bisect, regress
    finding,  # finding add / list / show
    pact,  # pact propose / show / diff / history / apply (versioned pact sets), record
    demo,  # demo, report
    otlp,  # otlp (the OTLP/HTTP trace receiver)
    log,  # log checkpoint / key / prove / verify (the transparency log)
    export,  # export (evidence bundles)
    serve,  # serve (the audit endpoint)
    access,  # access token / requests / approve / refuse / log verify
):
    _module.register(app)


def main() -> None:
    """Entry point: known blackbox errors print one clear line and exit 2, never a traceback."""
    try:
        app()
    except BlackboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from exc
