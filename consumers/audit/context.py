"""What every audit route uses (:class:`Audit`): the runtime's gate, desk and tokens, the trust store
as it is now, who is calling, the limits, and the refusals that never reached the gate."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from consumers.access.log import AccessRecord
from consumers.audit.auth import Authenticator, Principal
from consumers.audit.errors import ApiError, Unauthenticated, error_json
from consumers.audit.oidc import oidc_from_settings
from consumers.web.limits import RateLimiter
from producers.evidence import TrustStore

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.verify.bundle import Prover

__all__ = ["MAX_ID", "Audit"]

MAX_ID = 200
ANONYMOUS_RATE, ANONYMOUS_BURST = 1.0, 10  # per client address, for refusals before anyone is known


class _TrustFile:
    """The trust store, re-read when its file changes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._store = TrustStore()

    def current(self) -> TrustStore:
        try:
            info = self._path.stat()
            stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._store = TrustStore.load(self._path, missing_ok=True)
                self._stamp = stamp
            return self._store


class Audit:
    """What every route uses: the runtime's index, blob store, gate, desk and tokens, and the limits."""

    def __init__(self, rt: Runtime, *, clock: Callable[[], datetime], prover: Prover | None) -> None:
        settings = rt.settings
        self.rt = rt
        self.clock = clock
        self.gate = rt.gate
        self.desk = rt.access_desk
        self.prover = prover
        self.trust = _TrustFile(settings.resolved_trust_store)
        self.auth = Authenticator(tokens=rt.tokens, oidc=oidc_from_settings(settings), clock=clock)
        self.limiter = RateLimiter(rate=settings.audit_rate, burst=settings.audit_burst)
        self.anonymous = RateLimiter(rate=ANONYMOUS_RATE, burst=ANONYMOUS_BURST)
        self.max_body = settings.audit_max_body_bytes

    def refuse(
        self,
        *,
        action: str,
        status: int,
        reason: str,
        principal: Principal | None = None,
        decision_id: str = "",
    ) -> None:
        """Log a refusal that never reached the gate's decision (401, 404, 422, 429)."""
        caller = principal.caller if principal else None
        self.gate.record(
            [
                AccessRecord(
                    at=self.clock(),
                    caller=caller.identity if caller else "-",
                    scope=caller.scope if caller else "-",
                    decision_id=decision_id,
                    agent_id="",
                    action=action,
                    reason=caller.reason if caller else "",
                    outcome="denied",
                    detail=f"{status} {reason}" + (f"; {principal.credential}" if principal else ""),
                )
            ]
        )

    def anonymous_refusal(self, request: Request, status: int, reason: str) -> JSONResponse:
        """A refusal before anyone is known (a body over the limit): answered, not logged, and
        limited per client address."""
        wait = self.anonymous.take(f"addr:{_address(request)}")
        if wait > 0:
            return error_json(429, "rate limited", headers={"Retry-After": str(max(1, round(wait)))})
        return error_json(status, reason, headers={"Connection": "close"})

    def not_granted(self, principal: Principal, action: str, decision_id: str) -> str:
        """What anyone but an operator is told when refused: the same whether the decision exists,
        is not granted or is not theirs (the access log keeps why)."""
        caller = principal.caller
        return (
            f"{caller.identity} ({caller.scope}) may not {action} {decision_id}: no grant covers it for you"
        )

    def denial_text(self, principal: Principal, message: str, action: str, decision_id: str) -> str:
        """The gate's refusal as told: in full to an operator, :meth:`not_granted` to anyone else (the
        gate's reason names the grants file and whether the decision is someone else's)."""
        if principal.caller.scope == "operator":
            return message
        return self.not_granted(principal, action, decision_id)

    def authenticated(self, action: str) -> Callable[..., Principal]:
        """The dependency every route starts with: who is calling (401 otherwise), within its rate."""
        bearer = HTTPBearer(
            auto_error=False, description="a token from `blackbox access token create`, or an OIDC JWT"
        )

        credentials_of = Depends(bearer)

        def dependency(
            request: Request, credentials: HTTPAuthorizationCredentials | None = credentials_of
        ) -> Principal:
            decision_id = str(request.path_params.get("decision_id", ""))[:MAX_ID]
            request.state.action = action
            principal = self.principal(request, credentials, action=action, decision_id=decision_id)
            request.state.principal = principal
            return principal

        return dependency

    def principal(
        self,
        request: Request,
        credentials: HTTPAuthorizationCredentials | None,
        *,
        action: str,
        decision_id: str = "",
    ) -> Principal:
        reason = request.query_params.get("reason", "")[:500]
        header = f"{credentials.scheme} {credentials.credentials}" if credentials else None
        try:
            principal = self.auth.authenticate(header, reason=reason)
        except Unauthenticated as exc:
            wait = self.anonymous.take(f"addr:{_address(request)}")
            if wait > 0:  # a flood of bad credentials: answered, not logged row by row
                raise ApiError(
                    429, "rate limited", headers={"Retry-After": str(max(1, round(wait)))}
                ) from exc
            self.refuse(action=action, status=401, reason=str(exc), decision_id=decision_id)
            raise ApiError(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from exc
        wait = self.limiter.take(principal.credential)
        if wait > 0:
            self.refuse(
                action=action, status=429, reason="rate limited", principal=principal, decision_id=decision_id
            )
            raise ApiError(
                429, f"rate limited: retry in {wait:.1f}s", headers={"Retry-After": str(max(1, round(wait)))}
            )
        return principal


def _address(request: Request) -> str:
    return request.client.host if request.client else "-"
