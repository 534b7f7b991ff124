"""The gate and the caller as every command builds them from settings, so no command can skip the
grants file or log somewhere else."""

from __future__ import annotations

from pathlib import Path

from consumers.access.gate import AccessGate
from consumers.access.grants import Grants
from consumers.access.log import IndexAccessLog, TableWriter
from consumers.access.scopes import Caller, parse_scope
from producers.settings import BlackboxSettings


def grants_path(settings: BlackboxSettings) -> Path:
    return settings.data_dir / "grants.toml"


def gate_for(settings: BlackboxSettings, index: TableWriter, *, grants: Path | None = None) -> AccessGate:
    """The one gate: grants from ``grants`` or ``<data_dir>/grants.toml``, the log in the index."""
    return AccessGate(log=IndexAccessLog(index), grants=Grants.load(grants or grants_path(settings)))


def caller_for(settings: BlackboxSettings, *, reason: str) -> Caller:
    """The caller named by ``BLACKBOX_CALLER`` / ``BLACKBOX_SCOPE``, reading for ``reason``."""
    return Caller(identity=settings.caller, scope=parse_scope(settings.scope), reason=reason)
