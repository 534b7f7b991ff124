"""Grants: which caller holds which scope over which agents, decisions and capture times.

A grants file is TOML::

    [[grant]]
    caller = "sre-team"          # identity, or "*" for anyone
    scope = "operator"
    agents = ["agt_support_*"]   # fnmatch patterns over agentId
    decisions = ["dec_*"]        # optional: restrict to decision ids (counterparty disputes)
    captured_from = 2026-07-01T00:00:00Z    # optional: only captures at or after this capturedAt
    captured_until = 2026-08-01T00:00:00Z   # optional: only captures before this capturedAt
    expires = 2027-01-01T00:00:00Z   # optional
    # written by `blackbox access approve` (an approved access request), shown in the access log:
    request = "req_..."          # the request this grant came from
    authority = "FCA s.165 notice; ref FCA-2026-0042"
    purpose = "complaint review"
    approved_by = "ops-lead"
    personal_data = true         # optional: may also reveal the original of redacted personal data

A grant is a decision an operator took after capture, so it *widens* access beyond the capture's
signed ``replayAccessScope`` (DESIGN decision 14): a regulator holding a grant reads a capture that
admits only ``operator``. The capture's scope is the default: the one implicit grant — anyone in scope
``operator`` over every agent, for captures that admit ``operator`` — applies with no grants file and
with a file that holds no operator grant (so a file with only regulator grants does not lock the
operators out). Once the file names an operator grant, it governs operators too. Regulators and
counterparties always need an explicit grant.

The file is re-read when it changes (:class:`GrantsFile`), so a grant approved while ``blackbox serve``
runs applies to its next request; :func:`append_grant` adds one under a lock, never rewriting the rest.
"""

from __future__ import annotations

import fcntl
import os
import threading
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Protocol

from consumers.access.scopes import Caller, Scope, parse_scope
from producers.evidence.trust import _toml_string, format_time
from schemas.errors import ContractError

DEFAULT_GRANT_LABEL = "default (the capture's replayAccessScope)"


@dataclass(frozen=True, slots=True)
class Grant:
    caller: str
    scope: Scope
    agents: tuple[str, ...] = ("*",)
    decisions: tuple[str, ...] = ("*",)
    expires: datetime | None = None
    captured_from: datetime | None = None
    captured_until: datetime | None = None
    request: str = ""
    authority: str = ""
    purpose: str = ""
    approved_by: str = ""
    personal_data: bool = False  # reveals the sealed original of redacted parts (DESIGN decision 16)
    implicit: bool = False  # the built-in default: admits only what the capture's scope admits
    label: str = ""  # how the access log names it

    def permits(
        self,
        caller: Caller,
        *,
        agent_id: str,
        decision_id: str,
        at: datetime,
        captured_at: datetime | None = None,
    ) -> bool:
        return (
            self.scope == caller.scope
            and fnmatchcase(caller.identity, self.caller)
            and any(fnmatchcase(agent_id, p) for p in self.agents)
            and any(fnmatchcase(decision_id, p) for p in self.decisions)
            and (self.expires is None or at < self.expires)
            and _within(captured_at, self.captured_from, self.captured_until)
        )


