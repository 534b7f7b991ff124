"""The access desk: filing, approving and refusing access requests, each logged before it takes effect.

The CLI (``blackbox access approve|refuse``) and the audit endpoint (``POST /v1/access-requests``,
``…/approve``, ``…/refuse``) both go through :class:`AccessDesk`, so the same rules and the same
access-log rows apply: only a regulator or counterparty files a request (for itself), only an
operator decides one, and if the log cannot be written nothing is filed or granted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from consumers.access.gate import AccessGate
from consumers.access.log import AccessRecord, Outcome
from consumers.access.requests import AccessRequest, AccessRequests
from consumers.access.scopes import Caller
from schemas.errors import AccessDenied, ContractError

DEFAULT_GRANT_DAYS = 30


@dataclass(frozen=True, slots=True)
class AccessDesk:
    gate: AccessGate
    requests: AccessRequests

    def file(self, caller: Caller, request: AccessRequest) -> AccessRequest:
        """Log and store ``request`` (already built for ``caller`` by :func:`new_request`)."""
        self.gate.record([_row(caller, request, at=self.gate.clock(), action="request", outcome="allowed")])
        return self.requests.add(request)

    def decide(
        self,
        caller: Caller,
        request_id: str,
        *,
        approve: bool,
        reason: str,
        expires_in: timedelta = timedelta(days=DEFAULT_GRANT_DAYS),
    ) -> AccessRequest:
        """Approve (a grant expiring ``expires_in`` from now) or refuse; only an operator may."""
        action = "approve" if approve else "refuse"
        request = self.requests.get(request_id)
        if caller.scope != "operator":
            self.gate.record(
                [
                    _row(
                        caller,
                        request,
                        at=self.gate.clock(),
                        action=action,
                        outcome="denied",
                        detail="only an operator decides",
                    )
                ]
            )
            raise AccessDenied(
                f"{caller.identity} ({caller.scope}) may not {action} {request_id}: only an operator decides"
            )
        if request.status != "pending":
            raise ContractError(
                f"request {request_id} was already {request.status} by {request.decided_by}", path="request"
            )
        now = self.gate.clock()
        expires = now + expires_in if approve else None
        detail = f"grant expires {expires.isoformat()}" if expires else ""
        self.gate.record(
            [_row(caller, request, at=now, action=action, outcome="allowed", detail=detail, reason=reason)]
        )
        return self.requests.decide(
            request_id, approve=approve, by=caller.identity, reason=reason, now=now, expires=expires
        )

    def visible(self, caller: Caller) -> list[AccessRequest]:
        """An operator sees every request; others their own."""
        every = self.requests.list()
        return every if caller.scope == "operator" else [r for r in every if r.caller == caller.identity]


def _row(
    caller: Caller,
    request: AccessRequest,
    *,
    at: datetime,
    action: str,
    outcome: Outcome,
    detail: str = "",
    reason: str = "",
) -> AccessRecord:
    what = ",".join(request.decisions) or f"agent={request.agent} {request.since}..{request.until}"
    return AccessRecord(
        at=at,
        caller=caller.identity,
        scope=caller.scope,
        decision_id=request.decisions[0] if len(request.decisions) == 1 else "",
        agent_id=request.agent,
        action=action,
        reason=reason or caller.reason,
        outcome=outcome,
        detail="; ".join(
            p for p in (f"request {request.request_id} for {request.caller}: {what}", detail) if p
        ),
        grant_id=request.request_id,
        authority=request.authority,
        purpose=request.purpose,
    )
