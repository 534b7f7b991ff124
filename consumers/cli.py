"""The ``blackbox`` command line: one typer app; each area registers its own commands.

Command modules live in ``consumers/commands/`` and expose ``register(app: typer.Typer)``; they are
listed here, so a module that fails to import is an error, not a command that silently disappears.
"""

from __future__ import annotations

import sys

import typer

from consumers import terminal
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
from producers.owner_only import owner_only_umask, warn_if_too_open
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


SERVICE_COMMANDS = frozenset({"serve", "consume", "otlp"})
"""The commands that run as services: they check the data directory's modes at start."""


def main() -> None:
    """Entry point: known blackbox errors print one clear line and exit 2, never a traceback.

    Every command creates owner-only files (umask 077); the services (:data:`SERVICE_COMMANDS`) warn at
    start about a data directory others can read (:mod:`producers.owner_only`)."""
    owner_only_umask()
    if SERVICE_COMMANDS.intersection(sys.argv[1:2]):  # the long-running services, once at their start
        _warn_if_data_dir_too_open()
    try:
        app()
    except BlackboxError as exc:
        terminal.echo(f"error: {terminal.clean(exc)}", err=True)  # messages quote data: escaped
        raise SystemExit(2) from exc


def _warn_if_data_dir_too_open() -> None:
    from consumers.app.settings import load_service_settings
    from consumers.observability.logs import configure_logging

    try:
        data_dir = load_service_settings().data_dir
    except Exception:  # invalid settings: the command itself says what is wrong, in one line
        return
    if _log_format(sys.argv) == "json":  # the command's own format: every stderr line one JSON object
        configure_logging("json")
    warn_if_too_open(data_dir)


def _log_format(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--log-format" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--log-format="):
            return arg.split("=", 1)[1]
    return "text"
