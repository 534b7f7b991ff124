"""The one gate every read of capture content passes (DESIGN decision 12).

:meth:`AccessGate.authorize` checks the caller's scope against the scopes the capture admits and
against the grants, appends a row to the access log (allowed *or* denied), and only then lets the
read proceed. If the row cannot be written the read is refused: no unlogged access exists.

Replay access is audit-only: the gate reads nothing but the capture's metadata and writes nothing
but the log; it never promotes, re-scores or changes retention.

Who may read (DESIGN decision 14): the capture's signed ``replayAccessScope`` is the default (the
implicit operator grant covers only captures that admit ``operator``); an explicit grant — written in
the grants file or made by approving an access request — widens access after capture and is named in
the log row with its authority and purpose. A counterparty additionally sees only decisions tied to
its own identity: the capture's ``input.originUserId`` must match one of its subjects (a capture that
signs it as a salted commitment is matched on the raw id the vault opens; after erasure, on none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

from consumers.access.grants import Grant, Grants, GrantSource
from consumers.access.log import AccessLog, AccessRecord
from consumers.access.scopes import Caller, capture_scopes
from producers.evidence.trust import parse_time
from schemas.errors import AccessDenied

# "reveal": the sealed original of redacted personal data (needs a personal-data grant)
READ_ACTIONS = frozenset(
    {"replay", "replay-live", "show", "export", "verify", "evaluate", "replays", "reveal"}
)
# reads of an agent as a whole (no capture content): "record", its behavioural record
AGENT_ACTIONS = frozenset({"record"})


class AccessLogUnavailable(AccessDenied):
    """The access log could not be written, so the read is refused."""


@dataclass(frozen=True, slots=True)
class LiveAuthorization:
    """Proof that an operator authorized live tool calls for one decision, and that it was logged."""

    caller: str
    decision_id: str
    reason: str
    granted_at: datetime


def _utc_now() -> datetime:
    return datetime.now(UTC)


class AccessGate:
    """Scope + grant check, then an access-log row, then (only then) the read."""

    def __init__(
        self,
        *,
        log: AccessLog,
        grants: GrantSource | None = None,
        clock: Callable[[], datetime] = _utc_now,
        origin_of: Callable[[Mapping[str, Any]], str | None] | None = None,
    ) -> None:
        self._log = log
        self._grants: GrantSource = grants or Grants.default()
        self._clock = clock
        # the raw originUserId of a capture that signs it as a commitment (consumers.privacy.identifiers)
        self._origin_of = origin_of or _signed_origin

    @property
    def clock(self) -> Callable[[], datetime]:
        return self._clock

    @property
    def grants(self) -> Grants:
        """The grants as they are now (a grants file is re-read when it changed)."""
        return self._grants.current()

    def record(self, records: Sequence[AccessRecord]) -> None:
        """Append ``records`` (events that are not reads: access requests, approvals, refusals before
        any capture was looked at); raises :class:`AccessLogUnavailable` if the log cannot be written."""
        try:
            self._log.append(records)
        except Exception as exc:  # any failure to write the log refuses what it records
            raise AccessLogUnavailable(
                f"access refused: the access log could not be written ({type(exc).__name__}: {exc})"
            ) from exc

    def authorize(
        self, caller: Caller, capture: Mapping[str, Any], *, action: str = "replay"
    ) -> AccessRecord:
        """Log and allow one read, or log and raise :class:`AccessDenied`."""
        record = self.authorize_many(caller, [capture], action=action)[0]
        raise_if_denied(record)
        return record

    def authorize_many(
        self,
        caller: Caller,
        captures: Sequence[Mapping[str, Any]],
        *,
        action: str = "replay",
        detail: str = "",
    ) -> list[AccessRecord]:
        """Decide for each capture and log every decision in one write; denied ones are returned, not raised.

        Raises :class:`AccessLogUnavailable` (refusing all of them) if the log write fails.
        """
        if action not in READ_ACTIONS:
            raise ValueError(f"unknown access action {action!r}")
        at = self._clock()
        grants = self._grants.current()
        records = [
            self._decide(caller, capture, grants=grants, action=action, at=at, detail=detail)
            for capture in captures
        ]
        self.record(records)
        return records

    def authorize_agent(
        self, caller: Caller, agent_id: str, *, action: str = "record", detail: str = ""
    ) -> AccessRecord:
        """Log and allow a read of ``agent_id`` as a whole (figures over its decisions, no content),
        or log and raise :class:`AccessDenied`: an operator under the grants (the implicit one
        included); anyone else only under an explicit grant that names this agent
        (:meth:`~consumers.access.grants.Grants.names_agent`)."""
        if action not in AGENT_ACTIONS:
            raise ValueError(f"unknown agent action {action!r}")
        at = self._clock()
        grants = self._grants.current()
        if caller.scope == "operator":
            grant = grants.match(
                caller, agent_id=agent_id, decision_id="", at=at, admitted=frozenset({"operator"})
            )
        else:
            grant = grants.names_agent(caller, agent_id=agent_id, at=at)
        why = (
            ""
            if grant is not None
            else f"no grant names agent {agent_id} for {caller.identity} as {caller.scope} ({grants.source})"
        )
        record = AccessRecord(
            at=at,
            caller=caller.identity,
            scope=caller.scope,
            decision_id="",
            agent_id=agent_id,
            action=action,
            reason=caller.reason,
            outcome="denied" if why else "allowed",
            detail="; ".join(p for p in (detail, why) if p),
            **_grant_columns(grant),
        )
        self.record([record])
        raise_if_denied(record)
        return record

    def judge_many(
        self, caller: Caller, captures: Sequence[Mapping[str, Any]], *, action: str = "show"
    ) -> list[AccessRecord]:
        """Decide for each capture WITHOUT logging: for narrowing a list of decisions (metadata only)
        to what the caller's scope allows; the caller logs the listing itself as one row, and every
        later read of content passes :meth:`authorize`."""
        if action not in READ_ACTIONS:
            raise ValueError(f"unknown access action {action!r}")
        at = self._clock()
        grants = self._grants.current()
        return [self._decide(caller, c, grants=grants, action=action, at=at, detail="") for c in captures]

    def authorize_live(self, caller: Caller, capture: Mapping[str, Any], *, reason: str) -> LiveAuthorization:
        """Authorize live tool calls for one decision: operator scope, a stated reason, logged first."""
        live_caller = Caller(identity=caller.identity, scope=caller.scope, reason=reason)
        record = self.authorize(live_caller, capture, action="replay-live")
        return LiveAuthorization(
            caller=caller.identity, decision_id=record.decision_id, reason=reason, granted_at=record.at
        )

    def _decide(
        self,
        caller: Caller,
        capture: Mapping[str, Any],
        *,
        grants: Grants,
        action: str,
        at: datetime,
        detail: str,
    ) -> AccessRecord:
        decision_id = str(capture.get("decisionId") or "")
        agent_id = str(capture.get("agentId") or "")
        admitted = capture_scopes(capture)
        grant = grants.match(
            caller,
            agent_id=agent_id,
            decision_id=decision_id,
            at=at,
            captured_at=_captured_at(capture),
            admitted=admitted,
        )
        why = ""
        if grant is None and caller.scope not in admitted:
            why = (
                f"the capture admits scope {'|'.join(sorted(admitted))}, not {caller.scope}, "
                f"and no grant widens it ({grants.source})"
            )
        elif grant is None:
            why = f"no grant for {caller.identity} as {caller.scope} over agent {agent_id} ({grants.source})"
        elif caller.scope == "counterparty" and not _tied(caller, self._origin_of(capture)):
            why = f"the decision is not tied to counterparty {caller.identity} (originUserId)"
        elif action == "reveal" and not grants.reveals(
            caller, agent_id=agent_id, decision_id=decision_id, at=at, captured_at=_captured_at(capture)
        ):
            why = f"revealing personal data needs a grant with personal_data = true ({grants.source})"
        elif action == "replay-live" and caller.scope != "operator":
            why = "live replay can change real state; only an operator may authorize it"
        elif action == "replay-live" and not caller.reason.strip():
            why = "live replay needs a stated reason (--authorize REASON)"
        return AccessRecord(
            at=at,
            caller=caller.identity,
            scope=caller.scope,
            decision_id=decision_id,
            agent_id=agent_id,
            action=action,
            reason=caller.reason,
            outcome="denied" if why else "allowed",
            detail="; ".join(p for p in (detail, why) if p),
            **_grant_columns(grant),
        )


def _grant_columns(grant: Grant | None) -> dict[str, str]:
    if grant is None:
        return {}
    return {"grant_id": grant.label, "authority": grant.authority, "purpose": grant.purpose}


def _captured_at(capture: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_time(capture.get("capturedAt"))
    except ValueError:
        return None


def _signed_origin(capture: Mapping[str, Any]) -> str | None:
    origin = (capture.get("input") or {}).get("originUserId")
    return origin if isinstance(origin, str) else None


def _tied(caller: Caller, origin: str | None) -> bool:
    """Whether the capture concerns the counterparty: its raw ``originUserId`` matches a subject."""
    return (
        isinstance(origin, str)
        and bool(origin)
        and any(fnmatchcase(origin, pattern) for pattern in caller.counterparty_subjects())
    )


def denial(record: AccessRecord) -> AccessDenied:
    """The error a denied record stands for."""
    return AccessDenied(
        f"{record.caller} ({record.scope}) may not {record.action} {record.decision_id}: {record.detail}"
    )


def raise_if_denied(record: AccessRecord) -> None:
    if record.outcome == "denied":
        raise denial(record)
