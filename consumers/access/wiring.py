"""The gate and the caller as the runtime (:mod:`consumers.app.runtime`) builds them from settings, so
no command can skip the grants file or log somewhere else."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from consumers.access.desk import AccessDesk
from consumers.access.gate import AccessGate, _utc_now
from consumers.access.grants import GrantsFile
from consumers.access.log import IndexAccessLog, LogTable
from consumers.access.requests import AccessRequests
from consumers.access.scopes import Caller, parse_scope
from consumers.access.tokens import TokenStore


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


def access_dir(settings: AccessSettings) -> Path:
    """Where tokens and access requests are kept: ``<data_dir>/access``."""
    return settings.data_dir / "access"


def gate_for(
    settings: AccessSettings,
    index: LogTable,
    *,
    grants: Path | None = None,
    clock: Callable[[], datetime] = _utc_now,
    origin_of: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> AccessGate:
    """The one gate: grants from ``grants`` or ``<data_dir>/grants.toml`` (re-read when the file
    changes), the log in the index; ``origin_of`` opens committed origin ids for counterparties."""
    return AccessGate(
        log=IndexAccessLog(index),
        grants=GrantsFile(grants or grants_path(settings)),
        clock=clock,
        origin_of=origin_of,
    )


def desk_for(settings: AccessSettings, gate: AccessGate, *, grants: Path | None = None) -> AccessDesk:
    """Access requests in ``<data_dir>/access/requests.json``; approvals append to the grants file."""
    requests = AccessRequests(access_dir(settings) / "requests.json", grants=grants or grants_path(settings))
    return AccessDesk(gate=gate, requests=requests)


def tokens_for(settings: AccessSettings) -> TokenStore:
    """The audit endpoint's bearer tokens: ``<data_dir>/access/tokens.json`` (hashes only)."""
    return TokenStore(access_dir(settings) / "tokens.json")


def caller_for(settings: AccessSettings, *, reason: str) -> Caller:
    """The caller named by ``BLACKBOX_CALLER`` / ``BLACKBOX_SCOPE``, reading for ``reason``."""
    return Caller(identity=settings.caller, scope=parse_scope(settings.scope), reason=reason)
