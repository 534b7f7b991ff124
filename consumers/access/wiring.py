"""The gate and the caller as the runtime (:mod:`consumers.app.runtime`) builds them from settings, so
no command can skip the grants file or log somewhere else."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from consumers.access.gate import AccessGate
from consumers.access.grants import Grants
from consumers.access.log import IndexAccessLog, TableWriter
from consumers.access.scopes import Caller, parse_scope


class AccessSettings(Protocol):
    """The settings access reads (the services' settings, :mod:`consumers.app.settings`)."""

    @property
    def data_dir(self) -> Path: ...
    @property
    def caller(self) -> str: ...
    @property
    def scope(self) -> str: ...


def grants_path(settings: AccessSettings) -> Path:
    return settings.data_dir / "grants.toml"


def gate_for(settings: AccessSettings, index: TableWriter, *, grants: Path | None = None) -> AccessGate:
    """The one gate: grants from ``grants`` or ``<data_dir>/grants.toml``, the log in the index."""
    return AccessGate(log=IndexAccessLog(index), grants=Grants.load(grants or grants_path(settings)))


def caller_for(settings: AccessSettings, *, reason: str) -> Caller:
    """The caller named by ``BLACKBOX_CALLER`` / ``BLACKBOX_SCOPE``, reading for ``reason``."""
    return Caller(identity=settings.caller, scope=parse_scope(settings.scope), reason=reason)
