"""Grants: which caller holds which scope over which agents (and, for counterparties, decisions).

A grants file is TOML::

    [[grant]]
    caller = "sre-team"          # identity, or "*" for anyone
    scope = "operator"
    agents = ["agt_support_*"]   # fnmatch patterns over agentId
    decisions = ["dec_*"]        # optional: restrict to decision ids (counterparty disputes)
    expires = 2027-01-01T00:00:00Z   # optional

With no grants file (embedded, single-user mode) one implicit grant applies: anyone in scope
``operator`` over every agent. Regulators and counterparties always need an explicit grant.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from consumers.access.scopes import Caller, Scope, parse_scope
from schemas.errors import ContractError


@dataclass(frozen=True, slots=True)
class Grant:
    caller: str
    scope: Scope
    agents: tuple[str, ...] = ("*",)
    decisions: tuple[str, ...] = ("*",)
    expires: datetime | None = None

    def permits(self, caller: Caller, *, agent_id: str, decision_id: str, at: datetime) -> bool:
        return (
            self.scope == caller.scope
            and fnmatchcase(caller.identity, self.caller)
            and any(fnmatchcase(agent_id, p) for p in self.agents)
            and any(fnmatchcase(decision_id, p) for p in self.decisions)
            and (self.expires is None or at < self.expires)
        )


@dataclass(frozen=True, slots=True)
class Grants:
    grants: tuple[Grant, ...]
    source: str = "built-in default"

    @classmethod
    def default(cls) -> Grants:
        return cls(grants=(Grant(caller="*", scope="operator"),))

    @classmethod
    def load(cls, path: Path | None) -> Grants:
        """The grants in ``path``; the built-in default when ``path`` is None or does not exist."""
        if path is None or not path.exists():
            return cls.default()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ContractError(f"cannot read grants {path}: {exc}", path=str(path)) from exc
        return cls(
            grants=tuple(_grant(g, i) for i, g in enumerate(data.get("grant") or ())), source=str(path)
        )

    def permits(self, caller: Caller, *, agent_id: str, decision_id: str, at: datetime) -> bool:
        return any(g.permits(caller, agent_id=agent_id, decision_id=decision_id, at=at) for g in self.grants)


def _grant(value: Mapping[str, Any], i: int) -> Grant:
    try:
        expires = value.get("expires")
        if isinstance(expires, datetime) and expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        return Grant(
            caller=str(value["caller"]),
            scope=parse_scope(str(value["scope"])),
            agents=_patterns(value.get("agents", ["*"])),
            decisions=_patterns(value.get("decisions", ["*"])),
            expires=expires if isinstance(expires, datetime) else None,
        )
    except KeyError as exc:
        raise ContractError(f"grant is missing {exc.args[0]!r}", path=f"grant[{i}]") from exc


def _patterns(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    raise ContractError("expected a pattern or a list of patterns", path="grant")
