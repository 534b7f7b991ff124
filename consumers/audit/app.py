"""The audit endpoint's application: every route authenticates, is rate limited, passes the one access
gate and is logged — allowed or refused — before anything is served (DESIGN decisions 12 and 14).

Routes (``/openapi.json`` documents them; ``/docs`` renders it)::

    GET  /v1/decisions/{id}                 the capture, as the caller's scope sees it (consumers.audit.views)
    GET  /v1/decisions/{id}/verification    the read-time verdict (blackbox verify ID)
    GET  /v1/decisions/{id}/replays         the replay runs recorded for it
    GET  /v1/decisions/{id}/bundle          the evidence bundle (producers.evidence.bundle)
    POST /v1/access-requests                a regulator or counterparty asks for access, with authority
    GET  /v1/access-requests                an operator sees every request; others their own
    POST /v1/access-requests/{id}/approve   operator: the request becomes a grant with an expiry
    POST /v1/access-requests/{id}/refuse    operator

Errors are ``{"error": reason, "status": code}`` (plus ``part`` for evidence that does not verify):
401 no or bad credential, 403 refused by the gate, 404 no such decision, 413 body too large, 422
malformed body, 429 rate limited (``Retry-After``), 503 the access log cannot be written (nothing is
served) or a store is unreachable, 500 anything else — never a traceback.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from consumers.access.files import parse_duration
from consumers.access.gate import AccessLogUnavailable
from consumers.access.log import AccessRecord
from consumers.access.requests import new_request
from consumers.audit.auth import Authenticator, Principal
from consumers.audit.errors import Unauthenticated
from consumers.audit.limits import RateLimiter
from consumers.audit.oidc import oidc_from_settings
from consumers.audit.requests import AccessRequestBody, DecisionBody
from consumers.audit.store import replay_runs
from consumers.audit.views import capture_view, subject
from consumers.privacy.ids import index_ids
from producers.evidence import TrustStore
from schemas.errors import (
    AccessDenied,
    BlackboxError,
    BlobStoreError,
    CaptureNotFound,
    ContractError,
    IndexError_,
    VerificationError,
)

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.verify.bundle import Prover

__all__ = ["ApiError", "create_app"]

log = logging.getLogger("blackbox.audit")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MAX_ID = 200


class ApiError(Exception):
    def __init__(
        self, status: int, reason: str, *, part: str = "", headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(reason)
        self.status, self.reason, self.part, self.headers = status, reason, part, headers or {}


def _error(
    status: int, reason: str, *, part: str = "", headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": reason, "status": status}
    if part:
        body["part"] = part
    return JSONResponse(body, status_code=status, headers=headers)


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
        """Log a refusal that never reached the gate's decision (401, 404, 413, 422, 429)."""
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
            self._limit(
                f"addr:{request.client.host if request.client else '-'}", action=action, principal=None
            )
            self.refuse(action=action, status=401, reason=str(exc), decision_id=decision_id)
            raise ApiError(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from exc
        self._limit(principal.credential, action=action, principal=principal, decision_id=decision_id)
        return principal

    def _limit(self, key: str, *, action: str, principal: Principal | None, decision_id: str = "") -> None:
        wait = self.limiter.take(key)
        if wait > 0:
            self.refuse(
                action=action, status=429, reason="rate limited", principal=principal, decision_id=decision_id
            )
            raise ApiError(
                429, f"rate limited: retry in {wait:.1f}s", headers={"Retry-After": str(max(1, round(wait)))}
            )


def _decision_id(value: str) -> str:
    if not value or len(value) > MAX_ID or any(ord(c) < 0x20 for c in value):
        raise ContractError(f"not an id (at most {MAX_ID} printable characters)", path="id")
    return value


def create_app(
    rt: Runtime,
    *,
    clock: Callable[[], datetime] | None = None,
    prover: Prover | None = None,
    console: bool = True,
) -> FastAPI:
    """The audit endpoint over ``rt`` (its index, blob store, grants, tokens and settings).

    ``clock``: the time the gate, tokens and grants are judged at (tests move it). ``prover``: the
    transparency log's inclusion proofs for bundles (default :meth:`consumers.app.runtime.Runtime.bundle_prover`).
    ``console``: also serve the console's pages under ``/console``.
    """

    audit = Audit(rt, clock=clock or (lambda: datetime.now(UTC)), prover=prover or rt.bundle_prover())
    ids = index_ids(rt.settings)  # unseals the origin ids of the index's manifests (the gate reads them)
    app = FastAPI(
        title="blackbox audit endpoint",
        version="1",
        description="Authenticated, logged access to agent captures for operators, regulators and counterparties.",
    )
    bearer = HTTPBearer(
        auto_error=False, description="a token from `blackbox access token create`, or an OIDC JWT"
    )
    Credentials = Depends(bearer)
    app.state.audit = audit

    # -- errors: JSON with a reason, never a traceback ----------------------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.reason, part=exc.part, headers=exc.headers)

    @app.exception_handler(AccessLogUnavailable)
    async def _no_log(_: Request, exc: AccessLogUnavailable) -> JSONResponse:
        return _error(503, str(exc))  # fail closed: nothing is served without its log row

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        reason = f"invalid request: {where}: {first.get('msg', 'malformed')}" if where else "invalid request"
        try:
            audit.refuse(action=_action(request), status=422, reason=reason)
        except AccessLogUnavailable as log_error:
            return _error(503, str(log_error))
        return _error(422, reason)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        try:
            audit.refuse(action=_action(request), status=exc.status_code, reason=str(exc.detail))
        except AccessLogUnavailable as log_error:
            return _error(503, str(log_error))
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("audit endpoint: unexpected %s: %s", type(exc).__name__, exc, exc_info=exc)
        return _error(500, f"internal error ({type(exc).__name__})")

    # -- reads ------------------------------------------------------------------------------------
    @app.get("/v1/decisions/{decision_id}", summary="The capture, as your scope sees it")
    def read_capture(
        decision_id: str, request: Request, credentials: HTTPAuthorizationCredentials | None = Credentials
    ) -> dict[str, Any]:
        from consumers.storage.reader import load_capture
        from consumers.verify.stored import judge_shown
        from consumers.verify.verdict import Verdict

        principal = audit.principal(request, credentials, action="show", decision_id=decision_id[:MAX_ID])
        with _mapped(audit, principal, "show", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            try:
                shown = load_capture(
                    decision_id,
                    index=rt.index,
                    store=rt.blob_store,
                    gate=audit.gate,
                    caller=principal.caller,
                    ids=ids,
                )
            except (
                VerificationError
            ) as exc:  # allowed and logged, but the stored bytes are not the recorded ones
                failed = Verdict.failed(decision_id, exc, checked_at=audit.clock())
                return {"decisionId": decision_id, "verification": failed.to_json(), "capture": None}
            verdict = judge_shown(
                shown, index=rt.index, trust=audit.trust.current(), at=audit.clock(), ids=ids
            )
            return capture_view(shown, verdict.to_json(), principal.caller.scope)

    @app.get("/v1/decisions/{decision_id}/verification", summary="Is the stored capture evidence?")
    def read_verification(
        decision_id: str, request: Request, credentials: HTTPAuthorizationCredentials | None = Credentials
    ) -> dict[str, Any]:
        from consumers.verify.stored import stored_verdict

        principal = audit.principal(request, credentials, action="verify", decision_id=decision_id[:MAX_ID])
        with _mapped(audit, principal, "verify", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            audit.gate.authorize(principal.caller, subject(rt.index, decision_id, ids=ids), action="verify")
            verdict = stored_verdict(
                decision_id,
                index=rt.index,
                store=rt.blob_store,
                trust=audit.trust.current(),
                at=audit.clock(),
                ids=ids,
            )
            return {"decisionId": decision_id, **verdict.to_json()}

    @app.get("/v1/decisions/{decision_id}/replays", summary="Replay runs of the decision")
    def read_replays(
        decision_id: str, request: Request, credentials: HTTPAuthorizationCredentials | None = Credentials
    ) -> dict[str, Any]:
        principal = audit.principal(request, credentials, action="replays", decision_id=decision_id[:MAX_ID])
        with _mapped(audit, principal, "replays", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            audit.gate.authorize(principal.caller, subject(rt.index, decision_id, ids=ids), action="replays")
            return {"decisionId": decision_id, "runs": replay_runs(rt.index, decision_id)}

    @app.get(
        "/v1/decisions/{decision_id}/bundle", summary="The evidence bundle (verifies offline with the SDK)"
    )
    def read_bundle(
        decision_id: str, request: Request, credentials: HTTPAuthorizationCredentials | None = Credentials
    ) -> dict[str, Any]:
        from consumers.verify.bundle import export_bundle

        principal = audit.principal(request, credentials, action="export", decision_id=decision_id[:MAX_ID])
        with _mapped(audit, principal, "export", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            return export_bundle(
                decision_id,
                index=rt.index,
                store=rt.blob_store,
                trust=audit.trust.current(),
                gate=audit.gate,
                caller=principal.caller,
                prover=audit.prover,
                now=audit.clock(),
                ids=ids,
            )

    # -- access requests ----------------------------------------------------------------------------
    @app.post(
        "/v1/access-requests", status_code=201, summary="Ask for access, naming your authority and purpose"
    )
    def file_request(
        body: AccessRequestBody,
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Credentials,
    ) -> dict[str, Any]:
        principal = audit.principal(request, credentials, action="request")
        caller = principal.caller
        with _mapped(audit, principal, "request", ""):
            if caller.scope == "operator":
                audit.refuse(
                    action="request",
                    status=403,
                    reason="operators are not granted access by request",
                    principal=principal,
                )
                raise ApiError(
                    403,
                    "operators read under the default grant; access requests are for regulators and counterparties",
                )
            try:
                made = new_request(
                    caller=caller.identity,
                    scope=caller.scope,
                    legal_basis=body.authority.legalBasis,
                    reference=body.authority.reference,
                    purpose=body.purpose,
                    now=audit.clock(),
                    decisions=tuple(body.decisions),
                    agent=body.agent or "",
                    since=body.since,
                    until=body.until,
                )
            except ContractError as exc:
                audit.refuse(action="request", status=422, reason=str(exc), principal=principal)
                raise ApiError(422, str(exc)) from exc
            return audit.desk.file(caller, made).to_json()

    @app.get("/v1/access-requests", summary="Access requests: all for an operator, your own otherwise")
    def list_requests(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Credentials
    ) -> dict[str, Any]:
        principal = audit.principal(request, credentials, action="requests")
        with _mapped(audit, principal, "requests", ""):
            visible = audit.desk.visible(principal.caller)
            audit.gate.record(
                [
                    AccessRecord(
                        at=audit.clock(),
                        caller=principal.caller.identity,
                        scope=principal.caller.scope,
                        decision_id="",
                        agent_id="",
                        action="requests",
                        reason=principal.caller.reason,
                        outcome="allowed",
                        detail=f"{len(visible)} request(s) listed; {principal.credential}",
                    )
                ]
            )
            return {"requests": [r.to_json() for r in visible]}

    def _decide(
        request_id: str,
        body: DecisionBody,
        request: Request,
        credentials: HTTPAuthorizationCredentials | None,
        *,
        approve: bool,
    ) -> dict[str, Any]:
        action = "approve" if approve else "refuse"
        principal = audit.principal(request, credentials, action=action)
        with _mapped(audit, principal, action, ""):
            expires_in = parse_duration(body.expires, what="expires")
            return audit.desk.decide(
                principal.caller,
                _decision_id(request_id),
                approve=approve,
                reason=body.reason,
                expires_in=expires_in,
            ).to_json()

    @app.post(
        "/v1/access-requests/{request_id}/approve", summary="Operator: grant the request until it expires"
    )
    def approve(
        request_id: str,
        body: DecisionBody,
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Credentials,
    ) -> dict[str, Any]:
        return _decide(request_id, body, request, credentials, approve=True)

    @app.post("/v1/access-requests/{request_id}/refuse", summary="Operator: refuse the request")
    def refuse(
        request_id: str,
        body: DecisionBody,
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Credentials,
    ) -> dict[str, Any]:
        return _decide(request_id, body, request, credentials, approve=False)

    # -- the console (consumers.console), mounted here until the one application (DESIGN 21) takes it --
    if console:
        from consumers.console import console_router

        app.include_router(console_router(rt, clock=audit.clock, prover=audit.prover))

    app.add_middleware(_LimitBody, audit=audit)
    return app


def _action(request: Request) -> str:
    path = request.url.path
    if path.endswith("/bundle"):
        return "export"
    if path.endswith("/verification"):
        return "verify"
    if path.endswith("/replays"):
        return "replays"
    if path.startswith("/v1/access-requests"):
        return "approve" if path.endswith("/approve") else "refuse" if path.endswith("/refuse") else "request"
    return "show"


class _mapped:
    """Blackbox errors raised inside a route, as the endpoint's JSON errors (logging what the gate did not)."""

    def __init__(self, audit: Audit, principal: Principal, action: str, decision_id: str) -> None:
        self._audit, self._principal, self._action, self._decision_id = audit, principal, action, decision_id

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if exc is None or isinstance(exc, ApiError) or not isinstance(exc, BlackboxError):
            return
        if isinstance(exc, AccessLogUnavailable):
            raise ApiError(503, str(exc)) from exc
        if isinstance(exc, AccessDenied):  # the gate logged it
            raise ApiError(403, str(exc)) from exc
        if isinstance(exc, CaptureNotFound):
            self._log(404, str(exc))
            raise ApiError(404, str(exc)) from exc
        if isinstance(exc, VerificationError):
            self._log(409, str(exc))
            raise ApiError(409, f"not evidence: {exc}", part=exc.part) from exc
        if isinstance(exc, ContractError):
            self._log(422, str(exc))
            raise ApiError(422, str(exc)) from exc
        if isinstance(exc, IndexError_ | BlobStoreError):
            raise ApiError(503, f"a store is unavailable: {type(exc).__name__}") from exc
        raise ApiError(500, f"{type(exc).__name__}: {exc}") from exc

    def _log(self, status: int, reason: str) -> None:
        try:
            self._audit.refuse(
                action=self._action,
                status=status,
                reason=reason,
                principal=self._principal,
                decision_id=self._decision_id,
            )
        except AccessLogUnavailable as exc:
            raise ApiError(503, str(exc)) from exc


class _LimitBody:
    """ASGI wrapper: a request body over the limit is refused (413, logged) before the app reads it."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], audit: Audit) -> None:
        self.app = app
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.audit.max_body
        declared = dict(scope.get("headers") or []).get(b"content-length")
        chunks: list[bytes] = []
        size, more = 0, True
        if declared is not None and declared.isdigit() and int(declared) > limit:
            more = False
            size = int(declared)
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                break
            chunks.append(chunk)
            more = bool(message.get("more_body"))
        if size > limit:
            await self._too_large(scope, send, size)
            return
        body = b"".join(chunks)
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send, size: int) -> None:
        reason = f"the request body is larger than {self.audit.max_body} bytes"
        status = 413
        try:
            self.audit.refuse(action="request", status=413, reason=reason)
        except AccessLogUnavailable as exc:
            reason, status = str(exc), 503
        payload = json.dumps({"error": reason, "status": status}).encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
