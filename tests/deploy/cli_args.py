"""Whether the real CLI accepts a deployment's command line (parsed, never run)."""

from __future__ import annotations

import shlex
from typing import Any

import typer.main
from typer.exceptions import TyperException

from consumers.cli import app as cli


def cli_refuses(args: list[str]) -> str | None:
    """Why the real CLI refuses ``blackbox ARGS``, or None when it parses."""
    group: Any = typer.main.get_command(cli)
    if not args or args[0] not in group.commands:
        return f"no command {args[0] if args else '(none)'}"
    try:
        group.commands[args[0]].make_context(f"blackbox {args[0]}", args[1:], resilient_parsing=False)
    except TyperException as exc:
        return f"blackbox {shlex.join(args)}: {exc.format_message()}"
    return None


def options_of(command: str) -> set[str]:
    """Every option name ``blackbox COMMAND`` accepts."""
    group: Any = typer.main.get_command(cli)
    return {name for param in group.commands[command].params for name in getattr(param, "opts", ())}


def listening_problem(args: list[str]) -> str | None:
    """A service that listens beyond loopback must pass the command's gate for it, where it has one
    (``--allow-remote``: without it the command refuses to start on 0.0.0.0)."""
    beyond = any(a.startswith("0.0.0.0:") for a in args)
    if beyond and "--allow-remote" in options_of(args[0]) and "--allow-remote" not in args:
        return f"blackbox {shlex.join(args)} listens beyond loopback without --allow-remote"
    return None