def _within(moment: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if start is None and end is None:
        return True
    if moment is None:  # a bounded grant never covers a capture whose time is unknown
        return False
    return (start is None or moment >= start) and (end is None or moment < end)


IMPLICIT_OPERATOR = Grant(caller="*", scope="operator", implicit=True, label=DEFAULT_GRANT_LABEL)


@dataclass(frozen=True, slots=True)
class Grants:
    grants: tuple[Grant, ...]
    source: str = "built-in default"

    @classmethod
    def default(cls) -> Grants:
        return cls(grants=(IMPLICIT_OPERATOR,))

    @classmethod
    def load(cls, path: Path | None) -> Grants:
        """The grants in ``path``; the built-in default when ``path`` is None or does not exist."""
        if path is None or not path.exists():
            return cls.default()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ContractError(f"cannot read grants {path}: {exc}", path=str(path)) from exc
        grants = [_grant(g, i, path) for i, g in enumerate(data.get("grant") or ())]
        if not any(g.scope == "operator" for g in grants):
            grants.append(IMPLICIT_OPERATOR)
        return cls(grants=tuple(grants), source=str(path))

    def current(self) -> Grants:
        return self

    def match(
        self,
        caller: Caller,
        *,
        agent_id: str,
        decision_id: str,
        at: datetime,
        captured_at: datetime | None = None,
        admitted: frozenset[str] | None = None,
    ) -> Grant | None:
        """The first grant that lets ``caller`` read the decision; an implicit grant only where the
        capture's scope (``admitted``; None: not known, so not admitted) includes the caller's."""
        for grant in self.grants:
            if grant.implicit and (admitted is None or caller.scope not in admitted):
                continue
            if grant.permits(
                caller, agent_id=agent_id, decision_id=decision_id, at=at, captured_at=captured_at
            ):
                return grant
        return None

    def permits(self, caller: Caller, *, agent_id: str, decision_id: str, at: datetime) -> bool:
        """Whether any grant names ``caller`` over the decision (capture scope not considered)."""
        return any(g.permits(caller, agent_id=agent_id, decision_id=decision_id, at=at) for g in self.grants)

    def names_agent(self, caller: Caller, *, agent_id: str, at: datetime) -> Grant | None:
        """The first explicit, unexpired grant of ``caller``'s identity and scope whose agent patterns
        name ``agent_id`` by something narrower than ``*`` (what an agent-wide read, such as its
        behavioural record, needs from anyone but an operator)."""
        for grant in self.grants:
            if (
                not grant.implicit
                and grant.scope == caller.scope
                and fnmatchcase(caller.identity, grant.caller)
                and (grant.expires is None or at < grant.expires)
                and any(p != "*" and fnmatchcase(agent_id, p) for p in grant.agents)
            ):
                return grant
        return None

    def reveals(
        self,
        caller: Caller,
        *,
        agent_id: str,
        decision_id: str,
        at: datetime,
        captured_at: datetime | None = None,
    ) -> bool:
        """Whether a grant with ``personal_data = true`` names ``caller`` over the decision."""
        return any(
            g.personal_data
            and g.permits(caller, agent_id=agent_id, decision_id=decision_id, at=at, captured_at=captured_at)
            for g in self.grants
        )


class GrantSource(Protocol):
    """Grants as they are now: a fixed :class:`Grants`, or a :class:`GrantsFile` re-read on change."""

    def current(self) -> Grants: ...


class GrantsFile:
    """``path`` re-read whenever its size or mtime changes (an approval made by another process)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._grants = Grants.default()

    def current(self) -> Grants:
        try:
            info = self.path.stat()
            stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp or stamp is None:
                self._grants = Grants.load(self.path)
                self._stamp = stamp
            return self._grants


def _grant(value: Mapping[str, Any], i: int, path: Path) -> Grant:
    where = f"grant[{i}]"
    try:
        return Grant(
            caller=str(value["caller"]),
            scope=parse_scope(str(value["scope"])),
            agents=_patterns(value.get("agents", ["*"])),
            decisions=_patterns(value.get("decisions", ["*"])),
            expires=_time(value.get("expires"), f"{where}.expires"),
            captured_from=_time(value.get("captured_from"), f"{where}.captured_from"),
            captured_until=_time(value.get("captured_until"), f"{where}.captured_until"),
            request=str(value.get("request", "")),
            authority=str(value.get("authority", "")),
            purpose=str(value.get("purpose", "")),
            approved_by=str(value.get("approved_by", "")),
            personal_data=_flag(value.get("personal_data", False), f"{where}.personal_data"),
            label=str(value.get("request") or f"{path.name}#{where}"),
        )
    except KeyError as exc:
        raise ContractError(f"grant is missing {exc.args[0]!r}", path=where) from exc


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ContractError(f"expected true or false, got {value!r}", path=where)
    return value


def _time(value: object, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ContractError(f"expected a TOML date-time, got {value!r}", path=where)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _patterns(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    raise ContractError("expected a pattern or a list of patterns", path="grant")


# -- writing: one grant appended, under a lock, the file's other lines untouched ------------------------
@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def grant_toml(grant: Grant) -> str:
    """``grant`` as one ``[[grant]]`` table."""
    lines = [
        "[[grant]]",
        f"caller = {_toml_string(grant.caller)}",
        f"scope = {_toml_string(grant.scope)}",
        f"agents = [{', '.join(_toml_string(a) for a in grant.agents)}]",
        f"decisions = [{', '.join(_toml_string(d) for d in grant.decisions)}]",
    ]
    for name in ("captured_from", "captured_until", "expires"):
        moment = getattr(grant, name)
        if moment is not None:
            lines.append(f"{name} = {format_time(moment)}")
    for name in ("request", "authority", "purpose", "approved_by"):
        if getattr(grant, name):
            lines.append(f"{name} = {_toml_string(getattr(grant, name))}")
    if grant.personal_data:
        lines.append("personal_data = true")
    return "\n".join(lines) + "\n"


def append_grant(path: Path, grant: Grant) -> None:
    """Append ``grant`` to the grants file (created if missing), fsync'd, under a lock; the file is
    parsed again afterwards so a grant that would make it unreadable is never left behind."""
    block = grant_toml(grant)
    with file_lock(path.with_name(f".{path.name}.lock")):
        before = path.read_bytes() if path.exists() else b""
        separator = (
            b"" if not before or before.endswith(b"\n\n") else (b"\n" if before.endswith(b"\n") else b"\n\n")
        )
        with path.open("ab") as fh:
            fh.write(separator + block.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            Grants.load(path)
        except ContractError:
            with path.open("r+b") as fh:  # put the file back as it was
                fh.truncate(len(before))
                fh.flush()
                os.fsync(fh.fileno())
            raise
