"""Console sessions and one-time sign-in links, kept server-side in ``<data_dir>/access/console.json``.

A browser holds only a random session secret (cookie); the file keeps its sha256, the caller it
stands for, which credential proved it (``token:<id>`` or ``link:<id>``) and when it expires. An
operator lists and revokes sessions; a session made from a token ends when that token is revoked.

A sign-in link (``blackbox demo`` prints one) carries a random code valid a few minutes and redeemable
once; only its sha256 is kept. Both live in a :class:`~consumers.access.files.JsonFile`, so
``blackbox demo`` can issue a link that a later ``blackbox serve`` redeems.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from consumers.access.files import JsonFile
from consumers.access.scopes import Caller, Scope, parse_scope
from producers.evidence.trust import format_time, parse_time
from schemas.errors import ContractError

__all__ = ["LINK_LIFETIME", "SESSION_LIFETIME", "ConsoleSession", "ConsoleSessions", "console_file"]

SESSION_LIFETIME = timedelta(hours=8)
LINK_LIFETIME = timedelta(minutes=15)
_MAX_KEPT = 2000  # ended sessions and used links beyond this are dropped from the file (newest kept)


def console_file(data_dir: Path) -> Path:
    return data_dir / "access" / "console.json"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """One signed-in browser, without its secret."""

    session_id: str
    caller: str
    scope: Scope
    credential: str
    created_at: datetime
    expires_at: datetime
    subjects: tuple[str, ...] = ()
    revoked_at: datetime | None = None

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= now else "active"

    def as_caller(self, reason: str = "") -> Caller:
        return Caller(identity=self.caller, scope=self.scope, reason=reason, subjects=self.subjects)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "caller": self.caller,
            "scope": self.scope,
            "credential": self.credential,
            "created_at": format_time(self.created_at),
            "expires_at": format_time(self.expires_at),
            "subjects": list(self.subjects),
            "revoked_at": None if self.revoked_at is None else format_time(self.revoked_at),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ConsoleSession:
        return cls(
            session_id=str(value["session_id"]),
            caller=str(value["caller"]),
            scope=parse_scope(str(value["scope"])),
            credential=str(value["credential"]),
            created_at=parse_time(value["created_at"]),
            expires_at=parse_time(value["expires_at"]),
            subjects=tuple(str(s) for s in value.get("subjects") or ()),
            revoked_at=None if value.get("revoked_at") is None else parse_time(value["revoked_at"]),
        )


class ConsoleSessions:
    """The sessions and sign-in links in ``path``; every method takes the time it is judged at."""

    def __init__(self, path: Path, *, lifetime: timedelta = SESSION_LIFETIME) -> None:
        self._file = JsonFile(path)
        self._lifetime = lifetime

    @property
    def lifetime(self) -> timedelta:
        return self._lifetime

    # -- sessions -----------------------------------------------------------------------------------
    def open(self, caller: Caller, *, credential: str, now: datetime) -> tuple[str, ConsoleSession]:
        """A new session for ``caller``; returns the cookie value (shown to the browser only) and the record."""
        session_id = secrets.token_hex(6)
        cookie = f"{session_id}.{secrets.token_urlsafe(32)}"
        record = ConsoleSession(
            session_id=session_id,
            caller=caller.identity,
            scope=caller.scope,
            credential=credential,
            created_at=now,
            expires_at=now + self._lifetime,
            subjects=caller.subjects,
        )

        def change(doc: dict[str, Any]) -> None:
            kept = [s for s in doc.get("sessions", []) if not _ended(s, now)]
            kept.append({**record.to_json(), "sha256": _digest(cookie)})
            doc["sessions"] = kept[-_MAX_KEPT:]

        self._file.update(change)
        return cookie, record

    def resolve(self, cookie: str, *, now: datetime) -> ConsoleSession | None:
        """The active session ``cookie`` names, or None (unknown, expired, revoked)."""
        session_id, sep, _ = cookie.partition(".")
        if not sep or not session_id:
            return None
        digest = _digest(cookie)
        for entry in self._file.read().get("sessions", []):
            if entry.get("session_id") == session_id and hmac.compare_digest(
                str(entry.get("sha256")), digest
            ):
                record = ConsoleSession.from_json(entry)
                return record if record.state(now) == "active" else None
        return None

    def list(self) -> list[ConsoleSession]:
        return [ConsoleSession.from_json(s) for s in self._file.read().get("sessions", [])]

    def revoke(self, session_id: str, *, now: datetime) -> ConsoleSession:
        def change(doc: dict[str, Any]) -> ConsoleSession:
            for entry in doc.get("sessions", []):
                if entry.get("session_id") == session_id:
                    if entry.get("revoked_at") is None:
                        entry["revoked_at"] = format_time(now)
                    return ConsoleSession.from_json(entry)
            raise ContractError(f"no session {session_id!r}", path="session")

        result: ConsoleSession = self._file.update(change)
        return result

    # -- one-time sign-in links ------------------------------------------------------------------------
    def issue_link(
        self, caller: Caller, *, now: datetime, lifetime: timedelta = LINK_LIFETIME
    ) -> tuple[str, datetime]:
        """A one-time code signing in as ``caller`` until ``now + lifetime``; the code is returned once."""
        link_id = secrets.token_hex(6)
        code = f"{link_id}.{secrets.token_urlsafe(24)}"
        expires = now + lifetime

        def change(doc: dict[str, Any]) -> None:
            kept = [link for link in doc.get("links", []) if parse_time(link["expires_at"]) > now]
            kept.append(
                {
                    "link_id": link_id,
                    "sha256": _digest(code),
                    "caller": caller.identity,
                    "scope": caller.scope,
                    "expires_at": format_time(expires),
                    "used_at": None,
                }
            )
            doc["links"] = kept[-_MAX_KEPT:]

        self._file.update(change)
        return code, expires

    def redeem_link(self, code: str, *, now: datetime) -> tuple[Caller, str] | None:
        """The caller a valid, unused ``code`` signs in (marking it used) and ``link:<id>``; else None."""
        link_id, sep, _ = code.partition(".")
        if not sep or not link_id:
            return None
        digest = _digest(code)

        def change(doc: dict[str, Any]) -> tuple[Caller, str] | None:
            for link in doc.get("links", []):
                if link.get("link_id") != link_id or not hmac.compare_digest(str(link.get("sha256")), digest):
                    continue
                if link.get("used_at") is not None or parse_time(link["expires_at"]) <= now:
                    return None
                link["used_at"] = format_time(now)
                caller = Caller(identity=str(link["caller"]), scope=parse_scope(str(link["scope"])))
                return caller, f"link:{link_id}"
            return None

        result: tuple[Caller, str] | None = self._file.update(change)
        return result


def _ended(entry: dict[str, Any], now: datetime) -> bool:
    """Ended a week ago: kept that long so an operator still sees what was revoked or ran out."""
    return parse_time(entry["expires_at"]) <= now - timedelta(days=7)
