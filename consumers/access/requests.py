"""Access requests with authority: a regulator or counterparty asks, an operator approves or refuses.

A request names the decisions (ids, or an agent and a capture-time range), the authority (legal
basis and reference) and the purpose. It is kept in ``<data_dir>/access/requests.json``. Approving it
appends one grant to the grants file (:func:`consumers.access.grants.append_grant`) carrying the
request id, authority, purpose, approver and an expiry; refusing records who and why. Both are
logged in the access log first (:mod:`consumers.access.desk`), so a grant is a later,
logged decision by an operator (DESIGN decision 14).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from consumers.access.files import JsonFile
from consumers.access.grants import Grant, append_grant
from consumers.access.scopes import Scope, parse_scope
from producers.evidence.trust import format_time, parse_time
from schemas.errors import ContractError

Status = Literal["pending", "approved", "refused"]
MAX_DECISIONS = 1000


@dataclass(frozen=True, slots=True)
class AccessRequest:
    request_id: str
    caller: str
    scope: Scope
    legal_basis: str
    reference: str
    purpose: str
    created_at: datetime
    decisions: tuple[str, ...] = ()
    agent: str = ""
    since: datetime | None = None
    until: datetime | None = None
    status: Status = "pending"
    decided_by: str = ""
    decided_at: datetime | None = None
    decision_reason: str = ""
    grant_expires: datetime | None = None

    @property
    def authority(self) -> str:
        return f"{self.legal_basis}; ref {self.reference}"

    def grant(self) -> Grant:
        """The grant an approval of this request creates."""
        return Grant(
            caller=self.caller,
            scope=self.scope,
            agents=(self.agent,) if self.agent else ("*",),
            decisions=self.decisions or ("*",),
            expires=self.grant_expires,
            captured_from=self.since,
            captured_until=self.until,
            request=self.request_id,
            authority=self.authority,
            purpose=self.purpose,
            approved_by=self.decided_by,
            label=self.request_id,
        )

    def to_json(self) -> dict[str, Any]:
        def t(value: datetime | None) -> str | None:
            return None if value is None else format_time(value)

        return {
            "id": self.request_id,
            "caller": self.caller,
            "scope": self.scope,
            "decisions": list(self.decisions),
            "agent": self.agent or None,
            "since": t(self.since),
            "until": t(self.until),
            "authority": {"legalBasis": self.legal_basis, "reference": self.reference},
            "purpose": self.purpose,
            "status": self.status,
            "createdAt": t(self.created_at),
            "decidedBy": self.decided_by or None,
            "decidedAt": t(self.decided_at),
            "decisionReason": self.decision_reason or None,
            "grantExpires": t(self.grant_expires),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> AccessRequest:
        def t(name: str) -> datetime | None:
            return None if value.get(name) is None else parse_time(value[name])

        authority = value.get("authority") or {}
        return cls(
            request_id=str(value["id"]),
            caller=str(value["caller"]),
            scope=parse_scope(str(value["scope"])),
            legal_basis=str(authority.get("legalBasis", "")),
            reference=str(authority.get("reference", "")),
            purpose=str(value.get("purpose", "")),
            created_at=parse_time(value["createdAt"]),
            decisions=tuple(str(d) for d in value.get("decisions") or ()),
            agent=str(value.get("agent") or ""),
            since=t("since"),
            until=t("until"),
            status=value.get("status", "pending"),
            decided_by=str(value.get("decidedBy") or ""),
            decided_at=t("decidedAt"),
            decision_reason=str(value.get("decisionReason") or ""),
            grant_expires=t("grantExpires"),
        )


def new_request(
    *,
    caller: str,
    scope: Scope,
    legal_basis: str,
    reference: str,
    purpose: str,
    now: datetime,
    decisions: tuple[str, ...] = (),
    agent: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> AccessRequest:
    """A pending request, checked: it names decisions or an agent with a time range, and its authority."""
    if scope == "operator":
        raise ContractError(
            "operators read under the default grant; access requests are for regulators and counterparties",
            path="scope",
        )
    for name, value in (
        ("authority.legalBasis", legal_basis),
        ("authority.reference", reference),
        ("purpose", purpose),
    ):
        if not value.strip():
            raise ContractError("is required", path=name)
    if decisions and agent:
        raise ContractError("name decisions by ids, or by agent and time range, not both", path="decisions")
    if not decisions and not (agent and since and until):
        raise ContractError("name the decisions: ids, or an agent with since and until", path="decisions")
    if len(decisions) > MAX_DECISIONS:
        raise ContractError(f"at most {MAX_DECISIONS} decision ids per request", path="decisions")
    if any(not d or any(c in d for c in "*?[]") for d in decisions):
        raise ContractError("decision ids are exact ids, no patterns", path="decisions")
    if agent and any(c in agent for c in "*?[]"):
        raise ContractError("the agent is an exact agent id, no pattern", path="agent")
    if since is not None and until is not None and until <= since:
        raise ContractError("until must be later than since", path="until")
    return AccessRequest(
        request_id=f"req_{secrets.token_hex(8)}",
        caller=caller,
        scope=scope,
        legal_basis=legal_basis.strip(),
        reference=reference.strip(),
        purpose=purpose.strip(),
        created_at=now,
        decisions=decisions,
        agent=agent,
        since=since,
        until=until,
    )


class AccessRequests:
    """The requests in ``path``; approvals append their grant to ``grants``."""

    def __init__(self, path: Path, *, grants: Path) -> None:
        self._file = JsonFile(path)
        self.grants_path = grants

    def add(self, request: AccessRequest) -> AccessRequest:
        self._file.update(lambda doc: doc.setdefault("requests", []).append(request.to_json()))
        return request

    def list(self) -> list[AccessRequest]:
        return [AccessRequest.from_json(r) for r in self._file.read().get("requests", [])]

    def get(self, request_id: str) -> AccessRequest:
        for request in self.list():
            if request.request_id == request_id:
                return request
        raise ContractError(
            f"no access request {request_id!r} (see `blackbox access requests`)", path="request"
        )

    def decide(
        self,
        request_id: str,
        *,
        approve: bool,
        by: str,
        reason: str,
        now: datetime,
        expires: datetime | None = None,
    ) -> AccessRequest:
        """Approve (append the grant, expiring at ``expires``) or refuse a pending request."""
        if not reason.strip():
            raise ContractError("a decision on an access request needs a stated reason", path="--reason")
        if approve and (expires is None or expires <= now):
            raise ContractError("an approved grant needs an expiry in the future", path="--expires")

        def change(doc: dict[str, Any]) -> AccessRequest:
            entries = doc.get("requests", [])
            for i, entry in enumerate(entries):
                if entry.get("id") != request_id:
                    continue
                request = AccessRequest.from_json(entry)
                if request.status != "pending":
                    raise ContractError(
                        f"request {request_id} was already {request.status} by {request.decided_by}",
                        path="request",
                    )
                decided = replace(
                    request,
                    status="approved" if approve else "refused",
                    decided_by=by,
                    decided_at=now,
                    decision_reason=reason.strip(),
                    grant_expires=expires if approve else None,
                )
                if approve:  # the grant names its request, so it stays traceable if the rewrite below fails
                    append_grant(self.grants_path, decided.grant())
                entries[i] = decided.to_json()
                return decided
            raise ContractError(f"no access request {request_id!r}", path="request")

        result: AccessRequest = self._file.update(change)
        return result
