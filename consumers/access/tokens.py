"""Bearer tokens for the audit endpoint: issued by an operator, shown once, stored hashed.

``blackbox access token create --caller NAME --scope SCOPE`` prints ``bbx_<id>_<secret>`` once: ``id``
is 12 hex characters that name the token in ``token list`` / ``token revoke`` and in the access log;
``secret`` is 32 random bytes (URL-safe base64). Only ``sha256(token)`` is kept, in
``<data_dir>/access/tokens.json`` (mode 0600) with the caller, scope, counterparty subjects, expiry
and revocation. The caller name and scope a token carries are the only identity the endpoint knows:
nothing a request says about itself is trusted.

A ``sender`` token (``--scope sender --agent ID…``) is for the OTLP receiver only: it may send spans
for the agent ids it names and nothing else, and reads no capture. It must name at least
one agent: a sender token bound to nothing is refused at creation.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from consumers.access.files import JsonFile, check_name
from consumers.access.scopes import Caller, Scope, parse_scope
from producers.evidence.trust import format_time, parse_time
from schemas.errors import ContractError

TOKEN_PREFIX = "bbx_"
SENDER: Literal["sender"] = "sender"
TokenScope = Scope | Literal["sender"]


def parse_token_scope(value: str) -> TokenScope:
    return SENDER if value == SENDER else parse_scope(value)


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One issued token, without the token itself."""

    token_id: str
    caller: str
    scope: TokenScope
    sha256: str
    created_at: datetime
    subjects: tuple[str, ...] = ()
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    created_by: str = ""
    agents: tuple[str, ...] = ()  # the agent ids a sender token may send for

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:  # a revocation is an act, effective at once whatever the clock
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def caller_for(self, reason: str = "") -> Caller:
        if self.scope == SENDER:
            raise ContractError("a sender token sends OTLP spans; it reads no capture", path="token")
        return Caller(identity=self.caller, scope=self.scope, reason=reason, subjects=self.subjects)

    def may_send_for(self, agent_id: str) -> bool:
        """Whether this (sender) token may file decisions under ``agent_id``."""
        return self.scope == SENDER and any(fnmatchcase(agent_id, pattern) for pattern in self.agents)

    def to_json(self) -> dict[str, Any]:
        return {
            "token_id": self.token_id,
            "caller": self.caller,
            "scope": self.scope,
            "sha256": self.sha256,
            "created_at": format_time(self.created_at),
            "subjects": list(self.subjects),
            "expires_at": None if self.expires_at is None else format_time(self.expires_at),
            "revoked_at": None if self.revoked_at is None else format_time(self.revoked_at),
            "created_by": self.created_by,
            **({"agents": list(self.agents)} if self.agents else {}),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TokenRecord:
        return cls(
            token_id=str(value["token_id"]),
            caller=str(value["caller"]),
            scope=parse_token_scope(str(value["scope"])),
            sha256=str(value["sha256"]),
            created_at=parse_time(value["created_at"]),
            subjects=tuple(str(s) for s in value.get("subjects") or ()),
            expires_at=None if value.get("expires_at") is None else parse_time(value["expires_at"]),
            revoked_at=None if value.get("revoked_at") is None else parse_time(value["revoked_at"]),
            created_by=str(value.get("created_by", "")),
            agents=tuple(str(a) for a in value.get("agents") or ()),
        )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """The issued tokens in ``path`` (``<data_dir>/access/tokens.json``), re-read when it changes."""

    def __init__(self, path: Path) -> None:
        self._file = JsonFile(path)

    @property
    def path(self) -> Path:
        return self._file.path

    def create(
        self,
        *,
        caller: str,
        scope: str,
        now: datetime,
        subjects: tuple[str, ...] = (),
        expires_at: datetime | None = None,
        created_by: str = "",
        agents: tuple[str, ...] = (),
    ) -> tuple[str, TokenRecord]:
        """A new token and its record; the token text is returned once and never stored."""
        check_name(caller, what="--caller")
        for subject in subjects:
            check_name(subject, what="--subject")
        if subjects and scope != "counterparty":
            raise ContractError(
                "--subject ties a counterparty to its decisions; only for --scope counterparty"
            )
        for agent in agents:
            check_name(agent, what="--agent")
        if scope == SENDER and not agents:
            raise ContractError(
                "a sender token names the agent ids it may send spans for: --agent ID (repeatable)",
                path="--agent",
            )
        if agents and scope != SENDER:
            raise ContractError("--agent binds an OTLP sender token; only for --scope sender", path="--agent")
        token_id = secrets.token_hex(6)
        token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        record = TokenRecord(
            token_id=token_id,
            caller=caller,
            scope=parse_token_scope(scope),
            sha256=_digest(token),
            created_at=now,
            subjects=subjects,
            expires_at=expires_at,
            created_by=created_by,
            agents=agents,
        )
        self._file.update(lambda doc: doc.setdefault("tokens", []).append(record.to_json()))
        return token, record

    def list(self) -> list[TokenRecord]:
        return [TokenRecord.from_json(t) for t in self._file.read().get("tokens", [])]

    def revoke(self, token_id: str, *, now: datetime) -> TokenRecord:
        def change(doc: dict[str, Any]) -> TokenRecord:
            for entry in doc.get("tokens", []):
                if entry.get("token_id") == token_id:
                    if entry.get("revoked_at") is None:
                        entry["revoked_at"] = format_time(now)
                    return TokenRecord.from_json(entry)
            raise ContractError(f"no token {token_id!r} (see `blackbox access token list`)", path="token")

        result: TokenRecord = self._file.update(change)
        return result

    def resolve(self, token: str, *, now: datetime) -> tuple[TokenRecord | None, str]:
        """The active record ``token`` names, or None and why not (never which part was wrong beyond
        "unknown", "expired" or "revoked")."""
        if not token.startswith(TOKEN_PREFIX) or token.count("_") < 2:
            return None, "not a blackbox token"
        token_id = token[len(TOKEN_PREFIX) :].split("_", 1)[0]
        digest = _digest(token)
        for record in self.list():
            if record.token_id == token_id and hmac.compare_digest(record.sha256, digest):
                state = record.state(now)
                return (record, "") if state == "active" else (None, f"token {state}")
        return None, "unknown token"
